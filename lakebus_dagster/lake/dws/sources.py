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

The same goes for a table that exists but lacks columns of the event's latest version: the sink
adds a version's columns with that version's first record, so a bus whose producers all still send
version 1 has no ``amount_decimal`` yet. Such a table is read through a view that adds the missing
columns as nulls (the DWS money expression then falls back to version 1's ``amount``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from lakebus_dagster.events.registry import EventRegistry, default_registry
from lakebus_dagster.events.schema import ConnectField
from lakebus_dagster.events.types import ConnectType
from lakebus_dagster.lake.dws.locations import LakehouseTables
from lakebus_dagster.lake.dws.spec import DwsTable

#: the Spark SQL type of each Connect type the event SDK emits (as the Iceberg sink maps them;
#: a decimal's is :func:`spark_type`'s)
SPARK_TYPE_OF: dict[ConnectType, str] = {
    ConnectType.INT32: "INT",
    ConnectType.INT64: "BIGINT",
    ConnectType.FLOAT32: "FLOAT",
    ConnectType.FLOAT64: "DOUBLE",
    ConnectType.STRING: "STRING",
    ConnectType.BOOLEAN: "BOOLEAN",
    ConnectType.TIMESTAMP: "TIMESTAMP",
}
#: the Iceberg sink creates every decimal column with this precision (and the field's scale)
SINK_DECIMAL_PRECISION = 38


def spark_type(field: ConnectField) -> str:
    """The Spark SQL type of the column the sink creates for ``field``."""
    if field.type is ConnectType.DECIMAL:
        assert field.decimal is not None
        return f"DECIMAL({SINK_DECIMAL_PRECISION},{field.decimal.scale})"
    return SPARK_TYPE_OF[field.type]

#: temporary view standing in for an absent ODS table: this prefix + the event
STAND_IN_PREFIX = "_ods_absent_"
#: temporary view adding a version's missing columns to an ODS table: this prefix + the event
WIDENED_PREFIX = "_ods_widened_"


def stand_in_view(event: str) -> str:
    return f"{STAND_IN_PREFIX}{event}"


def widened_view(event: str) -> str:
    return f"{WIDENED_PREFIX}{event}"


def widened_source_sql(table: str, present: list[str], event: str, registry: EventRegistry = default_registry) -> str | None:
    """``table`` plus, as nulls, the columns of ``event``'s latest version it lacks (None: it lacks none)."""
    have = {c.lower() for c in present}
    missing = [f for f in registry.get(event).schema.fields if f.name.lower() not in have]
    if not missing:
        return None
    added = ", ".join(f"CAST(NULL AS {spark_type(f)}) AS {f.name}" for f in missing)
    return f"SELECT *, {added} FROM {table}"


def empty_source_sql(event: str, registry: EventRegistry = default_registry) -> str:
    """A query with no rows and the columns of ``event``'s latest registered version."""
    schema = registry.get(event).schema
    columns = ", ".join(f"CAST(NULL AS {spark_type(f)}) AS {f.name}" for f in schema.fields)
    return f"SELECT {columns} WHERE false"


def absent_sources(spark: Any, tables: LakehouseTables, spec: DwsTable) -> list[str]:
    """The events ``spec`` reads whose ODS table does not exist (yet); one with a stand-in already is absent."""
    return [
        event for event in spec.sources
        if tables.stand_ins.get(event) == stand_in_view(event)
        or (event not in tables.stand_ins and not spark.catalog.tableExists(tables.qualified(tables.ods_table(event))))
    ]


def resolve_sources(
    spark: Any, tables: LakehouseTables, spec: DwsTable, registry: EventRegistry = default_registry
) -> tuple[LakehouseTables, tuple[str, ...]]:
    """``tables`` with an empty stand-in view for each absent ODS table ``spec`` reads and a widened
    view for each one that lacks columns, and the absent events (``tables`` comes back unchanged when
    every table exists whole)."""
    absent = absent_sources(spark, tables, spec)
    views = dict(tables.stand_ins)
    for event in spec.sources:
        if event in views:
            continue
        if event in absent:
            spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {stand_in_view(event)} AS {empty_source_sql(event, registry)}")
            views[event] = stand_in_view(event)
            continue
        table = tables.qualified(tables.ods_table(event))
        widened = widened_source_sql(table, spark.table(table).columns, event, registry)
        if widened is not None:
            spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {widened_view(event)} AS {widened}")
            views[event] = widened_view(event)
    if views == dict(tables.stand_ins):
        return tables, tuple(absent)
    return replace(tables, stand_ins=views), tuple(absent)


def describe_absent(tables: LakehouseTables, absent: tuple[str, ...]) -> str:
    """What a run's metadata and log say about the absent sources."""
    if not absent:
        return "none"
    return ", ".join(f"{tables.ods_table(e)} ({e}: no event yet, read as empty)" for e in absent)
