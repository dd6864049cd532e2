"""How the status sensor judges and heals, as plain data.

Why a dataclass beside the Dagster resource: the decision core (:mod:`.status_tick`) takes no
Dagster object, so a test replays recorded observations through it with any policy it builds, and
the deployment's policy (``MonitoringPolicyResource``, its defaults and the config file's
``monitoring:`` section) reaches the core as one value the resource builds
(:meth:`~lakebus_dagster.defs.monitoring.resources.MonitoringPolicyResource.status_policy`).
"""

from __future__ import annotations

from dataclasses import dataclass

from lakebus_dagster.monitor.restart_policy import RestartPolicy


@dataclass(frozen=True, kw_only=True)
class StatusPolicy:
    """The thresholds and switches of one status-sensor tick (each field is the resource's of that name)."""

    restarts: RestartPolicy
    unassigned_threshold_s: float
    missing_threshold_s: float
    kafka_unreadable_threshold_s: float
    slot_inactive_threshold_s: float
    recovery_stable_s: float
    auto_quarantine: bool
    ledger_after_stall: bool
    ledger_after_move: bool
    heal_dual_coordinators: bool
    stall_commit_intervals: int
    uncommitted_commit_intervals: int
