"""DDL and the partition-scoped MERGE that writes a scope's aggregate into its DWS table.

Rerunning a scope replaces exactly that scope: changed rows are updated, new keys inserted, and keys
that no longer exist in the source are deleted.

Why the deletes are not ``WHEN NOT MATCHED BY SOURCE AND <scope> THEN DELETE``: Spark 4.1 /
Iceberg 1.11 cannot push any filter down to the target scan of a MERGE that has a NOT MATCHED BY
SOURCE clause (Iceberg logs ``filter=true``), so with copy-on-write every rerun of one hour
rewrote *every* partition of the table, and with merge-on-read it still read every data file
(measured: 48 of 48 files for a 48-partition table, against 1 of 48 here) — and two runs on
different partitions conflicted with each other. Instead the MERGE's source is the new aggregate
*full-outer-joined with the keys currently in the scope*; keys present only in the target come
out flagged as gone and are deleted by ``WHEN MATCHED AND gone THEN DELETE``. The ON clause then
holds target-only scope predicates, which Iceberg pushes down: only the scope's files are read
and rewritten, and the commit's conflict detection is scoped to them.
"""

from __future__ import annotations

from collections.abc import Mapping

from lakebus_dagster.bus.table_properties import CREATE_PROPERTIES
from lakebus_dagster.lake.dws.locations import LakehouseTables
from lakebus_dagster.lake.dws.scope import Scope, scope_predicate
from lakebus_dagster.lake.dws.spec import DwsTable

#: flag column of the MERGE source: the key exists in the target scope but no longer in the ODS
GONE = "_dws_gone"

TABLE_PROPERTIES: Mapping[str, str] = {
    # format, codec and the metadata bounds every lake table is created with (bus/table_properties.py)
    **CREATE_PROPERTIES,
    # explicit: a rerun rewrites the (one) file of its partition; no delete files for readers to merge
    "write.merge.mode": "copy-on-write",
    "write.update.mode": "copy-on-write",
    "write.delete.mode": "copy-on-write",
}


def create_namespace_sql(tables: LakehouseTables) -> str:
    return f"CREATE NAMESPACE IF NOT EXISTS {tables.catalog}.{tables.dws_namespace}"


def create_table_sql(spec: DwsTable, table: str) -> str:
    cols = ",\n  ".join(f"{name} {type_} COMMENT '{comment}'" for name, type_, comment in spec.columns)
    props = ", ".join(f"'{k}'='{v}'" for k, v in TABLE_PROPERTIES.items())
    return (
        f"CREATE TABLE IF NOT EXISTS {table} (\n  {cols}\n)\nUSING iceberg\n"
        f"PARTITIONED BY ({', '.join(spec.partition_by)})\n"
        f"COMMENT '{spec.description}'\n"
        f"TBLPROPERTIES ({props})"
    )


def source_sql(spec: DwsTable, tables: LakehouseTables, scope: Scope) -> str:
    """The new aggregate of the scope, read from the ODS with the scope's predicate (pruned)."""
    return spec.aggregate_sql(tables.sources_of(spec), scope)


def _key_match(spec: DwsTable, left: str, right: str) -> str:
    # time columns are never null (required in the ODS); dimensions may be, hence null-safe equality
    return " AND ".join(
        f"{left}.{k} = {right}.{k}" if k in spec.partition_by else f"{left}.{k} <=> {right}.{k}" for k in spec.keys
    )


def merge_source_sql(spec: DwsTable, source_view: str, target: str, scope: Scope) -> str:
    """The aggregate plus one ``GONE`` row per key that is in the target scope but not in the aggregate."""
    keys = ", ".join(spec.keys)
    pick = ",\n       ".join(f"coalesce(s.{k}, c.{k}) AS {k}" for k in spec.keys)
    measures = ",\n       ".join(f"s.{m}" for m in spec.measures)
    return (
        f"SELECT {pick},\n       {measures},\n       s._present IS NULL AS {GONE}\n"
        f"FROM (SELECT *, true AS _present FROM {source_view}) s\n"
        f"FULL OUTER JOIN (SELECT DISTINCT {keys} FROM {target} WHERE {scope_predicate(scope, typed=True)}) c\n"
        f"  ON {_key_match(spec, 's', 'c')}"
    )


def merge_sql(spec: DwsTable, target: str, source_view: str, scope: Scope) -> str:
    """MERGE scoped by a target-only predicate in ON (pushed down: only the scope's files are touched)."""
    unchanged = " AND ".join(f"t.{m} <=> s.{m}" for m in spec.measures)
    cols = ", ".join(spec.column_names)
    return (
        f"MERGE INTO {target} t\nUSING {source_view} s\n"
        f"ON {scope_predicate(scope, typed=True, alias='t')} AND {_key_match(spec, 't', 's')}\n"
        f"WHEN MATCHED AND s.{GONE} THEN DELETE\n"
        f"WHEN MATCHED AND NOT ({unchanged}) THEN UPDATE SET {', '.join(f't.{m} = s.{m}' for m in spec.measures)}\n"
        f"WHEN NOT MATCHED AND NOT s.{GONE} THEN INSERT ({cols}) VALUES ({', '.join(f's.{c}' for c in spec.column_names)})"
    )
