"""The local lakebus stack: Kafka (KRaft), Kafka Connect with the Iceberg sink, the Iceberg REST
catalog and S3Proxy as plain local JVM processes, from Maven Central jars — no Docker.

Entry point: ``python -m lakebus_dagster.stack up|down|status|logs|fetch`` (wrapped by ``make``).
"""

from lakebus_dagster.stack.errors import StackError

__all__ = ["StackError"]
