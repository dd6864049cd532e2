"""What runs after a recovery: the offset ledger after every copy made (DLQ replay, poison-record
remediation, re-queue). The re-queue after a ledger run that found records lost is a monitoring
decision (its policy switch): :mod:`lakebus_dagster.defs.monitoring.requeue_sensor`."""

# no `from __future__ import annotations`: Dagster resolves the config and resource annotations at runtime

import dagster as dg

from lakebus_dagster.defs.ledger.jobs import ledger_job
from lakebus_dagster.defs.recovery.jobs import remediate_poison_record, replay_dlq
from lakebus_dagster.defs.recovery.requeue import requeue_lost_records


#: how often the run-status sensors (this one, the re-queue after a loss) look for finished runs:
#: re-queued records should follow a stall's ledger run within seconds, not the default 30 s tick
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
