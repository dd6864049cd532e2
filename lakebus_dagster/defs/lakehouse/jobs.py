"""Jobs of the lakehouse domain.

* ``dws_hourly_job`` / ``dws_daily_job``: the DWS assets (and their checks) of one grain, for one
  partition or a partition range in one Spark run (backfills, the late-data sweep); generated
  from the specs' grains.
* ``observe_ods_job``: observe the ODS tables' snapshots and evaluate their freshness checks.
* ``lakehouse_maintenance``: compaction, snapshot expiry, manifest rewrite and orphan cleanup of
  every ODS table of the bus layout and the DWS tables (deletes no data; on by default), reporting
  data files, snapshots and bytes before/after.
* ``lakehouse_retention``: the ODS retention DELETE (opt-in): :mod:`lakebus_dagster.defs.lakehouse.retention`.
"""

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, Literal

import dagster as dg
from pydantic import Field

from lakebus_dagster.defs.clock import ClockResource
from lakebus_dagster.defs.lakehouse.assets import lakehouse_tables
from lakebus_dagster.defs.spark import SPARK_POOL
from lakebus_dagster.defs.lakehouse.constants import (
    AssetJob,
    DWS_JOB_BY_GRAIN,
    DWS_RUN_RETRIES,
    EXCLUSIVE_TAG,
    EXPIRE_SNAPSHOTS_OLDER_THAN_HOURS,
    MAINTENANCE_JOB,
    MIN_INPUT_FILES,
    OBSERVE_ODS_JOB,
    DEFAULT_ODS_MAX_COMMIT_AGE,
    ORPHAN_FILES_OLDER_THAN_HOURS,
    RECENT_DAYS,
    RECENT_MIN_FILE_SIZE_BYTES,
    RECENT_MIN_INPUT_FILES,
    RETAIN_LAST_SNAPSHOTS,
    TARGET_FILE_SIZE_BYTES,
)
from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.connect import ConnectError
from lakebus_dagster.defs.resources import BusLayoutResource, ConnectResource, LakeSparkResource
from lakebus_dagster.lake.dws import DwsTable, LakehouseTables
from lakebus_dagster.lake.maintenance import MaintenancePlan, TableReport, maintain_table
from lakebus_dagster.markdown import markdown_table


_ADJECTIVE = {"hour": "hourly", "day": "daily"}


def dws_jobs(specs: Sequence[DwsTable], assets: Sequence[dg.AssetsDefinition]) -> dict[str, AssetJob]:
    """One job per grain (``dws_hourly_job``, ``dws_daily_job``) selecting the DWS assets of that grain."""
    jobs = {}
    for grain, name in DWS_JOB_BY_GRAIN.items():
        chosen = [(spec, asset) for spec, asset in zip(specs, assets, strict=True) if spec.grain == grain]
        if chosen:
            jobs[name] = dg.define_asset_job(
                name,
                selection=dg.AssetSelection.assets(*[asset for _, asset in chosen]),
                description=(
                    f"Build the {_ADJECTIVE.get(grain, grain)} summary tables ({', '.join(spec.name for spec, _ in chosen)}) from the ODS tables "
                    f"for one {grain}, or a range of {grain}s in one Spark run; a rerun replaces exactly those {grain}s."
                ),
                # deploy/dagster.yaml's run queue starts one run with this tag at a time: no two MERGEs overlap
                # dagster/max_retries: a transient failure (Spark Connect restarting, S3 away) is retried
                tags={"domain": "lakehouse", EXCLUSIVE_TAG: "lakehouse", "dagster/max_retries": str(DWS_RUN_RETRIES)},
                # (the code location's in-process executor: the steps are thin clients of the Spark
                # Connect server, which does the parallel work; one process and one Spark session per run)
            )
    return jobs


def observe_ods_job(ods_keys: Sequence[dg.AssetKey], max_commit_age: timedelta = DEFAULT_ODS_MAX_COMMIT_AGE) -> AssetJob:
    return dg.define_asset_job(
        OBSERVE_ODS_JOB,
        # the ODS assets and their freshness checks; the offset ledger (also a check on them) has its own job
        selection=dg.AssetSelection.assets(*ods_keys).without_checks()
        | dg.AssetSelection.checks(*(dg.AssetCheckKey(key, "freshness_check") for key in ods_keys)),
        description=(
            "Observe the ODS tables' current Iceberg snapshots and the sink's lag, and check their freshness: "
            f"a warning when nothing was committed for {max_commit_age.total_seconds() / 3600:g} h."
        ),
        tags={"domain": "lakehouse"},
    )


class MaintenanceConfig(dg.Config):
    scope: Literal["full", "recent"] = Field(
        default="full",
        description="full: compact whole tables, rewrite manifests, expire, remove orphans (daily); recent: merge the "
                    "small files of the days the sink still appends to and expire snapshots (hourly)",
    )
    include_dws: bool = Field(default=True, description="also the DWS tables (compaction in full scope, expiry always)")
    compact: bool = Field(default=True, description="rewrite_data_files (bin-pack small files)")
    min_input_files: int = Field(default=MIN_INPUT_FILES, ge=1, description="full scope: rewrite a file group only if it has this many files")
    target_file_size_bytes: int = Field(default=TARGET_FILE_SIZE_BYTES, ge=1024 * 1024, description="compaction's target file size")
    rewrite_manifests: bool = Field(default=True, description="full scope: rewrite_manifests")
    expire_snapshots: bool = True
    expire_older_than_hours: float = Field(default=EXPIRE_SNAPSHOTS_OLDER_THAN_HOURS, ge=0)
    retain_last: int = Field(default=RETAIN_LAST_SNAPSHOTS, ge=1, description="snapshots always kept by expire_snapshots")
    time_travel_tags: bool = Field(default=True, description="tag the state at the top of each hour (kept 24 h) and day "
                                   "(kept 7 days) before expiry: VERSION AS OF 'lakebus-hour-YYYY-MM-DDTHH'")
    remove_orphans: bool = Field(default=True, description="full scope: remove_orphan_files, only while the sink is healthy")
    orphans_older_than_hours: float = Field(
        default=ORPHAN_FILES_OLDER_THAN_HOURS, ge=24,
        description="only files older than this may be orphans (>= 24: younger ones may belong to a running write)",
    )
    orphans_dry_run: bool = False


def table_exists(spark, table: str) -> bool:
    return bool(spark.catalog.tableExists(table))


def report_metadata(reports: list[TableReport]) -> dict[str, Any]:
    rows = []
    meta: dict[str, Any] = {}
    for r in reports:
        after = r.after or r.before
        rows.append({
            "table": r.table,
            "data files": f"{r.before.data_files} → {after.data_files}",
            "snapshots": f"{r.before.snapshots} → {after.snapshots}",
            "bytes": f"{r.before.data_bytes:,} → {after.data_bytes:,}",
            "records": f"{r.before.records:,} → {after.records:,}",
            "retention deleted": "—" if r.retention_deleted_rows is None else r.retention_deleted_rows,
            "rewritten files": r.compaction.get("rewritten_data_files_count", 0),
            "expired data files": r.expiry.get("deleted_data_files_count", 0),
            "tags created": len(r.tags_created),
            "orphans": "—" if r.orphan_files is None else len(r.orphan_files),
            "seconds": round(sum(r.seconds.values()), 1),
            "notes": "; ".join(r.notes) or "—",
        })
        for name, before, now in (
            ("data_files", r.before.data_files, after.data_files),
            ("data_bytes", r.before.data_bytes, after.data_bytes),
            ("records", r.before.records, after.records),
            ("snapshots", r.before.snapshots, after.snapshots),
        ):
            meta[f"{r.table} {name} before"] = dg.MetadataValue.int(before)
            meta[f"{r.table} {name} after"] = dg.MetadataValue.int(now)
    meta["tables"] = dg.MetadataValue.md(markdown_table(rows))
    return meta


def sink_unhealthy(bus: BusLayout, connect: ConnectResource) -> str | None:
    """Why orphan removal must wait, or None: the sink connector and every task RUNNING. A sink
    data file is referenced only by the control topic until its commit lands; while the sink is
    failed, stopped or unreachable, a file of a write not yet committed must not look orphaned."""
    try:
        with connect.client() as client:
            status = client.status(bus.connector_name)
    except ConnectError as exc:
        return f"Connect did not answer for {bus.connector_name}: {type(exc).__name__}: {str(exc)[:200]}"
    if status.state != "RUNNING" or not status.tasks or any(t.state != "RUNNING" for t in status.tasks):
        tasks = ", ".join(f"{t.id}:{t.state}" for t in status.tasks) or "none"
        return f"{bus.connector_name} is {status.state} (tasks {tasks})"
    return None


def maintenance_job(specs: Sequence[DwsTable]) -> dg.JobDefinition:
    """``lakehouse_maintenance`` over every ODS table of the layout and the DWS tables of ``specs``:
    compaction, manifest rewrite, snapshot expiry and orphan removal; it deletes no data."""

    @dg.op(description="Compaction, manifest rewrite, snapshot expiry and orphan cleanup, per table; deletes no data.",
           pool=SPARK_POOL)
    def maintain_lakehouse(
        context: dg.OpExecutionContext, config: MaintenanceConfig, spark: LakeSparkResource, layout: BusLayoutResource,
        connect: ConnectResource, clock: ClockResource,
    ) -> dg.Output[list[dict]]:
        # "now" (what the expiry and orphan ages count from) is the clock resource's: wall time as shipped
        return _maintain(context, config, spark, layout, connect, specs, datetime.fromtimestamp(clock.now(), timezone.utc))

    @dg.job(name=MAINTENANCE_JOB, tags={"domain": "lakehouse", EXCLUSIVE_TAG: "lakehouse"}, description=(
        "Keep the ODS and DWS tables small: merge small files, drop table versions (snapshots) older than 18 min "
        "(the newest 100 and the tagged tops of the last 24 hours and 7 days stay) and files no snapshot references; "
        "deletes no rows. Twice an hour (recent days) and daily (whole tables) as shipped; reports files, snapshots "
        "and bytes before/after."))
    def lakehouse_maintenance() -> None:
        maintain_lakehouse()

    return lakehouse_maintenance


def _plans(config: MaintenanceConfig, tables: LakehouseTables, ods: Sequence[str], now: datetime,
           orphans_blocked: str | None) -> list[tuple[str, MaintenancePlan]]:
    """What to do to each table in the config's scope."""
    expire = now - timedelta(hours=config.expire_older_than_hours) if config.expire_snapshots else None
    tags_at = now if config.time_travel_tags else None
    if config.scope == "recent":
        since = (now.date() - timedelta(days=RECENT_DAYS - 1)).isoformat()
        recent = MaintenancePlan(
            compact=config.compact, min_input_files=RECENT_MIN_INPUT_FILES, target_file_size_bytes=config.target_file_size_bytes,
            min_file_size_bytes=RECENT_MIN_FILE_SIZE_BYTES, compact_where=f"log_date >= '{since}'", partial_progress=True,
            rewrite_manifests=False, expire_older_than=expire, retain_last=config.retain_last, tag_time_travel_at=tags_at,
        )
        expiry_only = MaintenancePlan(compact=False, rewrite_manifests=False, expire_older_than=expire, retain_last=config.retain_last,
                                      tag_time_travel_at=tags_at)
        return [(tables.qualified(t), recent) for t in ods] + (
            [(tables.qualified(t), expiry_only) for t in tables.all_dws] if config.include_dws else [])
    full = MaintenancePlan(
        compact=config.compact, min_input_files=config.min_input_files, target_file_size_bytes=config.target_file_size_bytes,
        partial_progress=True, rewrite_manifests=config.rewrite_manifests, expire_older_than=expire, retain_last=config.retain_last,
        tag_time_travel_at=tags_at, orphans_older_than=(now - timedelta(hours=config.orphans_older_than_hours)
                            if config.remove_orphans and orphans_blocked is None else None),
        orphans_dry_run=config.orphans_dry_run,
    )
    return [(tables.qualified(t), full) for t in (*ods, *(tables.all_dws if config.include_dws else ()))]


def _maintain(
    context: dg.OpExecutionContext, config: MaintenanceConfig, spark: LakeSparkResource, layout: BusLayoutResource,
    connect: ConnectResource, specs: Sequence[DwsTable], now: datetime,
) -> dg.Output[list[dict]]:
    tables = lakehouse_tables(layout, specs)
    orphans_blocked = None
    if config.scope == "full" and config.remove_orphans:
        orphans_blocked = sink_unhealthy(layout.layout(), connect)
        if orphans_blocked:
            context.log.warning(f"orphan removal skipped this run: {orphans_blocked}")
    session = spark.spark_session
    reports = []
    for table, plan in _plans(config, tables, layout.layout().tables, now, orphans_blocked):
        if not table_exists(session, table):
            context.log.info(f"{table}: does not exist (yet), skipped")
            continue
        report = maintain_table(session, table, plan)
        if orphans_blocked and config.scope == "full":
            report.notes.append(f"orphan removal skipped: {orphans_blocked}")
        after = report.after or report.before
        context.log.info(
            f"{table}: data files {report.before.data_files} -> {after.data_files}, snapshots {report.before.snapshots} -> "
            f"{after.snapshots}, bytes {report.before.data_bytes} -> {after.data_bytes} ({report.seconds})"
            + (f"; {'; '.join(report.notes)}" if report.notes else "")
        )
        reports.append(report)
    return dg.Output([r.as_dict() for r in reports], metadata={
        **report_metadata(reports), "scope": config.scope, "orphan_removal": orphans_blocked and f"skipped: {orphans_blocked}"
        or ("ran" if config.scope == "full" and config.remove_orphans else "not in this scope")})
