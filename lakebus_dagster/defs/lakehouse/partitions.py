"""Partitions of the DWS assets and their mapping to ODS ``log_date``/``hour`` values.

Hourly keys look like ``2025-11-25-09:00`` (Dagster's hourly format, UTC) and mean
``log_date = '2025-11-25' AND hour = '09'`` in the ODS; daily keys (``2025-11-25``) mean one
``log_date``. A run of one partition and a single-run backfill of many are both a
:class:`~lakebus_dagster.lake.dws.Scope` taken from the run's partition time window.
"""

from __future__ import annotations

from datetime import datetime, timezone

import dagster as dg

from lakebus_dagster.defs.lakehouse.constants import PARTITIONS_START
from lakebus_dagster.lake.dws import Grain, Scope

HOUR_KEY_FORMAT = "%Y-%m-%d-%H:%M"
DAY_KEY_FORMAT = "%Y-%m-%d"

hourly_partitions = dg.HourlyPartitionsDefinition(start_date=f"{PARTITIONS_START}-00:00", timezone="UTC")
daily_partitions = dg.DailyPartitionsDefinition(start_date=PARTITIONS_START, timezone="UTC")


def hour_key_to_slot(key: str) -> tuple[str, str]:
    """``'2025-11-25-09:00'`` -> ``('2025-11-25', '09')``, the ODS ``log_date`` and ``hour`` values."""
    try:
        at = datetime.strptime(key, HOUR_KEY_FORMAT)
    except ValueError as exc:
        raise ValueError(f"not an hourly partition key (YYYY-MM-DD-HH:MM): {key!r}") from exc
    if at.minute:
        raise ValueError(f"hourly partition keys start on the hour, got {key!r}")
    return at.date().isoformat(), f"{at.hour:02d}"


def slot_to_hour_key(log_date: str, hour: str | int) -> str:
    """``('2025-11-25', '09')`` -> ``'2025-11-25-09:00'``."""
    h = int(hour)
    if not 0 <= h <= 23:
        raise ValueError(f"hour must be 0..23, got {hour!r}")
    return datetime.fromisoformat(log_date).replace(hour=h).strftime(HOUR_KEY_FORMAT)


def day_key_to_log_date(key: str) -> str:
    """``'2025-11-25'`` -> ``'2025-11-25'`` (validated)."""
    try:
        return datetime.strptime(key, DAY_KEY_FORMAT).date().isoformat()
    except ValueError as exc:
        raise ValueError(f"not a daily partition key (YYYY-MM-DD): {key!r}") from exc


def scope_of_window(window: dg.TimeWindow, grain: Grain) -> Scope:
    return Scope(window.start.astimezone(timezone.utc), window.end.astimezone(timezone.utc), grain)


def scope_of_run(context: dg.AssetExecutionContext | dg.OpExecutionContext, grain: Grain) -> Scope:
    """The run's partition, or partition range (single-run backfill), as a scope."""
    return scope_of_window(context.partition_time_window, grain)


def describe_partitions(context: dg.AssetExecutionContext | dg.OpExecutionContext) -> str:
    key_range = context.partition_key_range
    return key_range.start if key_range.start == key_range.end else f"{key_range.start}...{key_range.end}"
