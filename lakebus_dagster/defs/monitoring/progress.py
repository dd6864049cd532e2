"""How far the sink has got: its committed offsets (Connect), the bus's end offsets (Kafka) and the
newest commit on its tables (catalog). Read by the status sensor's stall watch and shown on the
ODS assets' observations (lag, last commit)."""

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.defs.resources import IcebergCatalogResource, KafkaResource
from lakebus_dagster.kafka import end_offsets
from lakebus_dagster.monitor.stall import SinkProgress


def sink_progress(bus: BusLayout, client: ConnectClient, kafka: KafkaResource, iceberg: IcebergCatalogResource) -> SinkProgress:
    """Committed offsets (Connect), end offsets (Kafka) and the newest ODS commit (catalog)."""
    committed = {
        int(o["partition"]["kafka_partition"]): int(o["offset"]["kafka_offset"])
        for o in client.get_offsets(bus.connector_name)
        if o["partition"].get("kafka_topic") == bus.bus_topic.name
    }
    consumer = kafka.consumer("lakebus-status-sensor")
    try:
        ends = end_offsets(consumer, bus.bus_topic.name)
    finally:
        consumer.close()
    return SinkProgress(committed, ends, *newest_commit(bus, iceberg))


def newest_commit(bus: BusLayout, iceberg: IcebergCatalogResource) -> tuple[int | None, str]:
    """(newest snapshot time of the connector's tables in epoch ms, problem); the time is context for
    the stall alert, so a catalog error is reported in it rather than failing the tick."""
    newest = None
    try:
        catalog = iceberg.load()
        for table in bus.tables:
            if catalog.table_exists(table):
                snapshot = catalog.load_table(table).current_snapshot()
                if snapshot is not None:
                    newest = max(newest or 0, snapshot.timestamp_ms)
    except Exception as exc:  # noqa: BLE001 - surfaced in the incident text, see docstring
        return newest, f"catalog {iceberg.catalog_uri} unreadable: {type(exc).__name__}: {str(exc)[:200]}"
    return newest, ""
