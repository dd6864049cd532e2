"""Kafka access shared by every domain: bounded, group-neutral reads (``reading``)."""

from lakebus_dagster.kafka.reading import PARTITION_EOF, TopicMissing, end_offsets, partitions_of, read_range, watermarks

__all__ = ["PARTITION_EOF", "TopicMissing", "end_offsets", "partitions_of", "read_range", "watermarks"]
