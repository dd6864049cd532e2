"""Kafka Connect control: a typed REST client and the config diff that keeps PUTs idempotent."""

from lakebus_dagster.connect.client import ConnectClient
from lakebus_dagster.connect.diff import ConfigDiff, diff_configs
from lakebus_dagster.connect.errors import (
    ConnectBadRequest,
    ConnectConflict,
    ConnectError,
    ConnectorNotFound,
    ConnectStarting,
    ConnectStateFailed,
    ConnectStateTimeout,
    ConnectUnauthorized,
    ConnectUnavailable,
)
from lakebus_dagster.connect.models import (
    ConnectorInfo,
    ConnectorOverview,
    ConnectorStatus,
    TaskStatus,
    ValidationResult,
)

__all__ = [
    "ConfigDiff",
    "ConnectBadRequest",
    "ConnectClient",
    "ConnectConflict",
    "ConnectError",
    "ConnectStarting",
    "ConnectStateFailed",
    "ConnectStateTimeout",
    "ConnectUnauthorized",
    "ConnectUnavailable",
    "ConnectorInfo",
    "ConnectorNotFound",
    "ConnectorOverview",
    "ConnectorStatus",
    "TaskStatus",
    "ValidationResult",
    "diff_configs",
]
