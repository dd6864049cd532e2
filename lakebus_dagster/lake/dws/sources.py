"""The ODS sources a DWS scope reads, when some do not exist yet.

The Iceberg sink creates an event's ODS table with that event's first record, so a bus whose
``recharge`` producer has not started yet simply has no recharge table. That is an ordinary state
(day one of a new producer, a bus that carries bets only), not a fault: a DWS build or check over
it must succeed and mean "no events of that type", so the schedules stay green and nothing needs a
human when the first recharge arrives (the next run reads the real table).

:func:`resolve_sources` therefore stands an *empty temporary view* with the event's declared
columns (the event SDK's registry: the same schema the producers send and the sink creates the
table from) in for each absent table. The aggregate and the reconciliation then run unchanged:
an hour table gets an empty partition whose checks pass, and ``dws_user_day`` is built from what
exists (``net = -bets`` without recharges). The views live in the caller's Spark session only.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from lakebus_dagster.events.registry import EventRegistry, default_registry
from lakebus_dagster.events.types import ConnectType
from lakebus_dagster.lake.dws.locations import LakehouseTables
from lakebus_dagster.lake.dws.spec import DwsTable

#: the Spark SQL type of each Connect type the event SDK emits (as the Iceberg sink maps them)
SPARK_TYPE_OF: dict[ConnectType, str] = {
    ConnectType.INT32: "INT",
    ConnectType.INT64: "BIGINT",
    ConnectType.FLOAT32: "FLOAT",
    ConnectType.FLOAT64: "DOUBLE",
    ConnectType.STRING: "STRING",
    ConnectType.BOOLEAN: "BOOLEAN",
}

#: temporary view standing in for an absent ODS table: this prefix + the event
STAND_IN_PREFIX = "_ods_absent_"


def stand_in_view(event: str) -> str:
    return f"{STAND_IN_PREFIX}{event}"


def empty_source_sql(event: str, registry: EventRegistry = default_registry) -> str:
    """A query with no rows and the columns of ``event``'s latest registered version."""
    schema = registry.get(event).schema
    columns = ", ".join(f"CAST(NULL AS {SPARK_TYPE_OF[f.type]}) AS {f.name}" for f in schema.fields)
    return f"SELECT {columns} WHERE false"


def absent_sources(spark: Any, tables: LakehouseTables, spec: DwsTable) -> list[str]:
    """The events ``spec`` reads whose ODS table does not exist (yet); one with a stand-in already is absent."""
    return [
        event for event in spec.sources
        if event in tables.stand_ins or not spark.catalog.tableExists(tables.qualified(tables.ods_table(event)))
    ]


def resolve_sources(
    spark: Any, tables: LakehouseTables, spec: DwsTable, registry: EventRegistry = default_registry
) -> tuple[LakehouseTables, tuple[str, ...]]:
    """``tables`` with an empty stand-in view for each absent ODS table ``spec`` reads, and the
    absent events (empty when every table exists: ``tables`` comes back unchanged)."""
    absent = absent_sources(spark, tables, spec)
    if not absent:
        return tables, ()
    for event in absent:
        if event in tables.stand_ins:
            continue
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {stand_in_view(event)} AS {empty_source_sql(event, registry)}")
    stand_ins = {**tables.stand_ins, **{event: stand_in_view(event) for event in absent}}
    return replace(tables, stand_ins=stand_ins), tuple(absent)


def describe_absent(tables: LakehouseTables, absent: tuple[str, ...]) -> str:
    """What a run's metadata and log say about the absent sources."""
    if not absent:
        return "none"
    return ", ".join(f"{tables.ods_table(e)} ({e}: no event yet, read as empty)" for e in absent)
