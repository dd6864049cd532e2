"""Partitions of the DWS assets, one definition per grain, and a run's partitions as a scope.

Hourly keys look like ``2025-11-25-09:00`` (Dagster's hourly format, UTC) and mean
``log_date = '2025-11-25' AND hour = '09'`` in the ODS; daily keys (``2025-11-25``) mean one
``log_date``. A run of one partition and a single-run backfill of many are both a
:class:`~lakebus_dagster.lake.dws.Scope` taken from the run's partition time window.
"""

from __future__ import annotations

from datetime import timezone

import dagster as dg

from lakebus_dagster.defs.lakehouse.constants import PARTITIONS_START
from lakebus_dagster.lake.dws import Grain, Scope

HOUR_KEY_FORMAT = "%Y-%m-%d-%H:%M"

hourly_partitions = dg.HourlyPartitionsDefinition(start_date=f"{PARTITIONS_START}-00:00", timezone="UTC")
daily_partitions = dg.DailyPartitionsDefinition(start_date=PARTITIONS_START, timezone="UTC")
#: a DWS table's partitions follow its grain
PARTITIONS_BY_GRAIN: dict[str, dg.TimeWindowPartitionsDefinition] = {"hour": hourly_partitions, "day": daily_partitions}


def scope_of_window(window: dg.TimeWindow, grain: Grain) -> Scope:
    return Scope(window.start.astimezone(timezone.utc), window.end.astimezone(timezone.utc), grain)


def scope_of_run(context: dg.AssetExecutionContext | dg.OpExecutionContext, grain: Grain) -> Scope:
    """The run's partition, or partition range (single-run backfill), as a scope."""
    return scope_of_window(context.partition_time_window, grain)


def describe_partitions(context: dg.AssetExecutionContext | dg.OpExecutionContext) -> str:
    key_range = context.partition_key_range
    return key_range.start if key_range.start == key_range.end else f"{key_range.start}...{key_range.end}"
