"""Iceberg table maintenance with Spark: retention, compaction, snapshot expiry, orphan files.

Pure functions of a ``SparkSession`` and catalog-qualified table names (``lake.demo.dwd_biz_bet``),
one per Iceberg procedure, each returning the procedure's counters; :func:`maintain_table` runs
them in the safe order and measures the table's data files before and after.

Order matters: retention first (its DELETE rewrites files, which compaction then merges), then
``rewrite_data_files`` (small files -> few large ones; the sink commits a file per table every
commit interval), ``rewrite_manifests`` (one manifest per sink commit otherwise), the time-travel tags (the
snapshots at the top of each hour and day, kept past the expiry), then ``expire_snapshots`` (makes the replaced files unreachable and deletes them) and finally
``remove_orphan_files`` (files no snapshot ever referenced, e.g. from failed writes). Orphan
removal lists the table location with the FileIO's prefix listing (S3FileIO; there is no Hadoop
``s3://`` filesystem in this stack) and refuses, like Iceberg itself, an age under 24 hours: a
younger file may belong to a write that has not committed yet (the sink, a running MERGE).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any

from lakebus_dagster.bus.provenance import OFFSET_COLUMN, PARTITION_COLUMN, TOPIC_COLUMN
from lakebus_dagster.lake.catalog import invalidate_cached_tables
from lakebus_dagster.lake.time_travel import SnapshotRef, tags_to_create

#: Iceberg's own floor for remove_orphan_files (the procedure refuses less)
MIN_ORPHAN_AGE = timedelta(hours=24)


def _ts(value: datetime) -> str:
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _split(table: str) -> tuple[str, str]:
    """``lake.ns.t`` -> (``lake``, ``ns.t``); procedures are called through the table's catalog."""
    catalog, _, rest = table.partition(".")
    if not rest or "." not in rest:
        raise ValueError(f"expected a catalog-qualified table name 'catalog.namespace.table', got {table!r}")
    return catalog, rest


@dataclass(frozen=True)
class TableFiles:
    """The live data files of a table's current snapshot."""

    data_files: int
    data_bytes: int
    records: int
    delete_files: int
    snapshots: int


def table_files(spark: Any, table: str) -> TableFiles:
    data = spark.sql(
        f"SELECT count(*) AS n, coalesce(sum(file_size_in_bytes), 0) AS bytes, coalesce(sum(record_count), 0) AS records "
        f"FROM {table}.data_files"
    ).collect()[0]
    deletes = spark.sql(f"SELECT count(*) AS n FROM {table}.delete_files").collect()[0]["n"]
    snapshots = spark.sql(f"SELECT count(*) AS n FROM {table}.snapshots").collect()[0]["n"]
    return TableFiles(int(data["n"]), int(data["bytes"]), int(data["records"]), int(deletes), int(snapshots))


def retention_cutoff(reference: date, keep_days: int) -> date:
    """Rows with ``log_date`` before this day are expired: the reference day and ``keep_days`` before it stay."""
    if keep_days < 0:
        raise ValueError(f"keep_days must be >= 0, got {keep_days}")
    return reference - timedelta(days=keep_days)


def expired_predicate(cutoff: date, *, typed: bool = False) -> str:
    """``log_date`` before ``cutoff``; ``typed``: ``log_date`` is a ``date`` (DWS), not a string (ODS)."""
    return f"log_date < DATE '{cutoff.isoformat()}'" if typed else f"log_date < '{cutoff.isoformat()}'"


def retention_delete_sql(table: str, cutoff: date, *, typed: bool = False) -> str:
    return f"DELETE FROM {table} WHERE {expired_predicate(cutoff, typed=typed)}"


def delete_before(spark: Any, table: str, cutoff: date, *, typed: bool = False) -> int:
    """Delete the rows whose ``log_date`` is before ``cutoff``; returns how many were deleted."""
    expired = spark.sql(f"SELECT count(*) AS n FROM {table} WHERE {expired_predicate(cutoff, typed=typed)}").collect()[0]["n"]
    if expired:
        spark.sql(retention_delete_sql(table, cutoff, typed=typed))
    return int(expired)


def expired_provenance_sql(tables: Sequence[str], bus_topic: str, cutoff: date) -> str:
    """The bus offset ranges of the rows the retention is about to delete from ``tables`` (ODS, with
    provenance columns): islands of consecutive offsets per bus partition, over all tables at once
    (one table's rows interleave with the others' on the bus, so per-table islands would be single
    offsets)."""
    topic = bus_topic.replace("'", "''")
    rows = " UNION ALL ".join(
        f"SELECT {PARTITION_COLUMN} AS p, {OFFSET_COLUMN} AS o FROM {t} "
        f"WHERE {TOPIC_COLUMN} = '{topic}' AND {expired_predicate(cutoff)}"
        for t in tables
    )
    return (f"SELECT p, min(o) AS first, max(o) AS last FROM (SELECT p, o, o - row_number() OVER (PARTITION BY p ORDER BY o) AS island "
            f"FROM ({rows})) GROUP BY p, island ORDER BY p, first")


def expired_provenance(spark: Any, tables: Sequence[str], bus_topic: str, cutoff: date) -> dict[int, list[tuple[int, int]]]:
    """``{bus partition: [(first, last), ...]}`` of the rows past ``cutoff`` in those of ``tables``
    that carry provenance (rows written before provenance existed name no offset and are skipped)."""
    with_provenance = [t for t in tables if {TOPIC_COLUMN, PARTITION_COLUMN, OFFSET_COLUMN} <= set(spark.table(t).columns)]
    if not with_provenance:
        return {}
    out: dict[int, list[tuple[int, int]]] = {}
    for row in spark.sql(expired_provenance_sql(with_provenance, bus_topic, cutoff)).collect():
        out.setdefault(int(row["p"]), []).append((int(row["first"]), int(row["last"])))
    return out


def rewrite_data_files(
    spark: Any, table: str, *, min_input_files: int = 2, target_file_size_bytes: int | None = None,
    min_file_size_bytes: int | None = None, where: str | None = None, partial_progress: bool = False,
) -> dict[str, int]:
    """Bin-pack small data files. ``where`` limits the candidates to files that may hold matching
    rows (e.g. the recent days the sink still appends to); ``min_file_size_bytes`` makes only files
    below it candidates (so an hourly run merges the sink's tiny files and leaves earlier outputs
    alone); ``partial_progress`` commits file groups as they finish, so a conflict with a sink
    commit costs one group, not the whole rewrite."""
    catalog, name = _split(table)
    options = {"min-input-files": str(min_input_files)}
    if target_file_size_bytes:
        options["target-file-size-bytes"] = str(target_file_size_bytes)
    if min_file_size_bytes is not None:
        options["min-file-size-bytes"] = str(min_file_size_bytes)
    if partial_progress:
        options["partial-progress.enabled"] = "true"
    opts = ", ".join(f"'{k}', '{v}'" for k, v in options.items())
    filter_arg = f", where => '{where.replace(chr(39), chr(39) * 2)}'" if where else ""
    row = spark.sql(f"CALL {catalog}.system.rewrite_data_files(table => '{table}', options => map({opts}){filter_arg})").collect()[0]
    return {k: int(v or 0) for k, v in row.asDict().items()}


def rewrite_manifests(spark: Any, table: str) -> dict[str, int]:
    catalog, _ = _split(table)
    row = spark.sql(f"CALL {catalog}.system.rewrite_manifests(table => '{table}')").collect()[0]
    return {k: int(v or 0) for k, v in row.asDict().items()}


def expire_snapshots(spark: Any, table: str, *, older_than: datetime, retain_last: int) -> dict[str, int]:
    catalog, _ = _split(table)
    row = spark.sql(
        f"CALL {catalog}.system.expire_snapshots(table => '{table}', older_than => TIMESTAMP '{_ts(older_than)}', "
        f"retain_last => {int(retain_last)})"
    ).collect()[0]
    return {k: int(v or 0) for k, v in row.asDict().items()}


def tag_time_travel(spark: Any, table: str, now: datetime) -> list[str]:
    """Create the hour and day tags the table lacks (:mod:`lakebus_dagster.lake.time_travel`), before
    expiry, so the snapshot at each instant outlives the others; the names created."""
    snapshots = [
        SnapshotRef(int(r["snapshot_id"]), None if r["parent_id"] is None else int(r["parent_id"]), int(r["ms"]))
        for r in spark.sql(f"SELECT snapshot_id, parent_id, unix_millis(committed_at) AS ms FROM {table}.snapshots").collect()
    ]
    refs = spark.sql(f"SELECT name, type, snapshot_id FROM {table}.refs").collect()
    head = next((int(r["snapshot_id"]) for r in refs if r["name"] == "main"), None)
    created = []
    for tag in tags_to_create(snapshots, head, [r["name"] for r in refs if r["type"] == "TAG"], now):
        spark.sql(f"ALTER TABLE {table} CREATE TAG IF NOT EXISTS `{tag.name}` AS OF VERSION {tag.snapshot_id} "
                  f"RETAIN {tag.retain_minutes} MINUTES")
        created.append(tag.name)
    return created


def remove_orphan_files(spark: Any, table: str, *, older_than: datetime, now: datetime | None = None, dry_run: bool = False) -> list[str]:
    """Orphan files older than ``older_than`` (deleted unless ``dry_run``); refuses an age under 24 h."""
    now = now or datetime.now(timezone.utc)
    if now - older_than < MIN_ORPHAN_AGE:
        raise ValueError(
            f"remove_orphan_files: older_than {_ts(older_than)} is less than {MIN_ORPHAN_AGE.total_seconds() / 3600:g} hours "
            "ago; a younger file may belong to a write that has not committed yet"
        )
    catalog, _ = _split(table)
    rows = spark.sql(
        f"CALL {catalog}.system.remove_orphan_files(table => '{table}', older_than => TIMESTAMP '{_ts(older_than)}', "
        f"dry_run => {'true' if dry_run else 'false'}, prefix_listing => true)"
    ).collect()
    return [r["orphan_file_location"] for r in rows]


@dataclass(frozen=True)
class MaintenancePlan:
    """What to do to one table (every step optional)."""

    retention_cutoff: date | None = None
    typed_log_date: bool = False
    compact: bool = True
    min_input_files: int = 2
    target_file_size_bytes: int | None = None
    min_file_size_bytes: int | None = None
    compact_where: str | None = None
    partial_progress: bool = False
    rewrite_manifests: bool = True
    expire_older_than: datetime | None = None
    retain_last: int = 5
    #: the run's clock: the hour and day tags up to it are created before expiry (None: no tags)
    tag_time_travel_at: datetime | None = None
    orphans_older_than: datetime | None = None
    orphans_dry_run: bool = False


@dataclass
class TableReport:
    table: str
    before: TableFiles
    after: TableFiles | None = None
    retention_deleted_rows: int | None = None
    compaction: dict[str, int] = field(default_factory=dict)
    manifests: dict[str, int] = field(default_factory=dict)
    expiry: dict[str, int] = field(default_factory=dict)
    tags_created: list[str] = field(default_factory=list)
    orphan_files: list[str] | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    #: steps that did not run, and why (never silent: shown in the run's metadata)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def maintain_table(spark: Any, table: str, plan: MaintenancePlan) -> TableReport:
    def timed(step: str, fn, *args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            report.seconds[step] = round(time.perf_counter() - start, 3)

    invalidate_cached_tables(spark, table)  # other writers (the sink) commit to it: start from its latest snapshot
    report = TableReport(table, before=table_files(spark, table))
    if plan.retention_cutoff is not None:
        report.retention_deleted_rows = timed("retention", delete_before, spark, table, plan.retention_cutoff, typed=plan.typed_log_date)
    if plan.compact:
        report.compaction = timed(
            "rewrite_data_files", rewrite_data_files, spark, table,
            min_input_files=plan.min_input_files, target_file_size_bytes=plan.target_file_size_bytes,
            min_file_size_bytes=plan.min_file_size_bytes, where=plan.compact_where, partial_progress=plan.partial_progress,
        )
    if plan.rewrite_manifests:
        try:
            report.manifests = timed("rewrite_manifests", rewrite_manifests, spark, table)
        except Exception as exc:  # noqa: BLE001 - only Iceberg's conflict is expected; anything else re-raised
            if "ValidationException" not in str(exc):
                raise
            # the sink's MergeAppend (or a compaction) replaced a manifest this rewrite planned to
            # replace: nothing was committed, the table is intact, the next run tries again
            report.notes.append(f"rewrite_manifests skipped: a concurrent commit replaced a manifest ({str(exc).splitlines()[0][:200]})")
    if plan.tag_time_travel_at is not None:
        report.tags_created = timed("tag_time_travel", tag_time_travel, spark, table, plan.tag_time_travel_at)
    if plan.expire_older_than is not None:
        report.expiry = timed("expire_snapshots", expire_snapshots, spark, table, older_than=plan.expire_older_than, retain_last=plan.retain_last)
    if plan.orphans_older_than is not None:
        report.orphan_files = timed(
            "remove_orphan_files", remove_orphan_files, spark, table, older_than=plan.orphans_older_than, dry_run=plan.orphans_dry_run
        )
    report.after = table_files(spark, table)
    return report
