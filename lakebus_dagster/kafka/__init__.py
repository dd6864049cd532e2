"""Kafka access shared by every domain: bounded, group-neutral reads of offset ranges (``reading``), compacted
topics as key/value stores (``compacted``), login checks (``auth``), batches produced with every
record's position or an error (``writing``)."""

from lakebus_dagster.kafka.auth import login_failure_message, refused_login
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
    "login_failure_message", "refused_login", "CompactedTopic", "CompactedTopicError", "PARTITION_EOF", "TopicMissing",
    "consume_ranges", "end_offsets", "partitions_of", "read_range", "watermarks", "DeliveryError", "ProduceItem",
    "produce_all",
]
