"""The declared capture's assets, one family per captured table (:func:`capture_assets`): the table
in its database and its change table — external assets, written by Debezium and the sink — and its
current-state table, a Spark-built asset: the latest change per key of its change table, deletes
deleted (:func:`lakebus_dagster.cdc.current_state.merge_current_state`), incremental from the table's
watermark and idempotent. Lineage runs captured table → change table → current state. It runs on the
step's Spark Connect session (the ``spark`` resource, like the DWS assets) in the ``spark`` pool;
``cdc_current_state_sensor`` requests it when its change table gets a new snapshot."""

from collections.abc import Sequence

import dagster as dg

from lakebus_dagster.cdc.capture import CaptureError, CaptureSpec
from lakebus_dagster.cdc.current_state import merge_current_state
from lakebus_dagster.defs.asset_keys import cdc_change_key, cdc_current_key, cdc_source_key
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.resources import LakeSparkResource
from lakebus_dagster.defs.spark import SPARK_POOL

CDC_GROUP = "cdc"
#: the external assets' group (not built by the cdc_current_state job)
CAPTURED_GROUP = "cdc_captured"


def current_state_asset(schema: str, table: str) -> dg.AssetsDefinition:
    """The asset of ``schema.table``'s current-state table (the capture resource names its capture and namespace)."""

    @dg.asset(
        key=cdc_current_key(schema, table),
        deps=[cdc_change_key(schema, table)],
        group_name=CDC_GROUP,
        kinds={"spark", "iceberg"},
        pool=SPARK_POOL,
        description=f"Current state of {schema}.{table} in the captured database: the latest change per key "
        "of its change table (by Kafka offset), deletes deleted; one incremental MERGE per run.",
    )
    def _current(context: dg.AssetExecutionContext, spark: LakeSparkResource, capture: ChangeCaptureResource) -> dg.MaterializeResult:
        if not capture.enabled:
            raise dg.Failure("change capture is off (LAKEBUS_POSTGRES is not 'on'): no change table to build from",
                             allow_retries=False)
        try:
            spec = capture.spec_for(schema, table)
            stats = merge_current_state(spark.spark_session, spec, table)
        except CaptureError as exc:
            raise dg.Failure(str(exc), allow_retries=False) from exc
        context.log.info(f"{stats.table}: {stats.changes_read} change(s) read, {stats.keys_changed} key(s) changed "
                         f"({stats.keys_deleted} deleted), {stats.rows} row(s)")
        return dg.MaterializeResult(
            metadata={
                "dagster/table_name": dg.MetadataValue.text(stats.table),
                "dagster/row_count": dg.MetadataValue.int(stats.rows),
                "changes_read": dg.MetadataValue.int(stats.changes_read),
                "keys_changed": dg.MetadataValue.int(stats.keys_changed),
                "keys_deleted": dg.MetadataValue.int(stats.keys_deleted),
                "watermark": dg.MetadataValue.json(stats.watermark),
                "snapshot_id": dg.MetadataValue.text(str(stats.snapshot_id)),
            },
            data_version=dg.DataVersion(str(stats.snapshot_id)) if stats.snapshot_id is not None else None,
        )

    return _current


def capture_assets(specs: Sequence[CaptureSpec]) -> list:
    """Per declared table: the captured table and its change table (external assets) and the current-state asset."""
    out: list = []
    for spec in specs:
        for table in spec.tables:
            key = ",".join(spec.key_of(table)) or "the primary key"
            out.append(dg.AssetSpec(cdc_source_key(spec.name, spec.schema, table), group_name=CAPTURED_GROUP, kinds={"postgres"},
                                    description=f"{spec.qualified(table)} in {spec.database} (capture {spec.name}, key {key})"))
            out.append(dg.AssetSpec(cdc_change_key(spec.schema, table), deps=[cdc_source_key(spec.name, spec.schema, table)],
                                    group_name=CAPTURED_GROUP, kinds={"iceberg"},
                                    description=f"{spec.change_table(table)}: every change of {spec.qualified(table)}, "
                                    "appended by the change-table sink"))
            out.append(current_state_asset(spec.schema, table))
    return out
