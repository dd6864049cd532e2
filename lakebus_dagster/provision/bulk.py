"""What a bulk pause / resume / stop does to each connector (pure rules, no Dagster, no I/O).

Connectors lakebus owns follow their *declared* target state: a bulk pause or stop declares the
owned connectors it parks, and a bulk resume lifts only the declarations a bulk job recorded, so a
connector an operator parked on purpose (``pause_connector`` / ``stop_connector``) stays parked.
Connectors lakebus does not own have no declaration: the bulk job's verb applies to them directly.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakebus_dagster.bus.target_state import DeclaredState, TargetState

#: jobs whose declarations resume_all_connectors may lift (an operator's own pause/stop is kept)
BULK_PARK_JOBS = ("pause_all_connectors", "stop_all_connectors")


@dataclass
class LiveConnector:
    name: str
    state: str
    owned: bool
    declared: DeclaredState | None
    default: TargetState

    @property
    def declared_state(self) -> TargetState:
        return self.declared.state if self.declared else self.default


def should_declare(c: LiveConnector, target: TargetState, job: str) -> bool:
    """Bulk pause/stop park owned connectors declared running (stop also paused ones); bulk resume
    lifts only what a bulk pause/stop parked — an operator's own pause or stop is kept."""
    current = c.declared_state
    if target is TargetState.RUNNING:
        return current is not TargetState.RUNNING and c.declared is not None and c.declared.job in BULK_PARK_JOBS
    if target is TargetState.PAUSED:
        return current is TargetState.RUNNING
    return current is not TargetState.STOPPED


def live_target(c: LiveConnector, target: TargetState, job: str) -> TargetState | None:
    """The state to move ``c`` to, or None to leave it. Owned connectors follow their declaration
    after this job's change; others follow the job (resume only lifts PAUSED/STOPPED ones)."""
    if c.owned:
        declared = target if should_declare(c, target, job) else c.declared_state
        if target is TargetState.RUNNING and declared is not TargetState.RUNNING:
            return None  # declared parked by an operator: resume_all leaves it
        if target is TargetState.PAUSED and declared is TargetState.STOPPED:
            return None
        return declared if declared is target else None
    if target is TargetState.RUNNING:
        return target if c.state in {"PAUSED", "STOPPED"} else None
    if target is TargetState.PAUSED and c.state == "STOPPED":
        return None
    return target
