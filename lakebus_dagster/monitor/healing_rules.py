"""How the status sensor heals, decided as plain data: restart a failed task with Strimzi's backoff;
when a restart fails again on the same record, quarantine the record; when restarts run out,
escalate; run the offset ledger when a commit-coordinator stall resolves or the sink's tasks moved.

Each decision is an *intent* (:class:`RestartIntent`, :class:`QuarantineIntent`,
:class:`LedgerIntent`); the Dagster side turns intents into run requests of the jobs the sensor
targets (:mod:`lakebus_dagster.defs.monitoring.healing`). The book remembers what was decided, so
the next tick neither repeats nor forgets it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.connect import ConnectorOverview
from lakebus_dagster.monitor.alert_text import make_alert
from lakebus_dagster.monitor.incidents import IncidentBook, OpenIncident
from lakebus_dagster.monitor.moves import ledger_ran, placement, watch_placement
from lakebus_dagster.monitor.policy import StatusPolicy
from lakebus_dagster.monitor.stall import settled_after_seconds
from lakebus_dagster.monitor.stall_rules import stall_key


@dataclass(frozen=True)
class RestartIntent:
    """Restart ``connector`` for attempt ``attempt`` of an incident occurrence (only its failed
    instances, or all of them: a RUNNING sink without a commit coordinator has nothing FAILED)."""

    connector: str
    occurrence: str
    attempt: int
    reason: str
    only_failed: bool


@dataclass(frozen=True)
class QuarantineIntent:
    """Move ``record`` (the one a restart failed on again) to the DLQ and resume ``connector``."""

    connector: str
    occurrence: str
    record: str


@dataclass(frozen=True)
class LedgerIntent:
    """Run the offset ledger with ``grace_s``: ``after`` is ``"stall"`` (the stall occurrence that
    resolved, in ``label``) or ``"move"`` (``label``: the placement before -> after)."""

    connector: str
    run_key: str
    grace_s: float
    after: str
    label: str


Intent = RestartIntent | QuarantineIntent | LedgerIntent


def occurrence(key: str, inc: OpenIncident) -> str:
    """One occurrence of an incident: the same failure coming back later is a new occurrence, whose
    restarts must neither be deduplicated against (run keys) nor confused with (tags) the last one's."""
    return f"{key}@{inc.opened_at:.0f}"


def restart_attempt(occurrence_id: str, attempt: int) -> str:
    """How an observation names restart ``attempt`` of an occurrence whose run has ended."""
    return f"{occurrence_id}#{attempt}"


def restarts_to_check(book: IncidentBook) -> list[tuple[str, int]]:
    """The (occurrence, attempt) whose restart run the observation must look up: each open restartable
    incident's last restart (whether it ended decides if a failure on the same record is poison)."""
    return [(occurrence(key, inc), inc.restart_attempts) for key, inc in sorted(book.open.items())
            if inc.restartable and inc.restart_attempts]


def _is_poison(key: str, inc: OpenIncident, finished_restarts: Collection[str]) -> bool:
    """The task failed again on the record of the last restart, and that restart's run has ended (only
    then is the FAILED status a failure *after* the restart rather than the one it was meant to fix)."""
    return (
        inc.record is not None
        and inc.record == inc.restarted_on_record
        and inc.record not in inc.quarantined
        and restart_attempt(occurrence(key, inc), inc.restart_attempts) in finished_restarts
    )


def heal(book: IncidentBook, policy: StatusPolicy, now: float, healing: Collection[str],
         finished_restarts: Collection[str]) -> tuple[list[Intent], list[str]]:
    """Restart failed tasks with backoff; quarantine a record a restart failed on again; escalate.
    ``healing``: the connectors a healing run is working on (their FAILED status is that run's to fix:
    acting again would overlap it). Returns the intents and what to log."""
    intents: list[Intent] = []
    notes: list[str] = []
    acted: dict[str, str] = {}  # connector -> this tick's action (one per connector)
    for key, inc in sorted(book.open.items()):
        if not inc.restartable or not inc.active or inc.connector is None or inc.connector in healing:
            continue
        if inc.connector in acted:  # this tick's action on the connector covers its other incidents too
            if acted[inc.connector] == "restart":
                inc.restart_attempts, inc.last_restart_at, inc.restarted_on_record = inc.restart_attempts + 1, now, inc.record
            continue
        if _is_poison(key, inc, finished_restarts) and policy.auto_quarantine:
            acted[inc.connector] = "quarantine"
            inc.quarantined.append(inc.record)
            # the remediation run itself sends the one alert that says where the record went
            intents.append(QuarantineIntent(inc.connector, occurrence(key, inc), inc.record))
            notes.append(f"{key}: a restart failed again on {inc.record}; quarantining it")
            continue
        if policy.restarts.due(inc.restart_attempts, inc.last_restart_at, now):
            acted[inc.connector] = "restart"
            inc.restart_attempts += 1
            inc.last_restart_at = now
            inc.restarted_on_record = inc.record
            intents.append(RestartIntent(inc.connector, occurrence(key, inc), inc.restart_attempts, inc.summary,
                                         only_failed=inc.restart_scope != "all"))
        elif policy.restarts.exhausted(inc.restart_attempts) and not inc.escalated:
            inc.escalated = True
            book.pending_alerts.append(make_alert(
                "escalation", f"giving up auto-restart after {inc.restart_attempts} attempts: {inc.summary}",
                "restarting does not fix it; see the task trace (poison record? run remediate_poison_record)", key))
    return intents, notes


def ledger_after_stall(bus: BusLayout, cleared: list[tuple[str, OpenIncident]], policy: StatusPolicy) -> list[LedgerIntent]:
    """The offset ledger, at once, when the sink's commit-coordinator stall resolves.

    A stall of the 1.11/1.12 sink (a missing, duplicate or zombie coordinator) can lose records
    upstream: their Kafka offsets were committed, their data files never. The scheduled ledger would
    find them within 10 minutes plus its 300 s grace; run now, with a grace of two commit cycles
    (:func:`~lakebus_dagster.monitor.stall.settled_after_seconds`: commits have been landing for the
    recovery's whole stable window), it finds them while the ``requeue_after_loss_sensor`` can still
    put them back within minutes. It copies that grace into the re-queue it starts."""
    if not policy.ledger_after_stall:
        return []
    key = stall_key(bus.connector_name)
    grace_s = settled_after_seconds(bus.tuning.commit_interval_ms, bus.tuning.commit_timeout_ms)
    return [LedgerIntent(bus.connector_name, f"{occurrence(k, inc)}:ledger", grace_s, "stall", occurrence(k, inc))
            for k, inc in cleared if k == key]


def ledger_after_move(book: IncidentBook, bus: BusLayout, overview: Mapping[str, ConnectorOverview] | None,
                      stall_ledgers: list[LedgerIntent], policy: StatusPolicy, now: float) -> list[LedgerIntent]:
    """The offset ledger once after each move of the sink's tasks (:mod:`lakebus_dagster.monitor.moves`:
    a second coordinator can lose records upstream with no stall), once the new placement has held
    still for the recovery window (and at least the ledger's grace: records from before the move are
    judged). None while an incident of the sink is open (a stall's own ledger covers it), none when
    ``stall_ledgers`` has one this tick (the move is accounted for), none with ``ledger_after_move`` off.
    ``overview`` None: Connect was unreadable this tick — where the tasks run is unknown, not changed."""
    name = bus.connector_name
    if overview is None:
        return []
    if (sink := overview.get(name)) is None:  # deleted (its own incident): created again, it starts a new history
        book.moves.pop(name, None)
        return []
    state = ledger_ran(book.moves.get(name)) if stall_ledgers else book.moves.get(name)
    grace_s = settled_after_seconds(bus.tuning.commit_interval_ms, bus.tuning.commit_timeout_ms)
    hold = any(inc.connector == name for inc in book.open.values())
    book.moves[name], move = watch_placement(state, placement(sink), now, max(policy.recovery_stable_s, grace_s), hold=hold)
    if move is None or not policy.ledger_after_move:
        return []
    return [LedgerIntent(name, f"{name}:moved@{now:.0f}:ledger", grace_s, "move", f"{move.before} -> {move.after}")]
