"""The ledger's job: ``offset_ledger_job`` (the check, every 10 minutes, on its schedule). The
re-queue of what it finds lost is a recovery job (:mod:`lakebus_dagster.defs.recovery.requeue`)."""

# no `from __future__ import annotations`: Dagster resolves the config and resource annotations at runtime

import dagster as dg

from lakebus_dagster.defs.ledger.checks import offset_ledger_check
from lakebus_dagster.defs.resources import BusLayoutResource, ConnectResource

LEDGER_JOB = "offset_ledger_job"
LEDGER_CRON = "*/10 * * * *"

ledger_job = dg.define_asset_job(
    LEDGER_JOB,
    selection=dg.AssetSelection.checks(offset_ledger_check),
    description="Run the offset ledger check: every bus offset in exactly one place (ODS row, DLQ record, re-queued, tombstone, retired by the ODS retention).",
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
