"""``lakehouse_retention``: the ODS retention DELETE (opt-in; its schedule ships STOPPED). Guarded:
a run's ``confirm`` names the ODS namespace it deletes from; the bus offsets of the rows it deletes
are recorded as retired for the offset ledger first."""

from datetime import date, datetime, timezone

import dagster as dg
from pydantic import Field

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.defs.guard import AUDITED, confirm_field, require_confirmation
from lakebus_dagster.defs.lakehouse.assets import lakehouse_tables
from lakebus_dagster.defs.lakehouse.constants import DEFAULT_RETENTION_DAYS, EXCLUSIVE_TAG, RETENTION_JOB
from lakebus_dagster.defs.lakehouse.jobs import report_metadata, table_exists
from lakebus_dagster.defs.resources import BusLayoutResource, KafkaResource, LakeSparkResource
from lakebus_dagster.defs.spark import SPARK_POOL
from lakebus_dagster.lake.maintenance import MaintenancePlan, expired_provenance, maintain_table, retention_cutoff
from lakebus_dagster.ledger.ranges import describe_ranges
from lakebus_dagster.ledger.store import KafkaStateStore

#: what the retention's ``confirm`` names (its schedule confirms it in its run config)
RETENTION_CONFIRM = "the ODS namespace the retention deletes from (several: comma-separated)"


class RetentionConfig(dg.Config):
    retention_days: int | None = Field(
        default=None, ge=0,
        description="ODS retention: keep the reference day and this many days before it, delete older log_date rows; "
                    "unset: the deployment's maintenance.retention_days (shipped: 3)",
    )
    reference_date: str | None = Field(default=None, description="YYYY-MM-DD the retention counts back from; default: today (UTC)")
    confirm: str = confirm_field(RETENTION_CONFIRM)


#: the retention job's one op (its schedule's run config names it)
RETENTION_OP = "expire_ods_days"


def retention_target(layout: BusLayoutResource) -> str:
    """What a retention run's ``confirm`` names: the ODS namespace(s) it deletes from, comma-separated."""
    return ",".join(layout.layout().namespaces)


def retention_job(retention_days: int = DEFAULT_RETENTION_DAYS) -> dg.JobDefinition:
    """``lakehouse_retention``: the ODS retention DELETE, opt-in (its schedule ships STOPPED); a run
    whose config names no ``retention_days`` keeps the deployment's ``retention_days``."""

    @dg.op(name=RETENTION_OP, description="Delete ODS rows of the days past the retention, after recording their bus "
           "offsets as retired for the offset ledger.", pool=SPARK_POOL)
    def expire_ods_days(
        context: dg.OpExecutionContext, config: RetentionConfig, spark: LakeSparkResource, layout: BusLayoutResource,
        kafka: KafkaResource,
    ) -> dg.Output[list[dict]]:
        require_confirmation(context.job_name, config.confirm, retention_target(layout), RETENTION_CONFIRM)
        days = retention_days if config.retention_days is None else config.retention_days
        return _retain(context, days, config.reference_date, spark, layout, kafka)

    @dg.job(name=RETENTION_JOB, tags={"domain": "lakehouse", EXCLUSIVE_TAG: "lakehouse", **AUDITED}, description=(
        f"Delete ODS days past the retention (default: the reference day and {retention_days} days before it stay); the offsets of the "
        "deleted rows are recorded as retired for the offset ledger first. Destructive: needs config.confirm = the ODS "
        "namespace; its schedule ships stopped and confirms it itself."))
    def lakehouse_retention() -> None:
        expire_ods_days()

    return lakehouse_retention


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


def _retain(context: dg.OpExecutionContext, retention_days: int, reference_date: str | None, spark: LakeSparkResource,
            layout: BusLayoutResource, kafka: KafkaResource) -> dg.Output[list[dict]]:
    tables = lakehouse_tables(layout)
    reference = date.fromisoformat(reference_date) if reference_date else datetime.now(timezone.utc).date()
    cutoff = retention_cutoff(reference, retention_days)
    session = spark.spark_session
    ods = [tables.qualified(t) for t in layout.layout().tables if table_exists(session, tables.qualified(t))]
    retired = _retire_expired(context, session, kafka, layout.layout(), ods, cutoff) if ods else "-"
    plan = MaintenancePlan(retention_cutoff=cutoff, compact=False, rewrite_manifests=False)
    reports = []
    for table in ods:
        report = maintain_table(session, table, plan)
        context.log.info(f"{table}: retention deleted {report.retention_deleted_rows} rows (log_date < {cutoff.isoformat()})")
        reports.append(report)
    return dg.Output([r.as_dict() for r in reports],
                     metadata={**report_metadata(reports), "retention_cutoff": cutoff.isoformat(), "retired_offsets": retired})
