"""When the ledger runs: every 10 minutes, and after every successful DLQ replay or remediation
(both put copies on the bus whose originals the ledger must now find accounted for)."""

from __future__ import annotations

import dagster as dg

from lakebus_dagster.defs.ledger.checks import offset_ledger_check
from lakebus_dagster.defs.monitoring.jobs import remediate_poison_record, replay_dlq
from lakebus_dagster.defs.resources import BusLayoutResource, ConnectResource

LEDGER_JOB = "offset_ledger_job"
LEDGER_CRON = "*/10 * * * *"

ledger_job = dg.define_asset_job(
    LEDGER_JOB,
    selection=dg.AssetSelection.checks(offset_ledger_check),
    description="Run the offset ledger check: every bus offset in exactly one place (ODS row, DLQ record, re-queued, tombstone).",
    tags={"domain": "ledger"},
)

@dg.schedule(
    name="offset_ledger_schedule",
    job=ledger_job,
    cron_schedule=LEDGER_CRON,
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Incremental: each run reads only what arrived since the last verified point. Skips (with the reason "
    "in the tick history) while the bus's sink connector is not deployed yet.",
)
def ledger_schedule(context: dg.ScheduleEvaluationContext, layout: BusLayoutResource, connect: ConnectResource):
    name = layout.layout().connector_name
    with connect.client() as client:
        if not client.exists(name):
            return dg.SkipReason(f"connector {name} is not deployed yet (run provision_lakebus): nothing to verify")
    return dg.RunRequest()


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    monitored_jobs=[replay_dlq, remediate_poison_record],
    request_job=ledger_job,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Runs the offset ledger after every successful replay_dlq / remediate_poison_record run.",
)
def ledger_after_recovery_sensor(context: dg.RunStatusSensorContext):
    run = context.dagster_run
    return dg.RunRequest(run_key=f"ledger-after-{run.run_id}", tags={"lakebus/after_run": run.run_id, "lakebus/after_job": run.job_name})
