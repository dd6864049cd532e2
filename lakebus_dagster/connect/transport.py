"""The Kafka Connect REST transport under :class:`~lakebus_dagster.connect.client.ConnectClient`: one
request helper sends each call to whichever worker of the cluster answers
(:mod:`~lakebus_dagster.connect.failover`: urllib3's ``Retry`` policy, failing over between workers)
and turns whatever comes back last into a response or a typed
:class:`~lakebus_dagster.connect.errors.ConnectError`, its message scrubbed of the secret values the
request sent."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

import requests
from urllib3.util import Retry

from lakebus_dagster.connect.errors import (
    ConnectBadRequest,
    ConnectConflict,
    ConnectError,
    ConnectorNotFound,
    ConnectStarting,
    ConnectUnauthorized,
    ConnectUnavailable,
)
from lakebus_dagster.connect.failover import NoWorkerAnswered, WorkerFailover, still_starting
from lakebus_dagster.connect.redaction import scrub
from lakebus_dagster.connect.workers import shown, worker_urls

#: 409 = worker-group rebalance in progress or stale config snapshot; 5xx = herder or proxy trouble.
RETRY_STATUSES = frozenset({409, 500, 502, 503, 504})
RETRY_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "POST", "DELETE", "PATCH"})

_ERRORS_BY_STATUS: dict[int, type[ConnectError]] = {
    400: ConnectBadRequest,
    401: ConnectUnauthorized,
    403: ConnectUnauthorized,
    404: ConnectorNotFound,
    409: ConnectConflict,
}


class ConnectTransport:
    """The Kafka Connect REST transport: retries for the failures a Connect cluster produces routinely.

    Retries (one urllib3 ``Retry`` policy, exponential ``backoff_factor``, honouring ``Retry-After``,
    applied across the workers by :class:`~lakebus_dagster.connect.failover.WorkerFailover`) cover
    connection errors, read timeouts, 5xx, a worker still starting and **409**, for every method
    including PUT, POST, DELETE and PATCH. That is safe for Connect because:

    * a 409 is returned *before* anything is done, while the worker group rebalances or the herder's
      config snapshot is stale ("Cannot complete request momentarily due to stale configuration"),
      so the same request is valid again once the rebalance settles;
    * the operations are idempotent: PUT config is an upsert of the same map, pause / resume / stop
      set a target state, PATCH offsets writes absolute offsets, validate has no effect, and
      restarting twice only restarts twice;
    * where a repeat is *not* a no-op the outcome is visible rather than wrong: a DELETE whose first
      attempt succeeded but whose response was lost ends in :class:`ConnectorNotFound`, and a
      ``POST /connectors`` in :class:`ConnectConflict` ("already exists"); reconcilers should
      therefore upsert with :meth:`put_config` rather than :meth:`create`.

    After the final attempt the last response becomes a typed error carrying Connect's own message.

    ``urls`` are the cluster's workers: one URL, several separated by commas (like Kafka's
    bootstrap servers), or a sequence. Any worker serves the whole REST API, so the client uses
    the one that answered last and moves on to the next when a worker is down, failing or still
    starting; :class:`ConnectUnavailable` (naming every URL) only when no worker answers at all.

    Adapters without retries are mounted for the workers' URLs only, so a shared ``session`` keeps
    its behaviour for other hosts. ``auth`` is HTTP basic auth; ``verify`` is ``requests``' (an https
    worker's certificate is checked against this CA file, or the system's CAs when True); a failed TLS
    handshake's :class:`ConnectUnavailable` names ``LAKEBUS_CONNECT_CA_LOCATION``.
    """

    def __init__(
        self,
        urls: str | Sequence[str],
        *,
        auth: tuple[str, str] | None = None,
        verify: str | bool = True,
        timeout: float = 10.0,
        retries: int = 5,
        backoff_factor: float = 0.5,
        session: requests.Session | None = None,
    ) -> None:
        self.urls = worker_urls(urls)
        self._auth = auth
        self._verify = verify
        self._timeout = timeout
        self._owns_session = session is None
        self._session = session if session is not None else requests.Session()
        retry = Retry(
            total=retries,
            backoff_factor=backoff_factor,
            status_forcelist=RETRY_STATUSES,
            allowed_methods=RETRY_METHODS,
            respect_retry_after_header=True,
        )
        self._workers = WorkerFailover(self.urls, self._session, retry)

    @property
    def verify(self) -> str | bool:
        """How an https worker's certificate is checked (``requests``' ``verify``): a CA file, or True."""
        return self._verify

    @property
    def base_url(self) -> str:
        """The worker that answered last (the first URL before any answer)."""
        return self._workers.current

    def close(self) -> None:
        """Close the session if this client created it."""
        if self._owns_session:
            self._session.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _request(
        self,
        method: str,
        path: str,
        *,
        connector: str | None = None,
        params: Mapping[str, str | list[str]] | None = None,
        body: Any = None,
        sent_config: Mapping[str, str] | None = None,
    ) -> requests.Response:
        """Send one request to the cluster (retries and failover underneath) and map the final
        outcome to an error: no worker answered, a worker still starting, or Connect's own error.

        ``sent_config`` is the connector config carried by the body; its secret values are masked
        in Connect's error message, which may quote them.
        """
        try:
            answer = self._workers.send(method, path, params=params, json=body, auth=self._auth, verify=self._verify,
                                        timeout=self._timeout)
        except NoWorkerAnswered as exc:
            tried = "; ".join(f"{url} ({why})" for url, why in exc.failures.items())
            if any(why.startswith("SSLError") for why in exc.failures.values()):
                tried += (f"; the TLS handshake failed: the workers' certificate was checked against "
                          f"{self._verify if isinstance(self._verify, str) else 'the system CAs'}: check LAKEBUS_CONNECT_CA_LOCATION")
            raise ConnectUnavailable(
                f"no Kafka Connect worker answered: {tried}", method=method, path=path, connector=connector,
                urls=tuple(exc.failures),
            ) from exc
        response = answer.response
        if response.status_code < 400:
            return response
        status = response.status_code
        if still_starting(response, path):
            raise ConnectStarting(
                f"Kafka Connect at {shown(answer.url)} answers, but its REST API is not up yet (a worker still "
                "starting; or the URL is not a Kafka Connect REST API)", method=method, path=path,
                connector=connector, status=status, url=shown(answer.url),
            )
        error = _ERRORS_BY_STATUS.get(status, ConnectError)
        if error is ConnectorNotFound and connector is None:
            error = ConnectError  # a 404 on a plugin path is not about a connector
        message = scrub(_connect_message(response), sent_config or {})
        raise error(message, method=method, path=path, connector=connector, status=status)


def connector_path(name: str, *parts: str) -> str:
    """``/connectors/<name>/<parts...>``, the name percent-encoded (any legal name is one path segment)."""
    return "/".join(["/connectors", quote(name, safe=""), *parts])


def _connect_message(response: requests.Response) -> str:
    """Connect's ``{"error_code": ..., "message": ...}`` message, else the HTTP reason phrase."""
    try:
        payload = response.json()
    except ValueError:
        payload = None
    if isinstance(payload, dict) and isinstance(payload.get("message"), str):
        return payload["message"]
    return response.reason or "no message"
