"""Gaps heal themselves: DWS partitions missing or failed within the last 48 hours are rebuilt
without a human, by Dagster's declarative automation.

The schedules build only the hour that just closed (:15), the day before (01:30) and the day
before's hours again (02:00 sweep). A partition whose run failed (Spark Connect down, S3 away), or
that no run ever built (the daemon was down over the tick, the deployment started mid-day) stays a
hole for good. The condition below requests, once per cron tick, every partition of the lookback
that is missing or whose latest run failed, unless one is in progress; Dagster's first evaluation
counts as handled, and a partition still broken is retried at the next tick (at most once an hour
for the hourly tables, once a day for the daily one). An ODS table that does not exist yet is read
as empty (:mod:`lakebus_dagster.lake.dws.sources`), so an early hour is built as empty, not failed.

The runs carry the lakehouse exclusivity tag, so the run queue never starts one beside a schedule's
DWS run or a maintenance run, and ``dagster/max_retries`` so a transient failure is retried at once
(the instance's ``run_retries`` must be enabled: the local instance and deploy/dagster.yaml are).
Several partitions of one tick become one backfill, a single Spark run per asset range
(``BackfillPolicy.single_run``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

import dagster as dg

from lakebus_dagster.defs.lakehouse.constants import DWS_RUN_RETRIES, EXCLUSIVE_TAG

#: how far back a missing or failed DWS partition is rebuilt by itself
GAP_LOOKBACK = timedelta(hours=48)
#: when each grain's gaps are looked for: 30 min after the hourly schedule's :15, and after the
#: daily schedule (01:30) and the late-data sweep (02:00)
GAP_CRON_BY_GRAIN = {"hour": "45 * * * *", "day": "45 2 * * *"}
#: retries of a gap run that failed (a transient Spark or S3 error), before the next tick tries again
GAP_RUN_RETRIES = DWS_RUN_RETRIES
GAP_FILL_SENSOR = "dws_gap_fill_sensor"


def gap_fill_condition(grain: str) -> dg.AutomationCondition:
    """Within the lookback: missing or last run failed, at the grain's cron tick, not in progress."""
    return (
        dg.AutomationCondition.in_latest_time_window(GAP_LOOKBACK)
        & (dg.AutomationCondition.missing() | dg.AutomationCondition.execution_failed())
        & dg.AutomationCondition.cron_tick_passed(GAP_CRON_BY_GRAIN[grain], "UTC").since_last_handled()
        & ~dg.AutomationCondition.in_progress()
    ).with_label(f"missing or failed in the last {GAP_LOOKBACK.total_seconds() / 3600:g} h")


def gap_window(partitions_def: dg.TimeWindowPartitionsDefinition, now: datetime) -> list[str]:
    """The partitions :func:`gap_fill_condition` looks at, at ``now``: those within
    :data:`GAP_LOOKBACK` before the end of the newest complete one (Dagster's ``in_latest_time_window``)."""
    with dg.partition_loading_context(effective_dt=now):
        last = partitions_def.get_last_partition_window()
    if last is None:
        return []
    start = max(partitions_def.start, last.end - GAP_LOOKBACK)
    return list(partitions_def.get_partition_keys_in_time_window(dg.TimeWindow(start, last.end)))


def gaps(keys: Sequence[str], status: Mapping[str, dg.AssetPartitionStatus | None] | None) -> list[str]:
    """What :func:`gap_fill_condition` rebuilds among ``keys`` (:func:`gap_window`), the cron tick
    aside: missing (no status; ``status`` None: the asset has no event at all) or failed, and not in
    progress. ``status`` is ``DagsterInstance.get_status_by_partition``'s answer."""
    status = status or {}
    return [k for k in keys if status.get(k) in (None, dg.AssetPartitionStatus.FAILED)]


def gap_fill_sensor(dws_assets: Sequence[dg.AssetsDefinition]) -> dg.AutomationConditionSensorDefinition:
    """The sensor that evaluates the DWS assets' gap-fill conditions (RUNNING as shipped)."""
    return dg.AutomationConditionSensorDefinition(
        GAP_FILL_SENSOR,
        target=dg.AssetSelection.assets(*dws_assets),
        run_tags={EXCLUSIVE_TAG: "lakehouse", "dagster/max_retries": str(GAP_RUN_RETRIES), "domain": "lakehouse"},
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=60,
        description=(
            f"Rebuild DWS partitions missing or failed within the last {GAP_LOOKBACK.total_seconds() / 3600:g} h "
            "(hourly tables at :45, the daily table at 02:45 UTC), one Spark run per range."
        ),
    )
