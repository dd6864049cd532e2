"""Exceptions raised by :class:`~lakebus_dagster.connect.client.ConnectClient`.

Every error carries the request (method and path, never the body) and Connect's own message
(``{"error_code": ..., "message": ...}``), so a failed Dagster run says *which* connector failed and
*why* without anyone reading worker logs. Config values never appear here: the client scrubs secret
values out of Connect's message before raising.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    """404 with Connect's own JSON error on a connector path: the connector does not exist (or has
    no status yet) although Connect's REST API is up. Not a worker that is still starting: that
    is :class:`ConnectStarting`."""


class ConnectConflict(ConnectError):
    """409 that outlived the retries: a rebalance that did not settle, or a name that already exists."""


class ConnectUnauthorized(ConnectError):
    """401/403: the REST API wants credentials (basic auth) it did not get, or refused the ones sent."""

    def __init__(self, message: str, **kwargs) -> None:
        super().__init__(f"{message} (the Connect REST API requires authentication: set LAKEBUS_CONNECT_USERNAME "
                         "and LAKEBUS_CONNECT_PASSWORD, or ConnectResource.username/password)", **kwargs)


class ConnectUnavailable(ConnectError):
    """No worker answered at all after the retries: every attempt was refused, reset or timed out.

    ``urls`` are the workers tried (every worker of the cluster; the message names each with its
    last failure). A worker that answers, even with an error, makes it a different error.
    """

    def __init__(self, message: str, *, urls: Sequence[str] = (), **kwargs) -> None:
        self.urls = tuple(urls)
        super().__init__(message, **kwargs)


class ConnectStarting(ConnectError):
    """A worker answers but Kafka Connect's REST resources are not up yet (HTTP 404 on every path).

    Why a 404 means "starting": a Connect 3.x worker starts its Jetty server first (the port
    accepts connections, ``initializeServer``) and registers the REST resources only after its
    herder exists (``initializeResources``); meanwhile every request, ``GET /connectors`` included,
    gets Jetty's plain 404 page instead of Connect's JSON ``{"error_code": 404, ...}``. Connect
    itself never answers 404 to ``GET /connectors``. The same answer also comes from a URL that is
    not a Connect REST API at all, which the message says too. ``url`` is the worker that answered.
    """

    def __init__(self, message: str, *, url: str, **kwargs) -> None:
        self.url = url
        super().__init__(message, **kwargs)


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
