"""Schedules of the lakehouse domain. The DWS builds, the ODS observation and the maintenance that
deletes no data (compaction, snapshot expiry, orphan files) run by default; the retention deletes
rows and so starts STOPPED until it is configured for the deployment.

* hourly, at :15 — the hour that closed 15 minutes ago (``LATE_DATA_LAG_MINUTES``);
* daily, 01:30 UTC — ``dws_user_day`` for the day before;
* daily, 02:00 UTC — the late-data sweep: the day before's 24 hours of the hour tables again, as
  ONE run over the partition range (the MERGE makes it an idempotent refresh);
* hourly, at :40 — maintenance of the recent days (small files merged, old snapshots expired);
* daily, 04:00 UTC — maintenance of the whole tables (+ manifests, orphan files);
* daily, 04:30 UTC — the ODS retention (STOPPED as shipped);
* every 10 minutes — ODS observations + freshness checks.
"""

from collections.abc import Mapping
from datetime import datetime, timedelta

import dagster as dg

from lakebus_dagster import config_file

from lakebus_dagster.defs.lakehouse.constants import (
    AssetJob,
    DAILY_RUN_HOUR,
    DAILY_RUN_MINUTE,
    DWS_DAILY_JOB,
    DWS_HOURLY_JOB,
    EXPIRE_SNAPSHOTS_OLDER_THAN_HOURS,
    LATE_DATA_LAG_MINUTES,
    LATE_DATA_SWEEP_CRON,
    MAINTENANCE_CRON,
    MAINTENANCE_HOURLY_CRON,
    OBSERVE_ODS_CRON,
    RETAIN_LAST_SNAPSHOTS,
    RETENTION_CRON,
)
from lakebus_dagster.defs.guard import confirm_config
from lakebus_dagster.defs.lakehouse.retention import RETENTION_OP, retention_target
from lakebus_dagster.defs.lakehouse.partitions import HOUR_KEY_FORMAT, daily_partitions, hourly_partitions
from lakebus_dagster.defs.resources import BusLayoutResource

#: Dagster's run tags for a single run over a partition range (what a single-run backfill sets)
PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"
PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"


def previous_day_hour_range(scheduled: dg.ScheduleEvaluationContext) -> tuple[str, str]:
    """First and last hourly partition keys of the UTC day before the tick."""
    day = (scheduled.scheduled_execution_time - timedelta(days=1)).date()
    midnight = datetime(day.year, day.month, day.day)
    return midnight.strftime(HOUR_KEY_FORMAT), (midnight + timedelta(hours=23)).strftime(HOUR_KEY_FORMAT)


def _maintenance_scope(scope: str) -> dict:
    return {"ops": {"maintain_lakehouse": {"config": {"scope": scope}}}}


def _partitioned(job: AssetJob, name: str, description: str, crons: Mapping[str, str],
                 partitions: dg.TimeWindowPartitionsDefinition, **when: int) -> dg.ScheduleDefinition:
    """A schedule of ``job``'s latest complete partition: at the shipped time (``when``) or the
    deployment's cron for ``name`` (config file ``schedules:``; Dagster builds a partitioned job's
    schedule only from its partitions' own cadence, so that one evaluates the partition itself)."""
    cron = crons.get(name)
    if not cron:
        return dg.build_schedule_from_partitioned_job(job, name=name, description=description,
                                                      default_status=dg.DefaultScheduleStatus.RUNNING, **when)

    @dg.schedule(job=job, cron_schedule=cron, execution_timezone="UTC", name=name,
                 description=f"{description} This deployment: {cron} (UTC).", default_status=dg.DefaultScheduleStatus.RUNNING)
    def _at_the_deployments_time(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        with dg.partition_loading_context(effective_dt=context.scheduled_execution_time):
            key = partitions.get_last_partition_key()
        if key is None:
            return dg.SkipReason(f"no complete partition at {context.scheduled_execution_time}")
        return dg.RunRequest(partition_key=key)  # no run key: a later tick may rebuild the same partition (idempotent MERGE)

    return _at_the_deployments_time


def dws_schedules(dws_jobs: Mapping[str, AssetJob], crons: Mapping[str, str]) -> list[dg.ScheduleDefinition]:
    """The DWS builds: the closed hour at :15, the day before at 01:30, the late-data sweep at 02:00."""
    running = dg.DefaultScheduleStatus.RUNNING
    schedules: list[dg.ScheduleDefinition] = []
    hourly, daily = dws_jobs.get(DWS_HOURLY_JOB), dws_jobs.get(DWS_DAILY_JOB)
    if hourly is not None:
        schedules.append(_partitioned(hourly, "dws_hourly_schedule",
                                      f"Every hour at :{LATE_DATA_LAG_MINUTES:02d}, the hour that has just closed.",
                                      crons, hourly_partitions, minute_of_hour=LATE_DATA_LAG_MINUTES))

        @dg.schedule(
            job=hourly,
            cron_schedule=crons.get("dws_late_data_sweep", LATE_DATA_SWEEP_CRON),
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
        schedules.append(_partitioned(daily, "dws_daily_schedule",
                                      f"Every day at {DAILY_RUN_HOUR:02d}:{DAILY_RUN_MINUTE:02d} UTC, the day before.",
                                      crons, daily_partitions, hour_of_day=DAILY_RUN_HOUR, minute_of_hour=DAILY_RUN_MINUTE))
    return schedules


def upkeep_schedules(maintenance_job: dg.JobDefinition, retention_job: dg.JobDefinition,
                     crons: Mapping[str, str]) -> list[dg.ScheduleDefinition]:
    """Maintenance that deletes no data (hourly recent, daily full; RUNNING) and the retention (STOPPED)."""
    running = dg.DefaultScheduleStatus.RUNNING
    shipped = (
        ("lakehouse_maintenance_hourly", maintenance_job, MAINTENANCE_HOURLY_CRON, _maintenance_scope("recent"),
         f"Merge the small files of the days the sink appends to, expire snapshots "
         f"older than {EXPIRE_SNAPSHOTS_OLDER_THAN_HOURS * 60:.0f} min (the newest {RETAIN_LAST_SNAPSHOTS} and the "
         "time-travel tags stay). Deletes no data.", running),
        ("lakehouse_maintenance_schedule", maintenance_job, MAINTENANCE_CRON, _maintenance_scope("full"),
         "Compact the whole tables, rewrite manifests, expire snapshots, remove orphan files "
         "older than 72 h while the sink is healthy. Deletes no data.", running),
    )
    return [
        *(dg.ScheduleDefinition(name=name, job=job, cron_schedule=crons.get(name, cron), execution_timezone="UTC",
                                run_config=run_config, default_status=status,
                                description=f"{description} This deployment: {crons.get(name, cron)} (UTC).")
          for name, job, cron, run_config, description, status in shipped),
        retention_schedule(retention_job, crons.get(RETENTION_SCHEDULE, RETENTION_CRON)),
    ]


RETENTION_SCHEDULE = "lakehouse_retention_schedule"


def retention_schedule(retention_job: dg.JobDefinition, cron: str) -> dg.ScheduleDefinition:
    """The ODS retention, daily; destructive, so STOPPED until it is set for the deployment. The job
    is guarded: each tick's run config confirms the ODS namespace the layout declares now."""

    @dg.schedule(name=RETENTION_SCHEDULE, job=retention_job, cron_schedule=cron, execution_timezone="UTC",
                 default_status=dg.DefaultScheduleStatus.STOPPED,
                 description="Every day at 04:30 UTC: delete ODS days past the retention (default 3 days before today); "
                 "its runs confirm the ODS namespace.")
    def _retention(context: dg.ScheduleEvaluationContext, layout: BusLayoutResource) -> dg.RunRequest:
        return dg.RunRequest(run_config=confirm_config(RETENTION_OP, retention_target(layout)))

    return _retention


def build_schedules(
    dws_jobs: Mapping[str, AssetJob],
    observe_job: AssetJob,
    maintenance_job: dg.JobDefinition,
    retention_job: dg.JobDefinition,
    crons: Mapping[str, str] | None = None,
) -> list[dg.ScheduleDefinition]:
    """Every lakehouse schedule, at its shipped time or at the deployment's (``crons``: schedule
    name -> cron, from the config file's ``schedules:`` through :class:`LakehouseLimits`; a name that
    is not a lakehouse schedule is refused, naming the known ones)."""
    crons = dict(crons or {})
    observe = dg.ScheduleDefinition(
        name="observe_ods_schedule",
        job=observe_job,
        cron_schedule=crons.get("observe_ods_schedule", OBSERVE_ODS_CRON),
        execution_timezone="UTC",
        description="Observe the ODS snapshots (data version, last commit time) and evaluate their freshness.",
        default_status=dg.DefaultScheduleStatus.RUNNING,
    )
    schedules = [*dws_schedules(dws_jobs, crons), *upkeep_schedules(maintenance_job, retention_job, crons), observe]
    known = sorted(s.name for s in schedules)
    for name in sorted(set(crons) - set(known)):
        raise config_file.ConfigFileError(
            config_file.CONFIG_VAR, f"schedules.{name} is not a lakehouse schedule{config_file.closest(name, known)}; "
                                    "fix or remove it in the config file")
    return schedules
