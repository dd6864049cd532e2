"""The status sensor's healing, the Dagster side: the jobs it targets, the run store's answers the
core needs (healing runs in flight, restart runs that ended), and the run request of each healing
intent the core decided (:mod:`lakebus_dagster.monitor.healing_rules`: restart with Strimzi's
backoff, quarantine a poison record, escalate, the offset ledger after a stall or a move)."""

import time
import dagster as dg

from lakebus_dagster.defs.connectors.jobs import INCIDENT_TAG, MAINTENANCE_JOBS
from lakebus_dagster.defs.guard import confirm_config
from lakebus_dagster.defs.ledger.checks import CHECK_NAME as LEDGER_CHECK_OP
from lakebus_dagster.defs.ledger.jobs import ledger_job
from lakebus_dagster.defs.recovery.jobs import remediate_poison_record
from lakebus_dagster.monitor.healing_rules import Intent, QuarantineIntent, RestartIntent, restart_attempt, restarts_to_check
from lakebus_dagster.monitor.incidents import IncidentBook

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


def finished_restarts(instance: dg.DagsterInstance, cursor: str | None) -> tuple[IncidentBook, frozenset[str]]:
    """The previous tick's book (the sensor's cursor) and, of its open incidents' last restarts, the
    ones whose run has ended (:func:`~lakebus_dagster.monitor.healing_rules.restart_attempt`)."""
    book = IncidentBook.from_cursor(cursor)
    ended = set()
    for occurrence_id, attempt in restarts_to_check(book):
        # ended: only then is a FAILED status a failure *after* the restart rather than the stale one it was to fix
        runs = instance.get_runs(dg.RunsFilter(tags={INCIDENT_TAG: occurrence_id, "lakebus/attempt": str(attempt)}), limit=1)
        if runs and runs[0].status in _FINISHED:
            ended.add(restart_attempt(occurrence_id, attempt))
    return book, frozenset(ended)


def run_request(intent: Intent) -> dg.RunRequest:
    """The run of the job the sensor targets for one healing decision of the core."""
    if isinstance(intent, RestartIntent):
        # only_failed: a failed task restarts alone; a RUNNING sink without a commit coordinator has
        # nothing FAILED, so onlyFailed=true would restart nothing: it restarts every instance
        return dg.RunRequest(
            run_key=f"{intent.occurrence}:restart:{intent.attempt}",
            job_name=RESTART_JOB.name,
            run_config={"ops": {"restart_connector_op": {"config": {
                "connector": intent.connector, "only_failed": intent.only_failed, "include_tasks": True}}}},
            tags={"lakebus/reason": intent.reason[:250], INCIDENT_TAG: intent.occurrence,
                  "lakebus/attempt": str(intent.attempt), CONNECTOR_TAG: intent.connector},
        )
    if isinstance(intent, QuarantineIntent):
        return dg.RunRequest(
            run_key=f"{intent.occurrence}:quarantine:{intent.record}",
            job_name=QUARANTINE_JOB.name,
            # the remediation moves the connector's offsets: it is guarded, the request confirms the connector
            run_config=confirm_config("remediate_poison_record_op", intent.connector, connector=intent.connector),
            tags={INCIDENT_TAG: intent.occurrence, "lakebus/quarantine": intent.record, CONNECTOR_TAG: intent.connector},
        )
    tag = AFTER_STALL_TAG if intent.after == "stall" else AFTER_MOVE_TAG
    return dg.RunRequest(
        run_key=intent.run_key,
        job_name=LEDGER_JOB.name,
        run_config={"ops": {LEDGER_CHECK_OP: {"config": {"grace_s": intent.grace_s}}}},
        tags={tag: intent.label[:250], CONNECTOR_TAG: intent.connector},
    )
