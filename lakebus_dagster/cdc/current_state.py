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
current-state table (``ALTER TABLE … ADD COLUMNS``, same type) before it merges: nothing is dropped,
rows written before it hold null.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

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


def merge_sql(target: str, source_view: str, keys: list[str], columns: list[str], toastable: tuple[str, ...] = ()) -> str:
    """The MERGE of the latest change per key; a ``toastable`` column takes the latest known value of
    the run's changes (:func:`latest_sql`'s ``_lakebus_known_<c>`` struct), or keeps the row's own."""
    on = " AND ".join(f"t.{_q(k)} = s.{_q(k)}" for k in keys)
    every = [*columns, *CHANGE_COORDINATES]

    def value(c: str, keep: bool) -> str:
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


def _prepare(spark, spec: CaptureSpec, table: str) -> tuple[str, str, list[str], list[str], list[tuple[str, str]]]:
    """(change table, target, keys, columns, toastable (column, type)) — the target created on the first
    run and given every column the change table gained since (schema evolution)."""
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
    props = ", ".join(f"'{k}'='{v}'" for k, v in {**CREATE_PROPERTIES, PRIMARY_KEY_PROPERTY: key_text}.items())
    chosen = ", ".join(_q(c) for c in (*columns, *CHANGE_COORDINATES))
    spark.sql(f"CREATE TABLE IF NOT EXISTS {target} USING iceberg TBLPROPERTIES ({props}) "
              f"AS SELECT {chosen} FROM {changes} WHERE false")
    spark.sql(f"REFRESH TABLE {target}")
    present = {f.name for f in spark.table(target).schema.fields}
    added = [c for c in columns if c not in present]
    if added:
        spark.sql(f"ALTER TABLE {target} ADD COLUMNS ({', '.join(f'{_q(c)} {fields[c]}' for c in added)})")
    toastable = [(c, fields[c]) for c in columns if fields[c] in _TOASTABLE and c not in keys]
    return changes, target, keys, columns, toastable


def merge_current_state(spark, spec: CaptureSpec, table: str) -> CurrentStateStats:
    """Bring ``table``'s current-state table up to its change table (created on the first run)."""
    if table not in spec.tables:
        raise CaptureError(f"capture {spec.name!r}: {table!r} is not a captured table ({', '.join(spec.tables)})")
    changes, target, keys, columns, toastable = _prepare(spark, spec, table)
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
            spark.sql(merge_sql(target, view, keys, columns, tuple(c for c, _ in toastable)))
            spark.sql(f"ALTER TABLE {target} SET TBLPROPERTIES ('{WATERMARK_PROPERTY}'='{json.dumps(watermark, sort_keys=True)}')")
    finally:
        spark.sql(f"UNCACHE TABLE IF EXISTS {view}")
        spark.catalog.dropTempView(view)  # UNCACHE keeps the view: a second run in the same session could not cache it
    rows = spark.sql(f"SELECT count(*) AS n FROM {target}").collect()[0]["n"]
    snapshots = spark.sql(f"SELECT snapshot_id FROM {target}.snapshots ORDER BY committed_at DESC LIMIT 1").collect()
    return CurrentStateStats(spec.current_table(table), int(summary["changes"]), int(summary["keys"]), int(summary["deletes"]),
                             int(rows), watermark, snapshots[0]["snapshot_id"] if snapshots else None)
