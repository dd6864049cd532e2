"""Jobs of the lakehouse domain.

* ``dws_hourly_job`` / ``dws_daily_job``: the DWS assets (and their checks) of one grain, for one
  partition or a partition range in one Spark run (backfills, the late-data sweep); generated
  from the specs' grains.
* ``observe_ods_job``: observe the ODS tables' snapshots and evaluate their freshness checks.
* ``lakehouse_maintenance``: retention, compaction, snapshot expiry and orphan cleanup of every ODS
  table of the bus layout and the DWS tables, reporting data files and bytes before/after.
"""

from collections.abc import Sequence
from datetime import date, datetime, timedelta, timezone
from typing import Any

import dagster as dg
from pydantic import Field

from lakebus_dagster.defs.lakehouse.assets import lakehouse_tables
from lakebus_dagster.defs.lakehouse.constants import (
    AssetJob,
    DWS_JOB_BY_GRAIN,
    EXCLUSIVE_TAG,
    SPARK_POOL,
    EXPIRE_SNAPSHOTS_OLDER_THAN_HOURS,
    MAINTENANCE_JOB,
    MIN_INPUT_FILES,
    OBSERVE_ODS_JOB,
    ODS_MAX_COMMIT_AGE,
    ORPHAN_FILES_OLDER_THAN_HOURS,
    RETAIN_LAST_SNAPSHOTS,
    RETENTION_DAYS,
)
from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.defs.resources import BusLayoutResource, KafkaResource, LakeSparkResource
from lakebus_dagster.lake.dws import DwsTable
from lakebus_dagster.lake.maintenance import MaintenancePlan, TableReport, expired_provenance, maintain_table, retention_cutoff
from lakebus_dagster.ledger.ranges import describe_ranges
from lakebus_dagster.ledger.store import KafkaStateStore
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
                tags={"domain": "lakehouse", EXCLUSIVE_TAG: "lakehouse"},
                # (the code location's in-process executor: the steps are thin clients of the Spark
                # Connect server, which does the parallel work; one process and one Spark session per run)
            )
    return jobs


def observe_ods_job(ods_keys: Sequence[dg.AssetKey]) -> AssetJob:
    return dg.define_asset_job(
        OBSERVE_ODS_JOB,
        # the ODS assets and their freshness checks; the offset ledger (also a check on them) has its own job
        selection=dg.AssetSelection.assets(*ods_keys).without_checks()
        | dg.AssetSelection.checks(*(dg.AssetCheckKey(key, "freshness_check") for key in ods_keys)),
        description=(
            "Observe the ODS tables' current Iceberg snapshots and the sink's lag, and check their freshness: "
            f"a warning when nothing was committed for {ODS_MAX_COMMIT_AGE.total_seconds() / 3600:g} h."
        ),
        tags={"domain": "lakehouse"},
    )


class MaintenanceConfig(dg.Config):
    retention_days: int | None = Field(
        default=RETENTION_DAYS, ge=0,
        description="ODS retention: keep the reference day and this many days before it, delete older log_date rows; null disables",
    )
    reference_date: str | None = Field(default=None, description="YYYY-MM-DD the retention counts back from; default: today (UTC)")
    include_dws: bool = Field(default=True, description="also compact / expire / clean the DWS tables (never retention)")
    compact: bool = Field(default=True, description="rewrite_data_files (bin-pack small files)")
    min_input_files: int = Field(default=MIN_INPUT_FILES, ge=1, description="rewrite a file group only if it has this many files")
    target_file_size_bytes: int | None = Field(default=None, description="default: the table's write.target-file-size-bytes")
    rewrite_manifests: bool = True
    expire_snapshots: bool = True
    expire_older_than_hours: float = Field(default=EXPIRE_SNAPSHOTS_OLDER_THAN_HOURS, ge=0)
    retain_last: int = Field(default=RETAIN_LAST_SNAPSHOTS, ge=1, description="snapshots always kept by expire_snapshots")
    remove_orphans: bool = True
    orphans_older_than_hours: float = Field(
        default=ORPHAN_FILES_OLDER_THAN_HOURS, ge=24,
        description="only files older than this may be orphans (>= 24: younger ones may belong to a running write)",
    )
    orphans_dry_run: bool = False


def _table_exists(spark, table: str) -> bool:
    return bool(spark.catalog.tableExists(table))


def _report_metadata(reports: list[TableReport], cutoff: date | None) -> dict[str, Any]:
    rows = []
    meta: dict[str, Any] = {"retention_cutoff": cutoff.isoformat() if cutoff else "disabled"}
    for r in reports:
        after = r.after or r.before
        rows.append({
            "table": r.table,
            "data files": f"{r.before.data_files} → {after.data_files}",
            "bytes": f"{r.before.data_bytes:,} → {after.data_bytes:,}",
            "records": f"{r.before.records:,} → {after.records:,}",
            "retention deleted": "—" if r.retention_deleted_rows is None else r.retention_deleted_rows,
            "rewritten files": r.compaction.get("rewritten_data_files_count", 0),
            "expired data files": r.expiry.get("deleted_data_files_count", 0),
            "orphans": "—" if r.orphan_files is None else len(r.orphan_files),
            "seconds": round(sum(r.seconds.values()), 1),
        })
        for name, before, now in (
            ("data_files", r.before.data_files, after.data_files),
            ("data_bytes", r.before.data_bytes, after.data_bytes),
            ("records", r.before.records, after.records),
        ):
            meta[f"{r.table} {name} before"] = dg.MetadataValue.int(before)
            meta[f"{r.table} {name} after"] = dg.MetadataValue.int(now)
    meta["tables"] = dg.MetadataValue.md(markdown_table(rows))
    return meta


def maintenance_job(specs: Sequence[DwsTable]) -> dg.JobDefinition:
    """``lakehouse_maintenance`` over every ODS table of the layout and the DWS tables of ``specs``."""

    @dg.op(description="Retention (ODS), compaction, manifest rewrite, snapshot expiry and orphan cleanup, per table.",
           pool=SPARK_POOL)
    def maintain_lakehouse(
        context: dg.OpExecutionContext, config: MaintenanceConfig, spark: LakeSparkResource, layout: BusLayoutResource,
        kafka: KafkaResource,
    ) -> dg.Output[list[dict]]:
        return _maintain(context, config, spark, layout, kafka, specs)

    @dg.job(name=MAINTENANCE_JOB, tags={"domain": "lakehouse", EXCLUSIVE_TAG: "lakehouse"}, description=(
        "Daily housekeeping of the ODS and DWS tables: delete ODS days past the retention, merge small files, "
        "drop old table versions (snapshots) and unreferenced files; reports files and bytes before/after."))
    def lakehouse_maintenance() -> None:
        maintain_lakehouse()

    return lakehouse_maintenance


def _retire_expired(context: dg.OpExecutionContext, spark, kafka: KafkaResource, bus: BusLayout, ods: list[str],
                    cutoff: date) -> str:
    """Record the bus offsets of the ODS rows about to be deleted in the offset ledger's state topic
    (:mod:`lakebus_dagster.ledger.retired`), before deleting them: a ledger run then counts them
    retired, not lost. Raises (nothing deleted) when the record cannot be written."""
    ranges = expired_provenance(spark, ods, bus.bus_topic.name, cutoff)
    if not ranges:
        return "-"
    store = KafkaStateStore(kafka.consumer, kafka.admin(), kafka.producer(), bus.bus_topic.name)
    note = f"run {context.run_id}: log_date < {cutoff.isoformat()}"
    store.save_retired(store.load_retired().merged(ranges, note))
    described = "; ".join(f"[{p}] {describe_ranges(r)}" for p, r in sorted(ranges.items()))
    context.log.info(f"{bus.bus_topic.name}: offsets of the expired ODS rows recorded as retired for the offset ledger: {described}")
    return described


def _maintain(
    context: dg.OpExecutionContext, config: MaintenanceConfig, spark: LakeSparkResource, layout: BusLayoutResource,
    kafka: KafkaResource, specs: Sequence[DwsTable],
) -> dg.Output[list[dict]]:
    tables = lakehouse_tables(layout, specs)
    now = datetime.now(timezone.utc)
    reference = date.fromisoformat(config.reference_date) if config.reference_date else now.date()
    cutoff = retention_cutoff(reference, config.retention_days) if config.retention_days is not None else None
    common = dict(
        compact=config.compact,
        min_input_files=config.min_input_files,
        target_file_size_bytes=config.target_file_size_bytes,
        rewrite_manifests=config.rewrite_manifests,
        expire_older_than=now - timedelta(hours=config.expire_older_than_hours) if config.expire_snapshots else None,
        retain_last=config.retain_last,
        orphans_older_than=now - timedelta(hours=config.orphans_older_than_hours) if config.remove_orphans else None,
        orphans_dry_run=config.orphans_dry_run,
    )
    plans = [(tables.qualified(t), MaintenancePlan(retention_cutoff=cutoff, **common)) for t in layout.layout().tables]
    if config.include_dws:
        plans += [(tables.qualified(t), MaintenancePlan(**common)) for t in tables.all_dws]

    session = spark.spark_session
    retired = "-"
    if cutoff is not None:
        existing_ods = [table for table, plan in plans if plan.retention_cutoff is not None and _table_exists(session, table)]
        retired = _retire_expired(context, session, kafka, layout.layout(), existing_ods, cutoff) if existing_ods else "-"
    reports = []
    for table, plan in plans:
        if not _table_exists(session, table):
            context.log.info(f"{table}: does not exist (yet), skipped")
            continue
        report = maintain_table(session, table, plan)
        after = report.after or report.before
        context.log.info(
            f"{table}: data files {report.before.data_files} -> {after.data_files}, bytes {report.before.data_bytes} -> "
            f"{after.data_bytes}, records {report.before.records} -> {after.records}"
            + (f", retention deleted {report.retention_deleted_rows}" if report.retention_deleted_rows is not None else "")
            + f" ({report.seconds})"
        )
        reports.append(report)
    return dg.Output([r.as_dict() for r in reports], metadata={**_report_metadata(reports, cutoff), "retired_offsets": retired})
