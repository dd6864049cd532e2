"""Kafka access shared by every domain: bounded, group-neutral reads (``reading``), login checks (``auth``)."""

from lakebus_dagster.kafka.auth import login_failure_message, refused_login
from lakebus_dagster.kafka.reading import PARTITION_EOF, TopicMissing, end_offsets, partitions_of, read_range, watermarks

__all__ = ["login_failure_message", "refused_login", "PARTITION_EOF", "TopicMissing", "end_offsets", "partitions_of", "read_range", "watermarks"]
