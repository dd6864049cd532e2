"""How the connector sensor judges and heals (thresholds, auto-restart policy). Where alerts go is
shared by every domain: :mod:`lakebus_dagster.defs.alerts`."""

import dagster as dg
from pydantic import Field

from lakebus_dagster.monitor.policy import StatusPolicy
from lakebus_dagster.monitor.restart_policy import RestartPolicy


class MonitoringPolicyResource(dg.ConfigurableResource):
    """How the connector sensor judges and heals: thresholds and the auto-restart policy.

    Auto-restart follows Strimzi: restart number n+1 waits min(n² + n, cap) backoff units
    (minutes by default: 0, 2, 6, 12, 20, 30, 42, 56, 60, ...) and never starts while restart n's
    run is still queued or running, at most ``max_restarts`` times, then the incident is escalated
    instead — a task failing on the same record is not fixed by restarts.
    """

    auto_restart: bool = True
    max_restarts: int = 5
    backoff_cap_units: float = 60.0
    backoff_unit_seconds: float = 60.0
    unassigned_threshold_s: float = Field(default=120.0, description="a task UNASSIGNED this long is an incident")
    missing_threshold_s: float = Field(
        default=300.0, description="a declared connector absent from Connect this long is an incident (first provisioning)"
    )
    kafka_unreadable_threshold_s: float = Field(
        default=60.0,
        description="a read from Kafka (the sink's progress, the declared connector states) failing this long is an "
        "incident; a partition leader lost with its broker answers again within seconds, once another replica leads",
    )
    slot_inactive_threshold_s: float = Field(
        default=300.0, description="change capture's replication slot inactive (no source reads it) this long is an "
        "incident: the server keeps its WAL until max_slot_wal_keep_size, then invalidates it",
    )
    recovery_stable_s: float = Field(default=90.0, description="an incident resolves after its condition is gone this long")
    auto_quarantine: bool = Field(
        default=True,
        description="when a restart fails again on the same record, run remediate_poison_record: the record goes to the "
        "DLQ with its error, the records before it are kept, the connector resumes",
    )
    auto_requeue_lost: bool = Field(
        default=True,
        description="when an offset_ledger run finds records the sink passed without landing, run requeue_lost_records: "
        "a copy of each goes back onto the bus, named as a re-queue of its original (records removed from a table "
        "after they landed are never re-sent automatically)",
    )
    ledger_after_stall: bool = Field(
        default=True,
        description="when a commit-coordinator stall (missing, duplicate or zombie coordinator) resolves, run the offset "
        "ledger at once, with a grace of two commit cycles instead of 300 s: records the stall lost are found within "
        "a minute and, with auto_requeue_lost, re-queued right after (not at the next 10-minute ledger run)",
    )
    ledger_after_move: bool = Field(
        default=True,
        description="when the sink's tasks moved (a worker left, froze, rejoined; a restart; a rebalance) and their new "
        "placement held still for recovery_stable_s, run the offset ledger once: a second commit coordinator can lose "
        "records upstream without any stall (the watermark moves past them); with auto_requeue_lost they are re-queued "
        "right after. Off: such a loss waits for the scheduled ledger (every 10 minutes, 300 s grace)",
    )
    heal_dual_coordinators: bool = Field(
        default=True,
        description="when the sink runs two commit coordinators (apache/iceberg#17637: seen after a worker rejoined) — "
        "its coordinators' consumer group keeps two members for 3 commit intervals (always 2 intervals past the control "
        "clients' session), or its finished commit cycles overlap on the control topic within 2 x (commit interval + "
        "commit timeout) — open the stall incident and restart the connector (one "
        "election), then run the offset ledger at its recovery. Either sign is shown either way (ODS observations, "
        "lakebus status)",
    )
    stall_commit_intervals: int = Field(
        default=6, ge=1,
        description="a RUNNING sink with lag whose committed offsets do not move for this many commit intervals (at least "
        "two commit timeouts) is a stall incident",
    )

    uncommitted_commit_intervals: int = Field(
        default=2, ge=1,
        description="a RUNNING sink with records past its watermark (valid-through-ts), no new Iceberg commit for this "
        "many commit intervals and no commit cycle under way on its control topic (no StartCommit, DataWritten or "
        "DataComplete past the coordinator's committed offset) has lost its commit coordinator: a stall "
        "incident, healed by restarting the connector. With the status sensor ticking every commit interval, 2 alerts "
        "within 3 intervals of the last commit. Commit cycles that keep finishing (the coordinator's offset moves) "
        "with records owed and no Iceberg commit for the stall window (stall_commit_intervals, at least two commit "
        "timeouts; restarted when the tasks move) are duplicate coordinators: the same incident, healed the same way",
    )

    def restart_policy(self) -> RestartPolicy:
        return RestartPolicy(self.auto_restart, self.max_restarts, self.backoff_cap_units, self.backoff_unit_seconds)

    def status_policy(self) -> StatusPolicy:
        """This policy as the plain data the decision core reads."""
        return StatusPolicy(
            restarts=self.restart_policy(), unassigned_threshold_s=self.unassigned_threshold_s,
            missing_threshold_s=self.missing_threshold_s, kafka_unreadable_threshold_s=self.kafka_unreadable_threshold_s,
            slot_inactive_threshold_s=self.slot_inactive_threshold_s, recovery_stable_s=self.recovery_stable_s,
            auto_quarantine=self.auto_quarantine, ledger_after_stall=self.ledger_after_stall,
            ledger_after_move=self.ledger_after_move, heal_dual_coordinators=self.heal_dual_coordinators,
            stall_commit_intervals=self.stall_commit_intervals, uncommitted_commit_intervals=self.uncommitted_commit_intervals,
        )

