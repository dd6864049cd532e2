"""Exceptions raised by :class:`~lakebus_dagster.connect.client.ConnectClient`.

Every error carries the request (method and path, never the body) and Connect's own message
(``{"error_code": ..., "message": ...}``), so a failed Dagster run says *which* connector failed and
*why* without anyone reading worker logs. Config values never appear here: the client scrubs secret
values out of Connect's message before raising.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lakebus_dagster.connect.models import ConnectorStatus


class ConnectError(Exception):
    """A Kafka Connect REST call failed; ``status`` is None when no HTTP response was received."""

    def __init__(
        self,
        message: str,
        *,
        method: str,
        path: str,
        connector: str | None = None,
        status: int | None = None,
    ) -> None:
        self.message = message
        self.method = method
        self.path = path
        self.connector = connector
        self.status = status
        target = f" for connector {connector!r}" if connector else ""
        outcome = f"HTTP {status}: " if status is not None else ""
        super().__init__(f"{method} {path} failed{target}: {outcome}{message}")


class ConnectBadRequest(ConnectError):
    """400: Connect rejected the request, typically an invalid connector config."""


class ConnectorNotFound(ConnectError):
    """404 on a connector path: the connector does not exist (or has no status yet)."""


class ConnectConflict(ConnectError):
    """409 that outlived the retries: a rebalance that did not settle, or a name that already exists."""


class ConnectUnauthorized(ConnectError):
    """401/403: the REST API wants credentials (basic auth) it did not get, or refused the ones sent."""

    def __init__(self, message: str, **kwargs) -> None:
        super().__init__(f"{message} (the Connect REST API requires authentication: set LAKEBUS_CONNECT_USERNAME "
                         "and LAKEBUS_CONNECT_PASSWORD, or ConnectResource.username/password)", **kwargs)


class ConnectUnavailable(ConnectError):
    """No HTTP response after the retries: connection refused, reset or timed out."""


class ConnectStateTimeout(ConnectError, TimeoutError):
    """:meth:`ConnectClient.wait_for_state` ran out of time; ``last_status`` is what it saw last."""

    def __init__(
        self, message: str, *, method: str, path: str, connector: str, last_status: ConnectorStatus | None
    ) -> None:
        self.last_status = last_status
        super().__init__(message, method=method, path=path, connector=connector)


class ConnectStateFailed(ConnectError):
    """:meth:`ConnectClient.wait_for_state` saw a state it was told means failure (e.g. a task FAILED
    again right after a restart): waiting on for the deadline would only delay the verdict."""

    def __init__(
        self, message: str, *, method: str, path: str, connector: str, last_status: ConnectorStatus | None
    ) -> None:
        self.last_status = last_status
        super().__init__(message, method=method, path=path, connector=connector)
