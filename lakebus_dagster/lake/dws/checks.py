"""Data checks of a DWS scope: totals against the ODS, null keys, duplicate keys.

:func:`check_scope` computes all three in ONE query (per-slot totals beside the key counts), so the
step that wrote a scope checks it in one round trip of its own Spark session; samples of offending
rows are read only when a check fails.

:func:`reconcile_totals` compares, per time slot, the ODS totals with the DWS totals each spec
declares (:meth:`~lakebus_dagster.lake.dws.spec.DwsTable.totals_sql`) — a *totals check*, not to be
confused with the desired-vs-live reconcilers of :mod:`lakebus_dagster.provision`.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from lakebus_dagster.lake.catalog import invalidate_cached_tables
from lakebus_dagster.lake.dws.locations import LakehouseTables
from lakebus_dagster.lake.dws.scope import Scope, scope_predicate
from lakebus_dagster.lake.dws.spec import DwsTable

#: tolerance for sums of doubles (summation order differs between engines); decimal sums match exactly
AMOUNT_ABS_TOLERANCE = 1e-6
AMOUNT_REL_TOLERANCE = 1e-9


def totals_sql(spec: DwsTable, tables: LakehouseTables, scope: Scope) -> str:
    """Per time slot of the scope: ODS totals next to DWS totals (``ods_<m>`` / ``dws_<m>`` columns)."""
    ods, dws_totals = spec.totals_sql(tables.sources_of(spec), scope)
    slot = spec.partition_by
    group = ", ".join(str(i + 1) for i in range(len(slot)))
    sums = ", ".join(f"{expr} AS {m}" for m, expr in dws_totals.items())
    dws = (
        f"SELECT {', '.join(slot)}, {sums} FROM {tables.qualified(tables.dws(spec))} "
        f"WHERE {scope_predicate(scope, typed=True)} GROUP BY {group}"
    )
    pick = ", ".join(f"coalesce(o.{c}, d.{c}) AS {c}" for c in slot)
    pairs = ", ".join(f"o.{m} AS ods_{m}, d.{m} AS dws_{m}" for m in dws_totals)
    on = " AND ".join(f"o.{c} = d.{c}" for c in slot)
    return f"WITH o AS ({ods}), d AS ({dws})\nSELECT {pick}, {pairs}\nFROM o FULL OUTER JOIN d ON {on}\nORDER BY {', '.join(slot)}"


def amounts_match(a: Decimal | float | None, b: Decimal | float | None) -> bool:
    """Decimal totals (the DWS money type) are equal or not; a double on either side (a DWS table
    created with double columns) is compared within the tolerance."""
    a, b = a or 0, b or 0
    if not isinstance(a, float) and not isinstance(b, float):
        return a == b
    a, b = float(a), float(b)
    return abs(a - b) <= AMOUNT_ABS_TOLERANCE + AMOUNT_REL_TOLERANCE * max(abs(a), abs(b))


@dataclass(frozen=True)
class TotalsCheck:
    slots: list[dict[str, Any]]  # one row per time slot: slot columns, ods_*, dws_*
    mismatches: list[dict[str, Any]]

    @property
    def passed(self) -> bool:
        return not self.mismatches

    def totals(self) -> dict[str, float]:
        keys = [k for k in (self.slots[0] if self.slots else {}) if k.startswith(("ods_", "dws_"))]
        return {k: sum((s[k] or 0) for s in self.slots) for k in keys}


def reconcile_totals(spark: Any, spec: DwsTable, tables: LakehouseTables, scope: Scope) -> TotalsCheck:
    """Compare counts and amounts per time slot between the ODS and the DWS table."""
    invalidate_cached_tables(spark, tables.qualified(tables.dws(spec)), *tables.sources_of(spec).values())
    return _compare([r.asDict() for r in spark.sql(totals_sql(spec, tables, scope)).collect()])


def _compare(slots: list[dict[str, Any]]) -> TotalsCheck:
    mismatches = []
    for row in slots:
        for key in [k for k in row if k.startswith("ods_")]:
            measure = key.removeprefix("ods_")
            ods, dws = row[key], row[f"dws_{measure}"]
            same = amounts_match(ods, dws) if "amount" in measure else (ods or 0) == (dws or 0)
            if not same:
                mismatches.append({**{c: row[c] for c in ("log_date", "hour") if c in row}, "measure": measure, "ods": ods, "dws": dws})
    return TotalsCheck(slots, mismatches)


def null_key_rows(spark: Any, spec: DwsTable, tables: LakehouseTables, scope: Scope, limit: int = 10) -> tuple[int, list[dict[str, Any]]]:
    """(count, sample) of rows in the scope with a null dimension key."""
    dws = tables.qualified(tables.dws(spec))
    invalidate_cached_tables(spark, dws)
    cond = " OR ".join(f"{k} IS NULL" for k in spec.keys)
    where = f"WHERE {scope_predicate(scope, typed=True)} AND ({cond})"
    n = spark.sql(f"SELECT count(*) AS n FROM {dws} {where}").collect()[0]["n"]
    sample = [r.asDict() for r in spark.sql(f"SELECT * FROM {dws} {where} LIMIT {int(limit)}").collect()] if n else []
    return int(n), sample


def duplicate_keys(spark: Any, spec: DwsTable, tables: LakehouseTables, scope: Scope, limit: int = 10) -> tuple[int, list[dict[str, Any]]]:
    """(number of keys held by more than one row, sample) in the scope; nulls count as equal keys."""
    dws = tables.qualified(tables.dws(spec))
    invalidate_cached_tables(spark, dws)
    keys = ", ".join(spec.keys)
    dup = (
        f"SELECT {keys}, count(*) AS rows FROM {dws} WHERE {scope_predicate(scope, typed=True)} "
        f"GROUP BY {keys} HAVING count(*) > 1"
    )
    n = spark.sql(f"SELECT count(*) AS n FROM ({dup})").collect()[0]["n"]
    sample = [r.asDict() for r in spark.sql(f"{dup} ORDER BY {keys} LIMIT {int(limit)}").collect()] if n else []
    return int(n), sample


def key_counts_sql(spec: DwsTable, tables: LakehouseTables, scope: Scope) -> str:
    """One row: rows of the scope with a null key, and keys held by more than one row."""
    dws = tables.qualified(tables.dws(spec))
    where = scope_predicate(scope, typed=True)
    keys = ", ".join(spec.keys)
    nulls = " OR ".join(f"{k} IS NULL" for k in spec.keys)
    return (
        f"SELECT (SELECT count(*) FROM {dws} WHERE {where} AND ({nulls})) AS _null_key_rows, "
        f"(SELECT count(*) FROM (SELECT {keys} FROM {dws} WHERE {where} GROUP BY {keys} HAVING count(*) > 1)) AS _duplicated_keys"
    )


@dataclass(frozen=True)
class ScopeChecks:
    """The three checks of one scope, from one query."""

    totals: TotalsCheck
    null_key_rows: int
    duplicated_keys: int


def check_scope(spark: Any, spec: DwsTable, tables: LakehouseTables, scope: Scope) -> ScopeChecks:
    """Totals per slot, null keys and duplicate keys of ``scope``, in one query.

    The key counts are a one-row table LEFT JOINed to the per-slot totals, so they arrive even when
    the scope has no slot at all (an empty hour)."""
    invalidate_cached_tables(spark, tables.qualified(tables.dws(spec)), *tables.sources_of(spec).values())
    sql = f"SELECT t.*, k.* FROM ({key_counts_sql(spec, tables, scope)}) k LEFT JOIN ({totals_sql(spec, tables, scope)}) t ON true"
    rows = [r.asDict() for r in spark.sql(sql).collect()]
    nulls, dups = (int(rows[0]["_null_key_rows"]), int(rows[0]["_duplicated_keys"])) if rows else (0, 0)
    slots = [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows if any(r[c] is not None for c in spec.partition_by)]
    slots.sort(key=lambda r: tuple(r[c] for c in spec.partition_by))
    return ScopeChecks(_compare(slots), nulls, dups)
