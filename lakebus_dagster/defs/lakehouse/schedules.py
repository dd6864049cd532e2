"""Schedules of the lakehouse domain. The DWS builds and the ODS observation run by default; the
maintenance schedule deletes data (retention, expiry, orphans) and so starts STOPPED until its
retention is configured for the deployment.

* hourly, at :15 — the hour that closed 15 minutes ago (``LATE_DATA_LAG_MINUTES``);
* daily, 01:30 UTC — ``dws_user_day`` for the day before;
* daily, 02:00 UTC — the late-data sweep: the day before's 24 hours of the hour tables again, as
  ONE run over the partition range (the MERGE makes it an idempotent refresh);
* daily, 04:00 UTC — maintenance; every 10 minutes — ODS observations + freshness checks.
"""

from collections.abc import Mapping
from datetime import datetime, timedelta

import dagster as dg

from lakebus_dagster.defs.lakehouse.constants import (
    AssetJob,
    DAILY_RUN_HOUR,
    DAILY_RUN_MINUTE,
    DWS_DAILY_JOB,
    DWS_HOURLY_JOB,
    LATE_DATA_LAG_MINUTES,
    LATE_DATA_SWEEP_CRON,
    MAINTENANCE_CRON,
    OBSERVE_ODS_CRON,
)
from lakebus_dagster.defs.lakehouse.partitions import HOUR_KEY_FORMAT

#: Dagster's run tags for a single run over a partition range (what a single-run backfill sets)
PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"
PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"


def previous_day_hour_range(scheduled: dg.ScheduleEvaluationContext) -> tuple[str, str]:
    """First and last hourly partition keys of the UTC day before the tick."""
    day = (scheduled.scheduled_execution_time - timedelta(days=1)).date()
    midnight = datetime(day.year, day.month, day.day)
    return midnight.strftime(HOUR_KEY_FORMAT), (midnight + timedelta(hours=23)).strftime(HOUR_KEY_FORMAT)


def build_schedules(
    dws_jobs: Mapping[str, AssetJob],
    observe_job: AssetJob,
    maintenance_job: dg.JobDefinition,
) -> list[dg.ScheduleDefinition]:
    running, stopped = dg.DefaultScheduleStatus.RUNNING, dg.DefaultScheduleStatus.STOPPED
    schedules: list[dg.ScheduleDefinition] = []
    hourly, daily = dws_jobs.get(DWS_HOURLY_JOB), dws_jobs.get(DWS_DAILY_JOB)
    if hourly is not None:
        schedules.append(dg.build_schedule_from_partitioned_job(
            hourly,
            name="dws_hourly_schedule",
            minute_of_hour=LATE_DATA_LAG_MINUTES,
            description=f"Every hour at :{LATE_DATA_LAG_MINUTES:02d}, the hour that has just closed.",
            default_status=running,
        ))

        @dg.schedule(
            job=hourly,
            cron_schedule=LATE_DATA_SWEEP_CRON,
            execution_timezone="UTC",
            name="dws_late_data_sweep",
            description="Recompute the day before's 24 hourly partitions in one Spark run (events later than the hourly lag).",
            default_status=running,
        )
        def dws_late_data_sweep(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
            first, last = previous_day_hour_range(context)
            return dg.RunRequest(
                run_key=f"late-data-sweep-{first}",
                tags={PARTITION_RANGE_START_TAG: first, PARTITION_RANGE_END_TAG: last},
            )

        schedules.append(dws_late_data_sweep)
    if daily is not None:
        schedules.append(dg.build_schedule_from_partitioned_job(
            daily,
            name="dws_daily_schedule",
            hour_of_day=DAILY_RUN_HOUR,
            minute_of_hour=DAILY_RUN_MINUTE,
            description=f"Every day at {DAILY_RUN_HOUR:02d}:{DAILY_RUN_MINUTE:02d} UTC, the day before.",
            default_status=running,
        ))
    schedules.append(dg.ScheduleDefinition(
        name="lakehouse_maintenance_schedule",
        job=maintenance_job,
        cron_schedule=MAINTENANCE_CRON,
        execution_timezone="UTC",
        description="Daily Iceberg maintenance (defaults: 3 days of ODS retention, compaction, expiry, orphans > 72 h).",
        default_status=stopped,  # destructive: on only once retention is set for the deployment
    ))
    schedules.append(dg.ScheduleDefinition(
        name="observe_ods_schedule",
        job=observe_job,
        cron_schedule=OBSERVE_ODS_CRON,
        execution_timezone="UTC",
        description="Observe the ODS snapshots (data version, last commit time) and evaluate their freshness.",
        default_status=running,
    ))
    return schedules
