"""The current-state table of a captured table: the latest change per primary key of its change
table, deletes deleted — one PySpark ``MERGE`` per run, incremental and idempotent.

``<namespace>.pg_<schema>_<table>_current`` has the row's own columns plus the coordinates of the
change it shows (``__op``, ``__source_ts_ms``, ``__lsn``, ``_kafka_partition``, ``_kafka_offset``).
A run reads only the changes past the table's watermark (table property
:data:`WATERMARK_PROPERTY`: the last Kafka offset applied per partition), keeps the latest one per
key **by Kafka (partition, offset)** — not by ``__lsn``, which is null on snapshot reads and not
monotonic across transactions — and merges: a delete (``__deleted='true'``, matched on the key only:
its other columns are filler) deletes the row, anything else replaces or inserts it. The watermark
moves after the MERGE commits; a run that died between the two re-applies the same changes, with the
same result. A re-read row (an incremental snapshot's ``op=r``) replaces the row with the same
values. The primary key comes from the change table's property :data:`PRIMARY_KEY_PROPERTY`, which
:mod:`.tables` writes from the database's catalog.

**Unchanged TOASTed values.** Under ``REPLICA IDENTITY DEFAULT`` an update that does not touch a
large (out-of-line, TOASTed) text or bytea column carries Debezium's placeholder
:data:`UNAVAILABLE_PLACEHOLDER` in it instead of the value. The MERGE never writes the placeholder:
for every string and binary column it takes the column's latest *known* value among the key's
changes in the run (``last_value`` ignoring the placeholder), and where the run has none it keeps
the current row's value. (``REPLICA IDENTITY FULL`` on the source table would avoid the placeholder
at the cost of the old row image in every update's WAL; lakebus leaves the tables as they are.)

**Schema evolution.** A column added to the source table arrives as a new schema version; the
sink adds it to the change table (``evolve-schema-enabled``), and the next run adds it to the
current-state table (``ALTER TABLE … ADD COLUMNS``) before it merges: nothing is dropped, rows
written before it hold null.

**Added columns keep their types — in the current-state table.** The sink types an added column by
its own mapping of the Connect schema, and Debezium (``decimal.handling.mode=string``) sends a
``numeric`` and a ``timestamptz`` as strings: the change table gets ``string`` columns for them (a
``date``, a Connect ``Date``, arrives as ``date``). The change table must keep that: the sink adds the
column when it converts the first record carrying it — PostgreSQL's logical decoding sends no DDL,
so nothing can type the column before — and Iceberg cannot retype a ``string`` column afterwards.
So the current-state table gets the type lakebus gives the column at provisioning
(:func:`lakebus_dagster.cdc.tables.iceberg_type`, read from the database's catalog when the column
first reaches the current-state table: ``timestamptz`` → ``timestamp`` (with zone), ``numeric(p,s)``
→ ``decimal(p,s)``, ``date`` → ``date``), and the MERGE casts the change table's strings into it
(ANSI casts: a value that does not parse fails the run, naming the column, instead of landing null).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from collections.abc import Callable, Mapping

from lakebus_dagster.bus.provenance import OFFSET_COLUMN, PARTITION_COLUMN
from lakebus_dagster.bus.table_properties import CREATE_PROPERTIES
from lakebus_dagster.cdc.capture import PRIMARY_KEY_PROPERTY, DELETED_COLUMN, LSN_COLUMN, OP_COLUMN, SOURCE_TS_COLUMN, CaptureError, CaptureSpec
from lakebus_dagster.lake.spark import SPARK_CATALOG

#: the current-state table's watermark: ``{"<kafka partition>": <last offset applied>}`` as JSON
WATERMARK_PROPERTY = "lakebus.cdc.applied-offsets"
#: the change's coordinates kept on each current row
CHANGE_COORDINATES = (OP_COLUMN, SOURCE_TS_COLUMN, LSN_COLUMN, PARTITION_COLUMN, OFFSET_COLUMN)
#: what Debezium writes into an unchanged TOASTed column (its ``unavailable.value.placeholder`` default)
UNAVAILABLE_PLACEHOLDER = "__debezium_unavailable_value"
#: the change-table types a TOASTed column can have (Spark's names): text-like and bytea
_TOASTABLE = ("string", "binary")
#: the source's column types (Spark's names) a change table's ``string`` column is cast into in the
#: current-state table: what Debezium's strings stand for (``timestamptz``, ``numeric(p,s)``) and a date
_CAST_FROM_STRING = ("timestamp", "date", "decimal(")

#: the source columns' types as the current-state table should hold them (Spark's type names), read
#: from the database when a column first reaches the current-state table: ``() -> {column: type}``
SourceTypes = Callable[[], Mapping[str, str]]


@dataclass(frozen=True)
class CurrentStateStats:
    table: str
    #: changes past the watermark, and the keys they touch (latest change each)
    changes_read: int
    keys_changed: int
    keys_deleted: int
    rows: int
    watermark: dict[str, int]
    snapshot_id: int | None


def _q(name: str) -> str:
    return f"`{name}`"


def _property(spark, table: str, key: str) -> str | None:
    rows = spark.sql(f"SHOW TBLPROPERTIES {table}").collect()
    return next((r["value"] for r in rows if r["key"] == key), None)


def newer_than(watermark: dict[str, int]) -> str:
    """The predicate selecting changes past ``watermark`` (a partition it does not name: every change)."""
    if not watermark:
        return "true"
    known = " OR ".join(f"({_q(PARTITION_COLUMN)} = {int(p)} AND {_q(OFFSET_COLUMN)} > {int(o)})" for p, o in sorted(watermark.items()))
    listed = ", ".join(str(int(p)) for p in sorted(watermark))
    return f"({known} OR {_q(PARTITION_COLUMN)} NOT IN ({listed}))"


def _known(column: str) -> str:
    return f"_lakebus_known_{column}"


def merge_sql(target: str, source_view: str, keys: list[str], columns: list[str], toastable: tuple[str, ...] = (),
              casts: Mapping[str, str] | None = None) -> str:
    """The MERGE of the latest change per key; a ``toastable`` column takes the latest known value of
    the run's changes (:func:`latest_sql`'s ``_lakebus_known_<c>`` struct), or keeps the row's own; a
    column in ``casts`` (column -> Spark type) is cast into the current-state table's type."""
    on = " AND ".join(f"t.{_q(k)} = s.{_q(k)}" for k in keys)
    every = [*columns, *CHANGE_COORDINATES]
    casts = casts or {}

    def value(c: str, keep: bool) -> str:
        if c in casts:
            return f"CAST(s.{_q(c)} AS {casts[c]})"
        if c not in toastable:
            return f"s.{_q(c)}"
        known = f"s.{_q(_known(c))}"
        return f"CASE WHEN {known} IS NULL THEN {'t.' + _q(c) if keep else 'NULL'} ELSE {known}.v END"

    sets = ", ".join(f"t.{_q(c)} = {value(c, True)}" for c in every)
    names = ", ".join(_q(c) for c in every)
    values = ", ".join(value(c, False) for c in every)
    deleted = f"coalesce(s.{_q(DELETED_COLUMN)}, 'false') = 'true'"
    return (f"MERGE INTO {target} t\nUSING {source_view} s\nON {on}\n"
            f"WHEN MATCHED AND {deleted} THEN DELETE\n"
            f"WHEN MATCHED THEN UPDATE SET {sets}\n"
            f"WHEN NOT MATCHED AND NOT {deleted} THEN INSERT ({names}) VALUES ({values})")


def latest_sql(changes: str, watermark: dict[str, int], keys: list[str], toastable: tuple[str, ...]) -> str:
    """The latest change per key past ``watermark``, with the run's change count, each partition's last
    offset read, and per ``toastable`` column its latest value that is not the TOAST placeholder
    (``_lakebus_known_<c>``: a struct, so that a known null is told from "none known")."""
    order = f"{_q(PARTITION_COLUMN)} DESC, {_q(OFFSET_COLUMN)} DESC"
    partition_by = ", ".join(_q(k) for k in keys)
    every = (f"PARTITION BY {partition_by} ORDER BY {_q(PARTITION_COLUMN)}, {_q(OFFSET_COLUMN)} "
             "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING")
    known = "".join(
        f", last_value(CASE WHEN {_q(c)} <=> CAST('{UNAVAILABLE_PLACEHOLDER}' AS {kind}) THEN NULL ELSE named_struct('v', {_q(c)}) END, "
        f"true) OVER ({every}) AS {_q(_known(c))}" for c, kind in toastable)
    return (f"SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY {partition_by} ORDER BY {order}) "
            f"AS _lakebus_rn, count(*) OVER () AS _lakebus_changes, "
            f"max({_q(OFFSET_COLUMN)}) OVER (PARTITION BY {_q(PARTITION_COLUMN)}) AS _lakebus_partition_max{known} "
            f"FROM {changes} WHERE {newer_than(watermark)}) WHERE _lakebus_rn = 1")


def spark_type(iceberg_type) -> str | None:
    """The Spark type name of a change-table type a string column may stand for (None: no cast)."""
    from pyiceberg.types import DateType, DecimalType, TimestamptzType

    if isinstance(iceberg_type, TimestamptzType):
        return "timestamp"
    if isinstance(iceberg_type, DateType):
        return "date"
    if isinstance(iceberg_type, DecimalType):
        return f"decimal({iceberg_type.precision},{iceberg_type.scale})"
    return None


def source_spark_types(spec: CaptureSpec, table: str) -> dict[str, str]:
    """``table``'s columns in the database -> the Spark type of the change-table type lakebus gives them
    at provisioning (:func:`lakebus_dagster.cdc.tables.iceberg_type`), for the types a string stands for;
    read as the capture role (the catalog only, nothing written)."""
    from contextlib import closing
    from dataclasses import replace

    from lakebus_dagster.cdc.database import connect, table_columns
    from lakebus_dagster.cdc.tables import iceberg_type, is_mapped

    one = replace(spec, tables=(table,))
    with closing(connect(one)) as conn:
        columns = table_columns(conn, one)[table]
        conn.rollback()
    out = {}
    for column in columns:
        wanted = spark_type(iceberg_type(one, table, column)) if is_mapped(column) else None
        if wanted is not None:
            out[column.name] = wanted
    return out


def casts_for(spec: CaptureSpec, table: str, changes: Mapping[str, str], current: Mapping[str, str],
              source_types: SourceTypes) -> dict[str, str]:
    """Column -> the Spark type its change-table ``string`` is cast into: the current-state table's type
    where it holds the column already, else (a column new to it) the source's (``source_types``, read
    only then). A column the source no longer has, or whose source type is text, stays a string."""
    strings = [c for c, t in changes.items() if t == "string"]
    new = [c for c in strings if c not in current]
    declared: Mapping[str, str] = {}
    if new:
        declared = source_types()
    out = {}
    for c in strings:
        wanted = current.get(c) or declared.get(c)
        if wanted and wanted != "string":
            if not wanted.startswith(_CAST_FROM_STRING):
                raise CaptureError(f"capture {spec.name!r}: column {c} of {spec.change_table(table)} is a string, its "
                                   f"current-state column is {wanted}: lakebus casts strings only into {', '.join(_CAST_FROM_STRING)}…")
            out[c] = wanted
    return out


def _prepare(spark, spec: CaptureSpec, table: str, source_types: SourceTypes
             ) -> tuple[str, str, list[str], list[str], list[tuple[str, str]], dict[str, str]]:
    """(change table, target, keys, columns, toastable (column, type), casts (column, type)) — the target
    created on the first run and given every column the change table gained since (schema evolution),
    a string that stands for a typed source column with that type (:func:`casts_for`)."""
    changes = f"{SPARK_CATALOG}.{spec.change_table(table)}"
    target = f"{SPARK_CATALOG}.{spec.current_table(table)}"
    if not spark.catalog.tableExists(changes):
        raise CaptureError(f"capture {spec.name!r}: change table {spec.change_table(table)} does not exist; "
                           "run provision_change_capture first")
    spark.sql(f"REFRESH TABLE {changes}")
    key_text = _property(spark, changes, PRIMARY_KEY_PROPERTY)
    if not key_text:
        raise CaptureError(f"capture {spec.name!r}: change table {spec.change_table(table)} has no {PRIMARY_KEY_PROPERTY} "
                           "property (run provision_change_capture: it records the source's primary key)")
    keys = key_text.split(",")
    fields = {f.name: f.dataType.simpleString() for f in spark.table(changes).schema.fields}
    missing = [c for c in (*keys, *CHANGE_COORDINATES, DELETED_COLUMN) if c not in fields]
    if missing:
        # the provenance columns arrive with the sink's first commit
        raise CaptureError(f"capture {spec.name!r}: change table {spec.change_table(table)} lacks {', '.join(missing)} "
                           "(no change committed by the sink yet?)")
    columns = [c for c in fields if not c.startswith("_")]
    exists = spark.catalog.tableExists(target)
    if exists:
        spark.sql(f"REFRESH TABLE {target}")
    present = {f.name: f.dataType.simpleString() for f in spark.table(target).schema.fields} if exists else {}
    casts = casts_for(spec, table, {c: fields[c] for c in columns if c not in keys}, present, source_types)
    if not exists:
        props = ", ".join(f"'{k}'='{v}'" for k, v in {**CREATE_PROPERTIES, PRIMARY_KEY_PROPERTY: key_text}.items())
        chosen = ", ".join(f"CAST({_q(c)} AS {casts[c]}) AS {_q(c)}" if c in casts else _q(c)
                           for c in (*columns, *CHANGE_COORDINATES))
        spark.sql(f"CREATE TABLE IF NOT EXISTS {target} USING iceberg TBLPROPERTIES ({props}) "
                  f"AS SELECT {chosen} FROM {changes} WHERE false")
        spark.sql(f"REFRESH TABLE {target}")
        present = {f.name: f.dataType.simpleString() for f in spark.table(target).schema.fields}
    added = [c for c in columns if c not in present]
    if added:
        spark.sql(f"ALTER TABLE {target} ADD COLUMNS ({', '.join(f'{_q(c)} {casts.get(c, fields[c])}' for c in added)})")
    toastable = [(c, fields[c]) for c in columns if fields[c] in _TOASTABLE and c not in keys and c not in casts]
    return changes, target, keys, columns, toastable, casts


def merge_current_state(spark, spec: CaptureSpec, table: str, source_types: SourceTypes | None = None) -> CurrentStateStats:
    """Bring ``table``'s current-state table up to its change table (created on the first run).
    ``source_types`` gives the source columns' types when a string column first reaches the
    current-state table (:func:`casts_for`; default: :func:`source_spark_types`, the database's catalog)."""
    if table not in spec.tables:
        raise CaptureError(f"capture {spec.name!r}: {table!r} is not a captured table ({', '.join(spec.tables)})")
    if source_types is None:
        source_types = lambda: source_spark_types(spec, table)  # noqa: E731 - read only when a column is new
    changes, target, keys, columns, toastable, casts = _prepare(spark, spec, table, source_types)
    watermark = {str(p): int(o) for p, o in json.loads(_property(spark, target, WATERMARK_PROPERTY) or "{}").items()}
    view = f"cdc_latest_{spec.name}_{table}"
    spark.sql(f"CACHE TABLE {view} AS {latest_sql(changes, watermark, keys, tuple(toastable))}")
    try:
        summary: dict[str, Any] = spark.sql(
            f"SELECT count(*) AS keys, coalesce(max(_lakebus_changes), 0) AS changes, "
            f"count_if(coalesce({_q(DELETED_COLUMN)}, 'false') = 'true') AS deletes FROM {view}").collect()[0].asDict()
        if summary["keys"]:
            # the last offset read per partition (of every change read, not only the kept ones: the view's window)
            for row in spark.sql(f"SELECT {_q(PARTITION_COLUMN)} AS p, max(_lakebus_partition_max) AS o FROM {view} "
                                 f"GROUP BY {_q(PARTITION_COLUMN)}").collect():
                watermark[str(row["p"])] = max(int(row["o"]), watermark.get(str(row["p"]), -1))
            spark.sql(merge_sql(target, view, keys, columns, tuple(c for c, _ in toastable), casts))
            spark.sql(f"ALTER TABLE {target} SET TBLPROPERTIES ('{WATERMARK_PROPERTY}'='{json.dumps(watermark, sort_keys=True)}')")
    finally:
        spark.sql(f"UNCACHE TABLE IF EXISTS {view}")
        spark.catalog.dropTempView(view)  # UNCACHE keeps the view: a second run in the same session could not cache it
    rows = spark.sql(f"SELECT count(*) AS n FROM {target}").collect()[0]["n"]
    snapshots = spark.sql(f"SELECT snapshot_id FROM {target}.snapshots ORDER BY committed_at DESC LIMIT 1").collect()
    return CurrentStateStats(spec.current_table(table), int(summary["changes"]), int(summary["keys"]), int(summary["deletes"]),
                             int(rows), watermark, snapshots[0]["snapshot_id"] if snapshots else None)
