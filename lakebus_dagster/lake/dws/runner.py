"""Running a DWS build: create the tables, aggregate a scope, MERGE it, report what changed.

Pure functions of a ``SparkSession`` and table names (no Dagster here), so the same code runs in
the assets, in a notebook or in a benchmark::

    tables = LakehouseTables.from_routes(layout.routes)
    scope = Scope.hours(datetime(2025, 11, 25, 9, tzinfo=UTC), 3)   # 09:00-12:00
    stats = build_scope(spark, BET_HOUR, tables, scope)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from lakebus_dagster.lake.catalog import invalidate_cached_tables
from lakebus_dagster.lake.dws.locations import LakehouseTables
from lakebus_dagster.lake.dws.merge import create_namespace_sql, create_table_sql, merge_source_sql, merge_sql, source_sql
from lakebus_dagster.lake.dws.scope import Scope, scope_predicate
from lakebus_dagster.lake.dws.sources import resolve_sources
from lakebus_dagster.lake.dws.spec import DwsTable


def ensure_tables(spark: Any, tables: LakehouseTables, specs: Iterable[DwsTable] | None = None) -> None:
    """Create the DWS namespace and tables unless they exist (idempotent)."""
    spark.sql(create_namespace_sql(tables))
    for spec in tables.specs if specs is None else specs:
        spark.sql(create_table_sql(spec, tables.qualified(tables.dws(spec))))


def current_snapshot(spark: Any, table: str) -> tuple[int | None, dict[str, str]]:
    """(snapshot id, summary) of ``table``'s most recent commit; (None, {}) before the first one."""
    rows = spark.sql(
        f"SELECT snapshot_id, summary FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).collect()
    return (rows[0]["snapshot_id"], dict(rows[0]["summary"] or {})) if rows else (None, {})


@dataclass(frozen=True)
class BuildStats:
    """What one :func:`build_scope` did, for the materialization's metadata."""

    table: str
    scope: Scope
    source_rows: int  # ODS rows aggregated (the sum of the count measures)
    output_rows: int  # aggregate rows produced for the scope
    rows_in_scope: int  # target rows in the scope after the merge
    inserted: int
    updated: int
    deleted: int
    snapshot_id: int | None
    committed: bool
    #: events whose ODS table did not exist yet, read as empty
    absent_sources: tuple[str, ...] = ()
    preview: list[dict[str, Any]] = field(default_factory=list)
    preview_columns: tuple[str, ...] = ()


_MERGE_COUNTERS = {
    "inserted": "spark.merge-into.num-target-rows-inserted",
    "updated": "spark.merge-into.num-target-rows-updated",
    "deleted": "spark.merge-into.num-target-rows-deleted",
}


def _count_measures(spec: DwsTable) -> list[str]:
    return [m for m in spec.measures if m.endswith("_count")]


def build_scope(spark: Any, spec: DwsTable, tables: LakehouseTables, scope: Scope, *, preview_rows: int = 10) -> BuildStats:
    """Recompute ``spec`` for ``scope`` from the ODS and MERGE it in (creating the table if needed)."""
    if scope.grain != spec.grain:
        raise ValueError(f"{spec.name} is {spec.grain}-grained, got a {scope.grain} scope")
    target = tables.qualified(tables.dws(spec))
    # an ODS table the sink has not created yet (no such event so far) is read as empty
    tables, absent = resolve_sources(spark, tables, spec)
    sources = list(tables.sources_of(spec).values())
    ensure_tables(spark, tables, [spec])
    invalidate_cached_tables(spark, target, *sources)
    before, _ = current_snapshot(spark, target)

    # materialise the (small) aggregate once: it is counted here and read again by the MERGE.
    # CACHE TABLE, not DataFrame.localCheckpoint: pure SQL works alike on an embedded session and on
    # Spark Connect, whose 4.1 client binds a checkpoint's result to the process's *active* session
    # (pyspark.sql.connect.conversion.proto_to_remote_cached_dataframe) — with two sessions in one
    # process the MERGE then looked for the cached relation in the wrong one. The MERGE's source
    # (the aggregate joined with the scope's current keys) is a plain view: the MERGE reads it once.
    view, merge_view = f"_dws_src_{spec.name}", f"_dws_merge_{spec.name}"
    count_columns = _count_measures(spec)
    try:
        spark.sql(f"CACHE TABLE {view} AS {source_sql(spec, tables, scope)}")
        counts = spark.sql(f"SELECT {', '.join(count_columns)} FROM {view}").collect()
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {merge_view} AS {merge_source_sql(spec, view, target, scope)}")
        spark.sql(merge_sql(spec, target, merge_view, scope))
    finally:
        spark.sql(f"UNCACHE TABLE IF EXISTS {view}")
        for name in (merge_view, view):
            spark.catalog.dropTempView(name)

    after, summary = current_snapshot(spark, target)
    committed = after != before
    in_scope = f"SELECT * FROM {target} WHERE {scope_predicate(scope, typed=True)}"
    rows_in_scope = spark.sql(f"SELECT count(*) AS n FROM ({in_scope})").collect()[0]["n"]
    order = ", ".join(spec.keys)
    preview = [r.asDict() for r in spark.sql(f"{in_scope} ORDER BY {order} LIMIT {int(preview_rows)}").collect()]
    return BuildStats(
        table=tables.dws(spec),
        scope=scope,
        source_rows=int(sum(r[c] or 0 for r in counts for c in count_columns)),
        output_rows=len(counts),
        rows_in_scope=int(rows_in_scope),
        snapshot_id=after,
        committed=committed,
        absent_sources=absent,
        preview=preview,
        preview_columns=spec.column_names,
        **{k: int(summary.get(v, 0)) if committed else 0 for k, v in _MERGE_COUNTERS.items()},
    )
