"""What runs after what: the ledger after every copy made (replay, remediation, re-queue), and the
re-queue after a ledger run that found records lost."""

# no `from __future__ import annotations`: Dagster resolves the config and resource annotations at runtime

import dagster as dg

from lakebus_dagster.defs.ledger.checks import CHECK_NAME
from lakebus_dagster.defs.ledger.jobs import ledger_job, requeue_lost_records
from lakebus_dagster.defs.monitoring.jobs import remediate_poison_record, replay_dlq
from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource


#: how often the two sensors look for finished runs: re-queued records should follow a stall's
#: ledger run within seconds, not the default 30 s tick
RUN_STATUS_INTERVAL_S = 10


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    minimum_interval_seconds=RUN_STATUS_INTERVAL_S,
    monitored_jobs=[replay_dlq, remediate_poison_record, requeue_lost_records],
    request_job=ledger_job,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Runs the offset ledger after every successful replay_dlq / remediate_poison_record / "
    "requeue_lost_records run (each puts copies on the bus whose originals the ledger must find accounted for).",
)
def ledger_after_recovery_sensor(context: dg.RunStatusSensorContext):
    run = context.dagster_run
    return dg.RunRequest(run_key=f"ledger-after-{run.run_id}", tags={"lakebus/after_run": run.run_id, "lakebus/after_job": run.job_name})


def lost_count_of_run(instance: dg.DagsterInstance, run_id: str) -> int:
    """The largest ``lost_count`` among the offset_ledger check evaluations of one run (0 if none)."""
    lost = 0
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
        evaluation = entry.dagster_event.event_specific_data if entry.dagster_event else None
        value = getattr(evaluation, "metadata", {}).get("lost_count")
        if value is not None:
            lost = max(lost, int(value.value))
    return lost


def ledger_grace_of_run(run: dg.DagsterRun) -> float | None:
    """The grace a ledger run was launched with (a stall's ledger run sets a short one), if any."""
    config = ((run.run_config or {}).get("ops") or {}).get(CHECK_NAME, {}).get("config") or {}
    return config.get("grace_s")


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
def requeue_after_loss_sensor(context: dg.RunStatusSensorContext, monitoring_policy: MonitoringPolicyResource):
    run = context.dagster_run
    lost = lost_count_of_run(context.instance, run.run_id)
    if not lost:
        return dg.SkipReason(f"ledger run {run.run_id}: nothing lost")
    if not monitoring_policy.auto_requeue_lost:
        return dg.SkipReason(f"ledger run {run.run_id}: {lost} record(s) lost; auto_requeue_lost is off: launch "
                             "requeue_lost_records by hand")
    # the re-queue judges with the grace its ledger run used: what that run called lost is lost for it too
    grace_s = ledger_grace_of_run(run)
    run_config = {"ops": {"requeue_lost_records_op": {"config": {"grace_s": grace_s}}}} if grace_s is not None else {}
    return dg.RunRequest(run_key=f"requeue-after-{run.run_id}", run_config=run_config,
                         tags={"lakebus/after_run": run.run_id, "lakebus/lost": str(lost)})
