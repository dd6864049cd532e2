"""Schedules of change capture: ``cdc_offset_ledger_schedule`` runs the change topics' offset ledger on
the events ledger's cadence (:data:`lakebus_dagster.defs.ledger.jobs.LEDGER_CRON`, every 10 minutes;
each run incremental from the verified point, a record younger than its ``grace_s`` pending, not lost).
The code location registers it only when capture is on (:func:`lakebus_dagster.defs.cdc.build_defs`)."""

import dagster as dg

from lakebus_dagster.defs.cdc.ledger import cdc_offset_ledger
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.ledger.jobs import LEDGER_CRON
from lakebus_dagster.defs.resources import ConnectResource

CDC_LEDGER_SCHEDULE = "cdc_offset_ledger_schedule"


@dg.schedule(
    name=CDC_LEDGER_SCHEDULE,
    job=cdc_offset_ledger,
    cron_schedule=LEDGER_CRON,
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="The offset ledger over change capture, like offset_ledger_schedule: incremental, each run reads only "
    "what arrived since each change topic's verified point. Skips (with the reason in the tick history) while the "
    "change-table sink is not deployed yet.",
)
def cdc_ledger_schedule(context: dg.ScheduleEvaluationContext, capture: ChangeCaptureResource, connect: ConnectResource):
    if not capture.enabled:
        return dg.SkipReason("change capture is off (LAKEBUS_POSTGRES is not 'on'): no change topic to account for")
    name = capture.spec().sink_name
    with connect.client() as client:
        if not client.exists(name):
            return dg.SkipReason(f"connector {name} is not deployed yet (run provision_change_capture): nothing to verify")
    return dg.RunRequest()
