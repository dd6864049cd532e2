"""The current-state table of each captured demo table as a Spark-built asset: the latest change per
primary key of its change table, deletes deleted (:func:`lakebus_dagster.cdc.current_state.merge_current_state`),
incremental from the table's watermark and idempotent. It runs on the step's Spark Connect session
(the ``spark`` resource, like the DWS assets) in the ``spark`` pool."""

import dagster as dg

from lakebus_dagster.cdc import demo
from lakebus_dagster.cdc.capture import CaptureError
from lakebus_dagster.cdc.current_state import merge_current_state
from lakebus_dagster.defs.asset_keys import cdc_current_key
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.resources import LakeSparkResource
from lakebus_dagster.defs.spark import SPARK_POOL

CDC_GROUP = "cdc"


def current_state_asset(table: str) -> dg.AssetsDefinition:
    """The asset of ``table``'s current-state table (the capture resource names its namespace)."""

    @dg.asset(
        key=cdc_current_key(demo.SCHEMA, table),
        group_name=CDC_GROUP,
        kinds={"spark", "iceberg"},
        pool=SPARK_POOL,
        description=f"Current state of {demo.SCHEMA}.{table} in the captured database: the latest change per primary key "
        "of its change table (by Kafka offset), deletes deleted; one incremental MERGE per run.",
    )
    def _current(context: dg.AssetExecutionContext, spark: LakeSparkResource, capture: ChangeCaptureResource) -> dg.MaterializeResult:
        if not capture.enabled:
            raise dg.Failure("change capture is off (LAKEBUS_POSTGRES is not 'on'): no change table to build from",
                             allow_retries=False)
        try:
            spec = capture.spec()
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


CURRENT_STATE_ASSETS = [current_state_asset(table) for table in demo.TABLES]
