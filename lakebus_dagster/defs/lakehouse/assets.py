"""ODS tables as observed sources, DWS tables as Spark-built, partitioned assets — both generated:
one ODS source per event of the event SDK's registry, one DWS asset per spec of
:data:`~lakebus_dagster.lake.dws.DWS_TABLES`.

The ODS tables (``<namespace>.dwd_biz_<event>``, the seed's names) are written by the Kafka Connect
Iceberg sink, never by Dagster: each is an observable source whose observation reads the table's
current Iceberg snapshot through pyiceberg (no Spark): the snapshot id is the data version and the
commit time is ``dagster/last_updated_timestamp``, which the freshness checks judge.

The DWS assets aggregate the ODS with PySpark (:mod:`lakebus_dagster.lake.dws`), one hourly or
daily partition per run — or a whole partition range in one Spark run when backfilling
(``BackfillPolicy.single_run()``).
"""

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import dagster as dg
from confluent_kafka import KafkaException

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.connect import ConnectError
from lakebus_dagster.defs.lakehouse.automation import gap_fill_condition
from lakebus_dagster.defs.lakehouse.checks import dws_check_results, dws_check_specs
from lakebus_dagster.defs.asset_keys import dws_key, ods_key
from lakebus_dagster.defs.lakehouse.constants import DEFAULT_ODS_MAX_COMMIT_AGE, DWS_GROUP, ODS_GROUP
from lakebus_dagster.defs.spark import SPARK_POOL
from lakebus_dagster.defs.lakehouse.partitions import PARTITIONS_BY_GRAIN, describe_partitions, scope_of_run
from lakebus_dagster.defs.resources import (
    BusLayoutResource,
    ConnectResource,
    IcebergCatalogResource,
    KafkaResource,
    LakeSparkResource,
)
from lakebus_dagster.kafka import TopicMissing
from lakebus_dagster.lake.dws import DWS_TABLES, BuildStats, DwsTable, LakehouseTables, build_scope
from lakebus_dagster.lake.dws.sources import describe_absent, resolve_sources
from lakebus_dagster.markdown import markdown_table
from lakebus_dagster.observe.sink_progress import sink_progress


def lakehouse_tables(layout: BusLayoutResource, specs: Sequence[DwsTable] = DWS_TABLES) -> LakehouseTables:
    """ODS and DWS table names for the configured bus (an isolated bus gets isolated DWS tables)."""
    return LakehouseTables.from_routes(layout.layout().routes, specs)


# -- ODS: observed, not materialized --------------------------------------------------------------
def observe_iceberg_table(catalog, table_name: str) -> dg.ObserveResult:
    """An observation of ``table_name``'s current snapshot (or of its absence)."""
    from pyiceberg.exceptions import NoSuchTableError

    meta: dict[str, Any] = {"table": dg.MetadataValue.text(table_name)}
    try:
        table = catalog.load_table(table_name)
    except NoSuchTableError:
        # the sink creates the table with its first record; no timestamp, so freshness fails
        return dg.ObserveResult(data_version=dg.DataVersion("absent"), metadata={**meta, "exists": False})
    snapshot = table.current_snapshot()
    meta.update({
        "exists": True,
        "partition_spec": dg.MetadataValue.text(
            ", ".join(f"{f.name} ({f.transform})" for f in table.spec().fields) or "unpartitioned"
        ),
        "location": dg.MetadataValue.text(table.metadata.location),
    })
    if snapshot is None:
        return dg.ObserveResult(data_version=dg.DataVersion("empty"), metadata=meta)
    summary = dict(snapshot.summary.additional_properties) if snapshot.summary else {}
    committed = datetime.fromtimestamp(snapshot.timestamp_ms / 1000, tz=timezone.utc)
    meta.update({
        "dagster/last_updated_timestamp": dg.MetadataValue.timestamp(committed),
        "snapshot_id": dg.MetadataValue.text(str(snapshot.snapshot_id)),
        "operation": dg.MetadataValue.text(snapshot.summary.operation.value if snapshot.summary else "unknown"),
        "committed_at": dg.MetadataValue.timestamp(committed),
        "records_added": dg.MetadataValue.int(int(summary.get("added-records", 0))),
        "total_records": dg.MetadataValue.int(int(summary.get("total-records", 0))),
        "total_data_files": dg.MetadataValue.int(int(summary.get("total-data-files", 0))),
        "total_files_size": dg.MetadataValue.int(int(summary.get("total-files-size", 0))),
        "dagster/row_count": dg.MetadataValue.int(int(summary.get("total-records", 0))),
    })
    if "kafka.connect.valid-through-ts" in summary:
        # the sink's watermark: every record up to this time is in the table
        meta["sink_valid_through"] = dg.MetadataValue.text(summary["kafka.connect.valid-through-ts"])
    return dg.ObserveResult(data_version=dg.DataVersion(str(snapshot.snapshot_id)), metadata=meta)


def sink_metadata(bus: BusLayout, iceberg: IcebergCatalogResource, kafka: KafkaResource, connect: ConnectResource,
                  max_commit_age: timedelta = DEFAULT_ODS_MAX_COMMIT_AGE) -> dict[str, Any]:
    """How far behind the bus the sink is (records on the bus it has not committed yet), its newest
    commit and the freshness limit, beside each ODS table's own snapshot. Lag is the bus's (one sink
    writes every ODS table): a lagging sink makes every table stale. A failure to measure is shown,
    not hidden: the observation of the table itself still stands."""
    limit = {"freshness_limit": dg.MetadataValue.text(f"last commit at most {max_commit_age} old (WARN)")}
    try:
        with connect.client() as client:
            seen = sink_progress(bus, client, kafka.clients(), iceberg)
    except (ConnectError, KafkaException, TopicMissing, TimeoutError) as exc:
        return {**limit, "sink_lag": dg.MetadataValue.text(f"unknown: {type(exc).__name__}: {str(exc)[:300]}")}
    return {
        **limit,
        "sink_lag_records": dg.MetadataValue.int(seen.lag),
        "sink_consumed_offsets": dg.MetadataValue.json({str(p): o for p, o in sorted(seen.consumed.items())}),
        "sink_pending_control_events": dg.MetadataValue.int(seen.pending),
        "bus_end_offsets": dg.MetadataValue.json({str(p): o for p, o in sorted(seen.end.items())}),
        "sink_last_commit": dg.MetadataValue.text(seen.last_commit_text()),
        "sink_commit_coordinators": dg.MetadataValue.text(seen.coordinators_text()),
    }


def ods_source(event: str, max_commit_age: timedelta = DEFAULT_ODS_MAX_COMMIT_AGE) -> dg.SourceAsset:
    """The observable ODS table of ``event`` (its table comes from the bus layout's routes); its
    freshness limit ``max_commit_age`` is shown in its description and observations."""

    @dg.observable_source_asset(
        key=ods_key(event),
        group_name=ODS_GROUP,
        description=(
            f"ODS table of `{event}` events, written by the Kafka Connect Iceberg sink (routed by the `event` field). "
            "Observed from its Iceberg snapshots: data version = snapshot id. "
            f"Freshness: a warning when no commit reached it for {max_commit_age.total_seconds() / 3600:g} h "
            "(observed every 10 minutes by observe_ods_job)."
        ),
        tags={"dagster/kind/iceberg": "", "dagster/kind/kafka": ""},
        metadata={"writer": "Kafka Connect IcebergSinkConnector"},
    )
    def _observe(
        layout: BusLayoutResource, iceberg: IcebergCatalogResource, kafka: KafkaResource, connect: ConnectResource
    ) -> dg.ObserveResult:
        bus = layout.layout()
        observed = observe_iceberg_table(iceberg.load(), bus.routes[event])
        return dg.ObserveResult(data_version=observed.data_version,
                                metadata={**observed.metadata, **sink_metadata(bus, iceberg, kafka, connect, max_commit_age)})

    return _observe


# -- DWS: built with Spark ----------------------------------------------------------------------
def _column_schema(spec: DwsTable) -> dg.TableSchema:
    return dg.TableSchema(columns=[dg.TableColumn(name, type_, description=comment) for name, type_, comment in spec.columns])


def materialization_metadata(stats: BuildStats, partitions: str) -> dict[str, Any]:
    return {
        # Dagster's well-known table keys (shown in the catalog UI)
        "dagster/table_name": dg.MetadataValue.text(stats.table),
        "dagster/partition_row_count": dg.MetadataValue.int(stats.rows_in_scope),
        "table": dg.MetadataValue.text(stats.table),
        "partition": dg.MetadataValue.text(partitions),
        "scope": dg.MetadataValue.text(stats.scope.describe()),
        "row_count": dg.MetadataValue.int(stats.rows_in_scope),
        "source_rows": dg.MetadataValue.int(stats.source_rows),
        "rows_inserted": dg.MetadataValue.int(stats.inserted),
        "rows_updated": dg.MetadataValue.int(stats.updated),
        "rows_deleted": dg.MetadataValue.int(stats.deleted),
        "snapshot_id": dg.MetadataValue.text(str(stats.snapshot_id)),
        "preview": dg.MetadataValue.md(markdown_table(stats.preview, stats.preview_columns)),
    }


def dws_asset(spec: DwsTable, specs: Sequence[DwsTable]) -> dg.AssetsDefinition:
    """The partitioned DWS asset of ``spec`` and its three checks, computed in one step: the MERGE
    and then the checks, on the step's one Spark session. Its grain picks the partitions, its
    sources the deps; ``specs`` are all DWS tables of the code location (the routes must carry
    every event they read).

    Subsettable, so the checks can run alone for a partition (the table is then only read), and
    in the ``spark`` pool, which bounds the Spark steps running at once across all runs.
    """
    key = dws_key(spec.name)

    @dg.multi_asset(
        name=spec.name,
        specs=[dg.AssetSpec(
            key,
            deps=[ods_key(event) for event in spec.sources],
            description=spec.description,
            metadata={"dagster/column_schema": _column_schema(spec)},
            group_name=DWS_GROUP,
            kinds={"spark", "iceberg"},
            code_version="2",
            automation_condition=gap_fill_condition(spec.grain),
        )],
        check_specs=dws_check_specs(spec),
        partitions_def=PARTITIONS_BY_GRAIN[spec.grain],
        backfill_policy=dg.BackfillPolicy.single_run(),
        can_subset=True,
        pool=SPARK_POOL,
    )
    def _build(context: dg.AssetExecutionContext, spark: LakeSparkResource, layout: BusLayoutResource):
        scope = scope_of_run(context, spec.grain)
        session = spark.spark_session
        # an ODS table the sink has not created yet (no event of that type so far) reads as empty:
        # an ordinary state (a new producer's first day), not a failed run
        tables, absent = resolve_sources(session, lakehouse_tables(layout, specs), spec)
        if absent:
            context.log.warning(f"{spec.name}: absent ODS source(s) read as empty: {describe_absent(tables, absent)}")
        if key in context.selected_asset_keys:
            context.log.info(f"{spec.name}: {scope.describe()} from {', '.join(tables.sources_of(spec).values())}")
            stats = build_scope(session, spec, tables, scope)
            context.log.info(
                f"{stats.table}: {stats.source_rows} ODS rows -> {stats.rows_in_scope} rows in {scope.describe()} "
                f"(+{stats.inserted} ~{stats.updated} -{stats.deleted})"
            )
            yield dg.MaterializeResult(
                asset_key=key,
                metadata={**materialization_metadata(stats, describe_partitions(context)),
                          "absent_sources": dg.MetadataValue.text(describe_absent(tables, absent)),
                          "spark": dg.MetadataValue.text(spark.remote or f"embedded ({spark.master})"),
                          "spark_session_s": dg.MetadataValue.float(spark.session_seconds or 0.0)},
                data_version=dg.DataVersion(str(stats.snapshot_id)) if stats.snapshot_id is not None else None,
            )
        selected = {c.name for c in context.selected_asset_check_keys}
        yield from dws_check_results(session, spec, tables, scope, selected)

    return _build
