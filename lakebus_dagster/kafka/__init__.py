"""Kafka access shared by every domain: the clients and their config (``clients``), bounded,
group-neutral reads of offset ranges (``reading``), compacted topics as key/value stores
(``compacted``), login checks (``auth``), batches produced with every record's position or an error
(``writing``)."""

from lakebus_dagster.kafka.auth import login_failure_message, refused_login
from lakebus_dagster.kafka.clients import KafkaClients, KafkaConfigError, client_config, quiet_kafka_logger
from lakebus_dagster.kafka.compacted import CompactedTopic, CompactedTopicError
from lakebus_dagster.kafka.reading import (
    PARTITION_EOF,
    TopicMissing,
    consume_ranges,
    end_offsets,
    partitions_of,
    read_range,
    watermarks,
)
from lakebus_dagster.kafka.writing import DeliveryError, ProduceItem, produce_all

__all__ = [
    "login_failure_message", "refused_login", "KafkaClients", "KafkaConfigError", "client_config", "quiet_kafka_logger",
    "CompactedTopic", "CompactedTopicError", "PARTITION_EOF", "TopicMissing",
    "consume_ranges", "end_offsets", "partitions_of", "read_range", "watermarks", "DeliveryError", "ProduceItem",
    "produce_all",
]
