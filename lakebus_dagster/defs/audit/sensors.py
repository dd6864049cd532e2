"""``operator_audit_sensor``: every finished run of an audited job becomes one observation of
``lakebus/audit``, exactly once.

Why a plain sensor over Dagster's run-status events, not three ``run_status_sensor``\\ s: a run
status sensor handles one status and stops at the first run its function answers, so a backlog of
actions would be recorded one run per tick. This sensor reads the SUCCESS, FAILURE and CANCELED
events of the instance's event log (``fetch_run_status_changes``, the public reader the run-status
sensors use), each from its own storage-id cursor, keeps those of runs tagged
:data:`~lakebus_dagster.defs.guard.AUDIT_TAG`, and returns their observations with the advanced
cursor in one ``SensorResult``: the daemon writes both in the same tick, into the instance's own
storage (PostgreSQL in the deployment), so the trail survives restarts and a run is never recorded
twice. Nothing is caught: a tick that cannot read the log fails, visibly, and the next one retries
from the same cursor.
"""

from __future__ import annotations

import json

import dagster as dg

from lakebus_dagster.defs.audit.records import audit_observation
from lakebus_dagster.defs.guard import AUDIT_TAG

#: the run-ending events recorded, by the name the cursor keeps
AUDITED_EVENTS = (dg.DagsterEventType.RUN_SUCCESS, dg.DagsterEventType.RUN_FAILURE, dg.DagsterEventType.RUN_CANCELED)
#: run-ending events read per kind and tick (a longer backlog goes on next tick)
BATCH = 200
AUDIT_INTERVAL_S = 30


def _cursor(text: str | None) -> dict[str, int]:
    return {k: int(v) for k, v in json.loads(text).items()} if text else {}


def audit_tick(instance: dg.DagsterInstance, cursor: str | None) -> dg.SensorResult:
    """The observations of the audited runs that ended since ``cursor``, and the cursor past them."""
    after = _cursor(cursor)
    observations: list[dg.AssetObservation] = []
    for event_type in AUDITED_EVENTS:
        found = instance.fetch_run_status_changes(
            dg.RunStatusChangeRecordsFilter(event_type=event_type, after_storage_id=after.get(event_type.value)),
            limit=BATCH, ascending=True,
        ).records
        ids = [r.run_id for r in found]
        runs = {r.dagster_run.run_id: r for r in instance.get_run_records(dg.RunsFilter(run_ids=ids))} if ids else {}
        for event in found:
            run = runs.get(event.run_id)  # a run deleted since it ended has nothing left to record
            if run is not None and AUDIT_TAG in run.dagster_run.tags:
                entry = event.event_log_entry
                message = entry.dagster_event.message if entry.dagster_event else entry.user_message
                observations.append(audit_observation(run, event_type.value, message or ""))
            after[event_type.value] = event.storage_id
    return dg.SensorResult(asset_events=observations, cursor=json.dumps(after, sort_keys=True))


@dg.sensor(
    name="operator_audit_sensor",
    minimum_interval_seconds=AUDIT_INTERVAL_S,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Records every finished run of an operator action (jobs tagged lakebus/audit: the guarded, provisioning "
    "and connector maintenance jobs) as one observation of lakebus/audit: job, run, who launched it and from where, "
    "its config with secrets redacted, outcome, times.",
)
def operator_audit_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    return audit_tick(context.instance, context.cursor)
