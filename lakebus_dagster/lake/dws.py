"""DWS aggregates of the ODS tables with Spark SQL: DDL, partition-scoped MERGE, reconciliation.

Pure functions of a ``SparkSession`` and table names (no Dagster here), so the same code runs in
the assets, in a notebook or in a benchmark:

    tables = LakehouseTables.from_routes(layout.routes)
    scope = Scope.hours(datetime(2025, 11, 25, 9, tzinfo=UTC), 3)   # 09:00-12:00
    stats = refresh(spark, BET_HOUR, tables, scope)

**Scopes.** Every write and every check works on a :class:`Scope`: a half-open UTC time range
``[start, end)`` at the table's grain (whole hours or whole days). One Dagster partition is a scope,
and so is a single-run backfill of many partitions. :func:`scope_predicate` renders it as a
``log_date``/``hour`` predicate, both for the ODS tables (strings ``'YYYY-MM-DD'``/``'HH'``, which
compare correctly as strings because they are zero-padded) and for the DWS tables (``date``/``int``),
so Iceberg prunes data files by partition (DWS) or by column min/max statistics (ODS).

**Writes.** :func:`refresh` aggregates the ODS rows of the scope and MERGEs them into the DWS
table on the dimension keys, so rerunning a scope replaces exactly that scope: changed rows are
updated, new keys inserted, and keys that no longer exist in the source are deleted.

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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any, Literal

from lakebus_dagster.lake.spark import SPARK_CATALOG

Grain = Literal["hour", "day"]

#: recharges with this status count as money in (``dws_user_day.recharge_*``)
SUCCESS_STATUS = "success"
#: DWS namespace = ODS namespace + this suffix, so an isolated bus gets isolated DWS tables
DWS_NAMESPACE_SUFFIX = "dws"
#: flag column of the MERGE source: the key exists in the target scope but no longer in the ODS
GONE = "_dws_gone"
#: reconciliation tolerance for sums of doubles (summation order differs between engines)
AMOUNT_ABS_TOLERANCE = 1e-6
AMOUNT_REL_TOLERANCE = 1e-9

_UTC = timezone.utc


# -- scopes -------------------------------------------------------------------------------------
def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=_UTC) if value.tzinfo is None else value.astimezone(_UTC)


@dataclass(frozen=True)
class Scope:
    """``[start, end)`` in UTC, aligned to ``grain`` (whole hours or whole days)."""

    start: datetime
    end: datetime
    grain: Grain

    def __post_init__(self) -> None:
        start, end = _utc(self.start), _utc(self.end)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "end", end)
        if self.grain not in ("hour", "day"):
            raise ValueError(f"grain must be 'hour' or 'day', got {self.grain!r}")
        if end <= start:
            raise ValueError(f"empty scope: end {end.isoformat()} is not after start {start.isoformat()}")
        for name, value in (("start", start), ("end", end)):
            if value.minute or value.second or value.microsecond or (self.grain == "day" and value.hour):
                raise ValueError(f"scope {name} {value.isoformat()} is not aligned to whole {self.grain}s")

    @classmethod
    def hours(cls, start: datetime, count: int = 1) -> Scope:
        return cls(start, _utc(start) + timedelta(hours=count), "hour")

    @classmethod
    def days(cls, first: date | str, count: int = 1) -> Scope:
        day = date.fromisoformat(first) if isinstance(first, str) else first
        start = datetime(day.year, day.month, day.day, tzinfo=_UTC)
        return cls(start, start + timedelta(days=count), "day")

    @property
    def last(self) -> datetime:
        """The start of the last hour/day inside the scope."""
        return self.end - (timedelta(hours=1) if self.grain == "hour" else timedelta(days=1))

    def slots(self) -> list[tuple[str, int | None]]:
        """Every ``(log_date, hour)`` of the scope (hour is None for a day grain)."""
        step = timedelta(hours=1) if self.grain == "hour" else timedelta(days=1)
        out, at = [], self.start
        while at < self.end:
            out.append((at.date().isoformat(), at.hour if self.grain == "hour" else None))
            at += step
        return out

    def describe(self) -> str:
        fmt = "%Y-%m-%d %H:00" if self.grain == "hour" else "%Y-%m-%d"
        first, last = self.start.strftime(fmt), self.last.strftime(fmt)
        return first if first == last else f"{first} .. {last}"


def _date_literal(day: date, typed: bool) -> str:
    return f"DATE '{day.isoformat()}'" if typed else f"'{day.isoformat()}'"


def _hour_literal(hour: int, typed: bool) -> str:
    return str(hour) if typed else f"'{hour:02d}'"


def scope_predicate(scope: Scope, *, typed: bool, alias: str | None = None) -> str:
    """SQL predicate selecting the scope's rows by ``log_date`` (and ``hour`` for an hour grain).

    ``typed``: the DWS layout (``log_date date``, ``hour int``); otherwise the ODS layout (zero-padded
    strings, compared as strings). Only comparisons of a column with a literal, joined by AND/OR, so
    Iceberg turns the predicate into a partition / min-max filter.
    """
    col = (lambda c: f"{alias}.{c}") if alias else (lambda c: c)
    d, h = col("log_date"), col("hour")

    def dlit(day: date) -> str:
        return _date_literal(day, typed)

    def hlit(hour: int) -> str:
        return _hour_literal(hour, typed)

    def days(first: date, last: date) -> str:
        return f"{d} = {dlit(first)}" if first == last else f"{d} BETWEEN {dlit(first)} AND {dlit(last)}"

    first, last = scope.start, scope.last
    if scope.grain == "day":
        return f"({days(first.date(), last.date())})"
    d0, h0, dn, hn = first.date(), first.hour, last.date(), last.hour
    if d0 == dn:
        hours = "" if (h0, hn) == (0, 23) else (
            f" AND {h} = {hlit(h0)}" if h0 == hn else f" AND {h} BETWEEN {hlit(h0)} AND {hlit(hn)}"
        )
        return f"({d} = {dlit(d0)}{hours})"
    clauses = []
    full_first = d0 if h0 == 0 else d0 + timedelta(days=1)
    full_last = dn if hn == 23 else dn - timedelta(days=1)
    if h0 != 0:
        clauses.append(f"({d} = {dlit(d0)} AND {h} >= {hlit(h0)})")
    if full_first <= full_last:
        clauses.append(f"({days(full_first, full_last)})")
    if hn != 23:
        clauses.append(f"({d} = {dlit(dn)} AND {h} <= {hlit(hn)})")
    return "(" + " OR ".join(clauses) + ")"


# -- tables -------------------------------------------------------------------------------------
def dws_namespace(ods_namespace: str) -> str:
    """``demo`` -> ``demo_dws``; ``demo_1a2b3c4d`` (an isolated test bus) -> ``demo_1a2b3c4d_dws``."""
    return f"{ods_namespace}_{DWS_NAMESPACE_SUFFIX}"


@dataclass(frozen=True)
class DwsTable:
    """One DWS table: its columns, its dimension keys (the MERGE keys) and its measures."""

    name: str
    columns: tuple[tuple[str, str, str], ...]  # (name, Spark SQL type, comment)
    keys: tuple[str, ...]
    measures: tuple[str, ...]
    partition_by: tuple[str, ...]
    grain: Grain
    description: str = ""

    def __post_init__(self) -> None:
        names = [c[0] for c in self.columns]
        if sorted(names) != sorted(self.keys + self.measures) or len(set(names)) != len(names):
            raise ValueError(f"{self.name}: columns {names} must be exactly keys + measures")
        if not set(self.partition_by) <= set(self.keys):
            raise ValueError(f"{self.name}: partition columns must be keys")

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c[0] for c in self.columns)

    @property
    def dimensions(self) -> tuple[str, ...]:
        """Keys other than the time columns (the ones that may be null in the ODS)."""
        return tuple(k for k in self.keys if k not in self.partition_by)


BET_HOUR = DwsTable(
    name="dws_biz_bet_hour",
    columns=(
        ("log_date", "date", "UTC day of the bets"),
        ("hour", "int", "UTC hour of the bets, 0-23"),
        ("plat_id", "int", "platform"),
        ("app_id", "int", "application"),
        ("currency", "string", "currency of the amounts"),
        ("game_id", "int", "game"),
        ("amount", "double", "sum of bet amounts"),
        ("bet_count", "bigint", "number of bets"),
    ),
    keys=("log_date", "hour", "plat_id", "app_id", "currency", "game_id"),
    measures=("amount", "bet_count"),
    partition_by=("log_date", "hour"),
    grain="hour",
    description="Bets per hour, platform, app, currency and game.",
)

RECHARGE_HOUR = DwsTable(
    name="dws_biz_recharge_hour",
    columns=(
        ("log_date", "date", "UTC day of the recharges"),
        ("hour", "int", "UTC hour of the recharges, 0-23"),
        ("plat_id", "int", "platform"),
        ("app_id", "int", "application"),
        ("currency", "string", "currency of the amounts"),
        ("status", "string", "recharge status (success, failed, ...)"),
        ("recharge_count", "bigint", "number of recharges"),
        ("amount", "double", "sum of recharge amounts"),
    ),
    keys=("log_date", "hour", "plat_id", "app_id", "currency", "status"),
    measures=("recharge_count", "amount"),
    partition_by=("log_date", "hour"),
    grain="hour",
    description="Recharges per hour, platform, app, currency and status (every status).",
)

USER_DAY = DwsTable(
    name="dws_user_day",
    columns=(
        ("log_date", "date", "UTC day"),
        ("user_id", "int", "user"),
        ("bet_count", "bigint", "number of bets"),
        ("bet_amount", "double", "sum of bet amounts"),
        ("recharge_count", "bigint", "number of successful recharges"),
        ("recharge_amount", "double", "sum of successful recharge amounts"),
        ("net", "double", "recharge_amount - bet_amount"),
    ),
    keys=("log_date", "user_id"),
    measures=("bet_count", "bet_amount", "recharge_count", "recharge_amount", "net"),
    partition_by=("log_date",),
    grain="day",
    description="Per user and day: bets, successful recharges and net = recharge_amount - bet_amount.",
)

DWS_TABLES: tuple[DwsTable, ...] = (BET_HOUR, RECHARGE_HOUR, USER_DAY)

TABLE_PROPERTIES: Mapping[str, str] = {
    "format-version": "2",
    "write.parquet.compression-codec": "zstd",
    # explicit: a rerun rewrites the (one) file of its partition; no delete files for readers to merge
    "write.merge.mode": "copy-on-write",
    "write.update.mode": "copy-on-write",
    "write.delete.mode": "copy-on-write",
}


@dataclass(frozen=True)
class LakehouseTables:
    """Where the ODS tables are (from the bus layout's routes) and where the DWS tables go."""

    ods_bet: str
    ods_recharge: str
    dws_namespace: str
    catalog: str = SPARK_CATALOG

    @classmethod
    def from_routes(cls, routes: Mapping[str, str], catalog: str = SPARK_CATALOG) -> LakehouseTables:
        missing = {"bet", "recharge"} - set(routes)
        if missing:
            raise ValueError(f"the bus layout routes no {sorted(missing)} event(s); the DWS tables need both")
        return cls(routes["bet"], routes["recharge"], dws_namespace(routes["bet"].split(".", 1)[0]), catalog)

    def qualified(self, table: str) -> str:
        """``namespace.table`` -> ``<catalog>.namespace.table`` (procedures need the catalog)."""
        return f"{self.catalog}.{table}"

    def dws(self, spec: DwsTable) -> str:
        return f"{self.dws_namespace}.{spec.name}"

    @property
    def ods(self) -> tuple[str, ...]:
        return (self.ods_bet, self.ods_recharge)

    @property
    def all_dws(self) -> tuple[str, ...]:
        return tuple(self.dws(spec) for spec in DWS_TABLES)


# -- SQL builders -------------------------------------------------------------------------------
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
    ods_pred = scope_predicate(scope, typed=False)
    bet, recharge = tables.qualified(tables.ods_bet), tables.qualified(tables.ods_recharge)
    if spec is BET_HOUR:
        return (
            "SELECT CAST(log_date AS DATE) AS log_date, CAST(hour AS INT) AS hour, plat_id, app_id, currency, game_id,\n"
            "       CAST(coalesce(sum(amount), 0) AS DOUBLE) AS amount, count(*) AS bet_count\n"
            f"FROM {bet}\nWHERE {ods_pred}\n"
            "GROUP BY log_date, hour, plat_id, app_id, currency, game_id"
        )
    if spec is RECHARGE_HOUR:
        return (
            "SELECT CAST(log_date AS DATE) AS log_date, CAST(hour AS INT) AS hour, plat_id, app_id, currency, status,\n"
            "       count(*) AS recharge_count, CAST(coalesce(sum(amount), 0) AS DOUBLE) AS amount\n"
            f"FROM {recharge}\nWHERE {ods_pred}\n"
            "GROUP BY log_date, hour, plat_id, app_id, currency, status"
        )
    if spec is USER_DAY:
        return (
            "WITH b AS (\n"
            "  SELECT log_date, user_id, count(*) AS bet_count, CAST(coalesce(sum(amount), 0) AS DOUBLE) AS bet_amount\n"
            f"  FROM {bet} WHERE {ods_pred} GROUP BY log_date, user_id\n"
            "), r AS (\n"
            "  SELECT log_date, user_id, count(*) AS recharge_count,"
            " CAST(coalesce(sum(amount), 0) AS DOUBLE) AS recharge_amount\n"
            f"  FROM {recharge} WHERE {ods_pred} AND status = '{SUCCESS_STATUS}' GROUP BY log_date, user_id\n"
            ")\n"
            "SELECT CAST(coalesce(b.log_date, r.log_date) AS DATE) AS log_date, coalesce(b.user_id, r.user_id) AS user_id,\n"
            "       coalesce(b.bet_count, 0) AS bet_count, coalesce(b.bet_amount, 0D) AS bet_amount,\n"
            "       coalesce(r.recharge_count, 0) AS recharge_count, coalesce(r.recharge_amount, 0D) AS recharge_amount,\n"
            "       coalesce(r.recharge_amount, 0D) - coalesce(b.bet_amount, 0D) AS net\n"
            "FROM b FULL OUTER JOIN r ON b.log_date = r.log_date AND b.user_id <=> r.user_id"
        )
    raise ValueError(f"no source query for {spec.name}")


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


# -- running ------------------------------------------------------------------------------------
def ensure_tables(spark: Any, tables: LakehouseTables, specs: Iterable[DwsTable] = DWS_TABLES) -> None:
    """Create the DWS namespace and tables unless they exist (idempotent)."""
    spark.sql(create_namespace_sql(tables))
    for spec in specs:
        spark.sql(create_table_sql(spec, tables.qualified(tables.dws(spec))))


def refresh_tables(spark: Any, *tables: str) -> None:
    """Forget the session's cached metadata of ``tables`` so the next read sees their latest snapshot.

    Iceberg's Spark catalog caches loaded tables (``cache-enabled``, 30 s by default): without this,
    a long-lived session would read an ODS table as it was before the sink's latest commits.
    """
    for table in tables:
        if spark.catalog.tableExists(table):
            spark.catalog.refreshTable(table)


def current_snapshot(spark: Any, table: str) -> tuple[int | None, dict[str, str]]:
    """(snapshot id, summary) of ``table``'s most recent commit; (None, {}) before the first one."""
    rows = spark.sql(
        f"SELECT snapshot_id, summary FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).collect()
    return (rows[0]["snapshot_id"], dict(rows[0]["summary"] or {})) if rows else (None, {})


@dataclass(frozen=True)
class RefreshStats:
    """What one :func:`refresh` did, for the materialization's metadata."""

    table: str
    scope: Scope
    source_rows: int  # ODS rows aggregated (user_day: bets + successful recharges)
    output_rows: int  # aggregate rows produced for the scope
    rows_in_scope: int  # target rows in the scope after the merge
    inserted: int
    updated: int
    deleted: int
    snapshot_id: int | None
    committed: bool
    preview: list[dict[str, Any]] = field(default_factory=list)
    preview_columns: tuple[str, ...] = ()


_MERGE_COUNTERS = {
    "inserted": "spark.merge-into.num-target-rows-inserted",
    "updated": "spark.merge-into.num-target-rows-updated",
    "deleted": "spark.merge-into.num-target-rows-deleted",
}


def refresh(spark: Any, spec: DwsTable, tables: LakehouseTables, scope: Scope, *, preview_rows: int = 10) -> RefreshStats:
    """Recompute ``spec`` for ``scope`` from the ODS and MERGE it in (creating the table if needed)."""
    if scope.grain != spec.grain:
        raise ValueError(f"{spec.name} is {spec.grain}-grained, got a {scope.grain} scope")
    target = tables.qualified(tables.dws(spec))
    sources = [tables.ods_bet] if spec is BET_HOUR else [tables.ods_recharge] if spec is RECHARGE_HOUR else list(tables.ods)
    missing = [t for t in sources if not spark.catalog.tableExists(tables.qualified(t))]
    if missing:
        raise LookupError(f"{spec.name}: ODS table(s) {missing} do not exist yet (the sink creates a table with its first event)")
    ensure_tables(spark, tables, [spec])
    refresh_tables(spark, target, *(tables.qualified(t) for t in sources))
    before, _ = current_snapshot(spark, target)

    # materialise the (small) aggregate once: it is counted here and read again by the MERGE
    aggregate = spark.sql(source_sql(spec, tables, scope)).localCheckpoint(eager=True)
    count_columns = [c for c in ("bet_count", "recharge_count") if c in spec.measures]
    counts = aggregate.select(*count_columns).collect()
    view = f"_dws_src_{spec.name}"
    aggregate.createOrReplaceTempView(view)
    source = spark.sql(merge_source_sql(spec, view, target, scope)).localCheckpoint(eager=True)
    merge_view = f"_dws_merge_{spec.name}"
    source.createOrReplaceTempView(merge_view)
    try:
        spark.sql(merge_sql(spec, target, merge_view, scope))
    finally:
        spark.catalog.dropTempView(view)
        spark.catalog.dropTempView(merge_view)

    after, summary = current_snapshot(spark, target)
    committed = after != before
    in_scope = f"SELECT * FROM {target} WHERE {scope_predicate(scope, typed=True)}"
    rows_in_scope = spark.sql(f"SELECT count(*) AS n FROM ({in_scope})").collect()[0]["n"]
    order = ", ".join(spec.keys)
    preview = [r.asDict() for r in spark.sql(f"{in_scope} ORDER BY {order} LIMIT {int(preview_rows)}").collect()]
    return RefreshStats(
        table=tables.dws(spec),
        scope=scope,
        source_rows=int(sum(r[c] or 0 for r in counts for c in count_columns)),
        output_rows=len(counts),
        rows_in_scope=int(rows_in_scope),
        snapshot_id=after,
        committed=committed,
        preview=preview,
        preview_columns=spec.column_names,
        **{k: int(summary.get(v, 0)) if committed else 0 for k, v in _MERGE_COUNTERS.items()},
    )


# -- checks -------------------------------------------------------------------------------------
def reconcile_sql(spec: DwsTable, tables: LakehouseTables, scope: Scope) -> str:
    """Per time slot of the scope: ODS totals next to DWS totals (``ods_<m>`` / ``dws_<m>`` columns)."""
    ods_pred, dws_pred = scope_predicate(scope, typed=False), scope_predicate(scope, typed=True)
    bet, recharge = tables.qualified(tables.ods_bet), tables.qualified(tables.ods_recharge)
    dws = tables.qualified(tables.dws(spec))
    slot = ("log_date", "hour") if spec.grain == "hour" else ("log_date",)
    ods_slot = ", ".join(
        ["CAST(log_date AS DATE) AS log_date"] + (["CAST(hour AS INT) AS hour"] if spec.grain == "hour" else [])
    )
    group = ", ".join(str(i + 1) for i in range(len(slot)))
    money = "CAST(coalesce(sum(amount), 0) AS DOUBLE)"
    if spec is BET_HOUR:
        ods = f"SELECT {ods_slot}, count(*) AS count, {money} AS amount FROM {bet} WHERE {ods_pred} GROUP BY {group}"
        dws_q = f"SELECT {', '.join(slot)}, sum(bet_count) AS count, sum(amount) AS amount FROM {dws} WHERE {dws_pred} GROUP BY {group}"
        measures = ("count", "amount")
    elif spec is RECHARGE_HOUR:
        ods = f"SELECT {ods_slot}, count(*) AS count, {money} AS amount FROM {recharge} WHERE {ods_pred} GROUP BY {group}"
        dws_q = (
            f"SELECT {', '.join(slot)}, sum(recharge_count) AS count, sum(amount) AS amount "
            f"FROM {dws} WHERE {dws_pred} GROUP BY {group}"
        )
        measures = ("count", "amount")
    elif spec is USER_DAY:
        ods = (
            f"SELECT log_date, sum(bet_count) AS bet_count, sum(bet_amount) AS bet_amount, "
            f"sum(recharge_count) AS recharge_count, sum(recharge_amount) AS recharge_amount FROM ("
            f"SELECT {ods_slot}, count(*) AS bet_count, {money} AS bet_amount, 0L AS recharge_count, 0D AS recharge_amount "
            f"FROM {bet} WHERE {ods_pred} GROUP BY {group} "
            f"UNION ALL SELECT {ods_slot}, 0L, 0D, count(*), {money} "
            f"FROM {recharge} WHERE {ods_pred} AND status = '{SUCCESS_STATUS}' GROUP BY {group}"
            f") GROUP BY log_date"
        )
        dws_q = (
            "SELECT log_date, sum(bet_count) AS bet_count, sum(bet_amount) AS bet_amount, "
            "sum(recharge_count) AS recharge_count, sum(recharge_amount) AS recharge_amount "
            f"FROM {dws} WHERE {dws_pred} GROUP BY log_date"
        )
        measures = ("bet_count", "bet_amount", "recharge_count", "recharge_amount")
    else:
        raise ValueError(f"no reconciliation for {spec.name}")
    pick = ", ".join(f"coalesce(o.{c}, d.{c}) AS {c}" for c in slot)
    pairs = ", ".join(f"o.{m} AS ods_{m}, d.{m} AS dws_{m}" for m in measures)
    on = " AND ".join(f"o.{c} = d.{c}" for c in slot)
    return f"WITH o AS ({ods}), d AS ({dws_q})\nSELECT {pick}, {pairs}\nFROM o FULL OUTER JOIN d ON {on}\nORDER BY {', '.join(slot)}"


def amounts_match(a: float | None, b: float | None) -> bool:
    a, b = a or 0.0, b or 0.0
    return abs(a - b) <= AMOUNT_ABS_TOLERANCE + AMOUNT_REL_TOLERANCE * max(abs(a), abs(b))


@dataclass(frozen=True)
class Reconciliation:
    slots: list[dict[str, Any]]  # one row per time slot: slot columns, ods_*, dws_*
    mismatches: list[dict[str, Any]]

    @property
    def passed(self) -> bool:
        return not self.mismatches

    def totals(self) -> dict[str, float]:
        keys = [k for k in (self.slots[0] if self.slots else {}) if k.startswith(("ods_", "dws_"))]
        return {k: sum((s[k] or 0) for s in self.slots) for k in keys}


def reconcile(spark: Any, spec: DwsTable, tables: LakehouseTables, scope: Scope) -> Reconciliation:
    """Compare counts and amounts per time slot between the ODS and the DWS table."""
    refresh_tables(spark, tables.qualified(tables.dws(spec)), *(tables.qualified(t) for t in tables.ods))
    slots = [r.asDict() for r in spark.sql(reconcile_sql(spec, tables, scope)).collect()]
    mismatches = []
    for row in slots:
        for key in [k for k in row if k.startswith("ods_")]:
            measure = key.removeprefix("ods_")
            ods, dws = row[key], row[f"dws_{measure}"]
            same = amounts_match(ods, dws) if "amount" in measure else (ods or 0) == (dws or 0)
            if not same:
                mismatches.append({**{c: row[c] for c in ("log_date", "hour") if c in row}, "measure": measure, "ods": ods, "dws": dws})
    return Reconciliation(slots, mismatches)


def null_key_rows(spark: Any, spec: DwsTable, tables: LakehouseTables, scope: Scope, limit: int = 10) -> tuple[int, list[dict[str, Any]]]:
    """(count, sample) of rows in the scope with a null dimension key."""
    dws = tables.qualified(tables.dws(spec))
    refresh_tables(spark, dws)
    cond = " OR ".join(f"{k} IS NULL" for k in spec.keys)
    where = f"WHERE {scope_predicate(scope, typed=True)} AND ({cond})"
    n = spark.sql(f"SELECT count(*) AS n FROM {dws} {where}").collect()[0]["n"]
    sample = [r.asDict() for r in spark.sql(f"SELECT * FROM {dws} {where} LIMIT {int(limit)}").collect()] if n else []
    return int(n), sample


def duplicate_keys(spark: Any, spec: DwsTable, tables: LakehouseTables, scope: Scope, limit: int = 10) -> tuple[int, list[dict[str, Any]]]:
    """(number of keys held by more than one row, sample) in the scope; nulls count as equal keys."""
    dws = tables.qualified(tables.dws(spec))
    refresh_tables(spark, dws)
    keys = ", ".join(spec.keys)
    dup = (
        f"SELECT {keys}, count(*) AS rows FROM {dws} WHERE {scope_predicate(scope, typed=True)} "
        f"GROUP BY {keys} HAVING count(*) > 1"
    )
    n = spark.sql(f"SELECT count(*) AS n FROM ({dup})").collect()[0]["n"]
    sample = [r.asDict() for r in spark.sql(f"{dup} ORDER BY {keys} LIMIT {int(limit)}").collect()] if n else []
    return int(n), sample


def markdown_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    """A small GitHub-flavoured markdown table (metadata previews)."""
    if not rows:
        return "_no rows_"
    columns = list(columns or rows[0].keys())

    def cell(value: Any) -> str:
        if value is None:
            return "∅"
        if isinstance(value, float):
            return f"{value:,.2f}"
        return str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)
