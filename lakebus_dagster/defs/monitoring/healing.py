"""How the status sensor heals: restart a failed task with Strimzi's backoff; when a restart fails
again on the same record and its root cause is the record's data, quarantine it (the
``remediate_poison_record`` job); when restarts run out, escalate. Decisions become RunRequests of
jobs the sensor names as its targets; the book (the sensor's cursor) remembers what was done."""

import time
from collections.abc import Mapping

import dagster as dg

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.defs.connectors.jobs import INCIDENT_TAG, MAINTENANCE_JOBS
from lakebus_dagster.defs.ledger.checks import CHECK_NAME as LEDGER_CHECK_OP
from lakebus_dagster.defs.ledger.jobs import ledger_job
from lakebus_dagster.defs.recovery.jobs import remediate_poison_record
from lakebus_dagster.defs.alerts import make_alert
from lakebus_dagster.defs.guard import confirm_config
from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource
from lakebus_dagster.monitor.stall_rules import stall_key
from lakebus_dagster.connect import ConnectorOverview
from lakebus_dagster.monitor.incidents import IncidentBook, OpenIncident
from lakebus_dagster.monitor.moves import ledger_ran, placement, watch_placement
from lakebus_dagster.monitor.stall import settled_after_seconds

RESTART_JOB = next(j for j in MAINTENANCE_JOBS if j.name == "restart_connector")
QUARANTINE_JOB = remediate_poison_record
LEDGER_JOB = ledger_job
#: the tag of a ledger run launched when a stall resolved: the stall's occurrence
AFTER_STALL_TAG = "lakebus/after_stall"
#: the tag of a ledger run launched after the sink's tasks moved: "<placement before> -> <after>"
AFTER_MOVE_TAG = "lakebus/after_move"
_FINISHED = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}
#: the connector a healing run works on (the sensor's own runs carry it)
CONNECTOR_TAG = "lakebus/connector"
_IN_FLIGHT = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
              dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]


#: a healing run queued or running for longer than this is presumed stuck (its run worker died; the
#: local instance's default run launcher cannot tell): it no longer holds the connector's healing back
HEALING_RUN_STALE_S = 900.0


def connectors_being_healed(instance: dg.DagsterInstance, now: float | None = None) -> set[str]:
    """Connectors a healing run of the sensor is working on now: a quarantine stops the connector to
    move its offsets, a restart of every instance stops and resumes it, so for that run's seconds
    STOPPED is expected (not an incident), and no other healing run may start on it."""
    since = (time.time() if now is None else now) - HEALING_RUN_STALE_S
    records = [r for job in (QUARANTINE_JOB.name, RESTART_JOB.name)
               for r in instance.get_run_records(dg.RunsFilter(job_name=job, statuses=_IN_FLIGHT))]
    return {r.dagster_run.tags[CONNECTOR_TAG] for r in records
            if CONNECTOR_TAG in r.dagster_run.tags and r.create_timestamp.timestamp() >= since}


def occurrence(key: str, inc: OpenIncident) -> str:
    """One occurrence of an incident: the same failure coming back later is a new occurrence, whose
    restarts must neither be deduplicated against (run keys) nor confused with (tags) the last one's."""
    return f"{key}@{inc.opened_at:.0f}"


def _restart_request(connector: str, key: str, attempt: int, reason: str, only_failed: bool = True) -> dg.RunRequest:
    """``only_failed``: a failed task restarts alone; a RUNNING sink without a commit coordinator has
    nothing FAILED, so ``onlyFailed=true`` would restart nothing — it restarts every instance."""
    return dg.RunRequest(
        run_key=f"{key}:restart:{attempt}",
        job_name=RESTART_JOB.name,
        run_config={"ops": {"restart_connector_op": {"config": {"connector": connector, "only_failed": only_failed,
                                                                 "include_tasks": True}}}},
        tags={"lakebus/reason": reason[:250], INCIDENT_TAG: key, "lakebus/attempt": str(attempt), CONNECTOR_TAG: connector},
    )


def _quarantine_request(connector: str, key: str, record: str) -> dg.RunRequest:
    return dg.RunRequest(
        run_key=f"{key}:quarantine:{record}",
        job_name=QUARANTINE_JOB.name,
        # the remediation moves the connector's offsets: it is guarded, the request confirms the connector
        run_config=confirm_config("remediate_poison_record_op", connector, connector=connector),
        tags={INCIDENT_TAG: key, "lakebus/quarantine": record, CONNECTOR_TAG: connector},
    )


def _restart_finished(instance: dg.DagsterInstance, key: str, attempt: int) -> bool:
    """Has the restart run for ``attempt`` of incident ``key`` ended? Only then is a FAILED status
    a failure *after* the restart rather than the stale one the restart was meant to fix."""
    runs = instance.get_runs(dg.RunsFilter(tags={INCIDENT_TAG: key, "lakebus/attempt": str(attempt)}), limit=1)
    return bool(runs) and runs[0].status in _FINISHED


def heal(book: IncidentBook, context: dg.SensorEvaluationContext, policy: MonitoringPolicyResource, now: float,
         healing: set[str]) -> list[dg.RunRequest]:
    """Restart failed tasks with backoff; quarantine a record a restart failed on again; escalate.
    ``healing``: the connectors a healing run is working on (:func:`connectors_being_healed`)."""
    restarts = policy.restart_policy()
    requests: list[dg.RunRequest] = []
    acted: dict[str, str] = {}  # connector -> this tick's action (one per connector)
    # A healing run still queued or running (a restart, or a quarantine, which stops the connector,
    # moves its offsets and resumes it) is working on the FAILED status this tick sees: acting again
    # would overlap it (CI run 7: a second restart requested while the quarantine run was starting).
    for key, inc in sorted(book.open.items()):
        if not inc.restartable or not inc.active or inc.connector is None or inc.connector in healing:
            continue
        if inc.connector in acted:  # this tick's action on the connector covers its other incidents too
            if acted[inc.connector] == "restart":
                inc.restart_attempts, inc.last_restart_at, inc.restarted_on_record = inc.restart_attempts + 1, now, inc.record
            continue
        if _is_poison(inc, key, context.instance) and policy.auto_quarantine:
            acted[inc.connector] = "quarantine"
            inc.quarantined.append(inc.record)
            # the remediation run itself sends the one alert that says where the record went
            requests.append(_quarantine_request(inc.connector, occurrence(key, inc), inc.record))
            context.log.info(f"{key}: a restart failed again on {inc.record}; quarantining it")
            continue
        if restarts.due(inc.restart_attempts, inc.last_restart_at, now):
            acted[inc.connector] = "restart"
            inc.restart_attempts += 1
            inc.last_restart_at = now
            inc.restarted_on_record = inc.record
            requests.append(_restart_request(inc.connector, occurrence(key, inc), inc.restart_attempts, inc.summary,
                                             only_failed=inc.restart_scope != "all"))
        elif restarts.exhausted(inc.restart_attempts) and not inc.escalated:
            inc.escalated = True
            book.pending_alerts.append(make_alert(
                "escalation", f"giving up auto-restart after {inc.restart_attempts} attempts: {inc.summary}",
                "restarting does not fix it; see the task trace (poison record? run remediate_poison_record)", key))
    return requests


def _is_poison(inc: OpenIncident, key: str, instance: dg.DagsterInstance) -> bool:
    return (
        inc.record is not None
        and inc.record == inc.restarted_on_record
        and inc.record not in inc.quarantined
        and _restart_finished(instance, occurrence(key, inc), inc.restart_attempts)
    )


def ledger_after_stall(bus: BusLayout, cleared: list[tuple[str, OpenIncident]], policy: MonitoringPolicyResource) -> list[dg.RunRequest]:
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
    return [
        dg.RunRequest(
            run_key=f"{occurrence(k, inc)}:ledger",
            job_name=LEDGER_JOB.name,
            run_config={"ops": {LEDGER_CHECK_OP: {"config": {"grace_s": grace_s}}}},
            tags={AFTER_STALL_TAG: occurrence(k, inc), CONNECTOR_TAG: bus.connector_name},
        )
        for k, inc in cleared if k == key
    ]


def ledger_after_move(book: IncidentBook, bus: BusLayout, overview: Mapping[str, ConnectorOverview] | None,
                      stall_ledgers: list[dg.RunRequest], policy: MonitoringPolicyResource, now: float) -> list[dg.RunRequest]:
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
    return [dg.RunRequest(
        run_key=f"{name}:moved@{now:.0f}:ledger",
        job_name=LEDGER_JOB.name,
        run_config={"ops": {LEDGER_CHECK_OP: {"config": {"grace_s": grace_s}}}},
        tags={AFTER_MOVE_TAG: f"{move.before} -> {move.after}"[:250], CONNECTOR_TAG: name},
    )]
