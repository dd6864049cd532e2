"""The re-queue after a loss: an offset_ledger run that found records the sink passed without landing
starts ``requeue_lost_records`` (policy ``auto_requeue_lost``)."""

# no `from __future__ import annotations`: Dagster resolves the config and resource annotations at runtime

import dagster as dg

from lakebus_dagster.defs.ledger.checks import ledger_grace_of_run, lost_count_of_run
from lakebus_dagster.defs.guard import confirm_config
from lakebus_dagster.defs.ledger.jobs import ledger_job
from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource
from lakebus_dagster.defs.recovery.requeue import requeue_lost_records
from lakebus_dagster.defs.recovery.sensors import RUN_STATUS_INTERVAL_S
from lakebus_dagster.defs.resources import BusLayoutResource


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    minimum_interval_seconds=RUN_STATUS_INTERVAL_S,
    monitored_jobs=[ledger_job],
    request_job=requeue_lost_records,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="After an offset_ledger_job run that found records lost, runs requeue_lost_records (policy "
    "auto_requeue_lost, on by default) with that run's grace: records the sink passed without landing are copied "
    "back onto the bus.",
)
def requeue_after_loss_sensor(context: dg.RunStatusSensorContext, monitoring_policy: MonitoringPolicyResource,
                              layout: BusLayoutResource):
    run = context.dagster_run
    lost = lost_count_of_run(context.instance, run.run_id)
    if not lost:
        return dg.SkipReason(f"ledger run {run.run_id}: nothing lost")
    if not monitoring_policy.auto_requeue_lost:
        return dg.SkipReason(f"ledger run {run.run_id}: {lost} record(s) lost; auto_requeue_lost is off: launch "
                             "requeue_lost_records by hand")
    # the re-queue judges with the grace its ledger run used: what that run called lost is lost for it too
    grace_s = ledger_grace_of_run(run)
    # the re-queue is guarded: the request confirms the bus topic it copies onto
    run_config = confirm_config("requeue_lost_records_op", layout.layout().bus_topic.name,
                                **({"grace_s": grace_s} if grace_s is not None else {}))
    return dg.RunRequest(run_key=f"requeue-after-{run.run_id}", run_config=run_config,
                         tags={"lakebus/after_run": run.run_id, "lakebus/lost": str(lost)})
