"""Send a Kafka Connect REST request to whichever worker of the cluster answers.

Why not only urllib3's ``Retry`` on the session's adapter (as the client did with one URL): urllib3
retries inside one connection pool, i.e. against the *same* host, so with worker 1 killed every
retry hit worker 1 again and the request failed although worker 2 served the cluster. Here the
same ``Retry`` object still decides everything a retry policy decides — which statuses and methods
are retried, how many attempts, the exponential backoff, ``Retry-After`` — through its public
``is_retry`` / ``increment`` / ``sleep`` (the calls urllib3's own ``urlopen`` makes); the loop only
chooses *where* the next attempt goes:

* stick to the worker that answered last (the first URL to begin with);
* after a failure that means "this worker is not serving" — connection refused/reset, a timeout,
  a 500/502/503/504, or a worker still starting (:func:`still_starting`) — the next attempt goes
  to the next worker, at once if that worker was not tried yet for this request, else after the
  ``Retry`` backoff;
* a 409 (a rebalance: every worker would say the same) is retried on the same worker.

The budget is ``retries`` plus one attempt per further worker, so every worker is tried before a
request gives up and a single URL behaves exactly as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import MaxRetryError
from urllib3.util import Retry

from lakebus_dagster.connect.workers import shown

#: 5xx that say "this worker is not serving right now" (herder trouble, a proxy in front of a dead
#: worker, a request that timed out in a worker that is still joining the group): try another one
FAILOVER_STATUSES = frozenset({500, 502, 503, 504})


def still_starting(response: requests.Response, path: str) -> bool:
    """A 404 that Connect's REST API cannot have given: ``GET /connectors`` exists on every worker
    that serves, and Connect's own 404s carry ``{"error_code": 404, ...}`` (see
    :class:`~lakebus_dagster.connect.errors.ConnectStarting` for what a starting worker answers)."""
    if response.status_code != 404:
        return False
    return path == "/connectors" or not _connect_error_body(response)


def not_serving(response: requests.Response, path: str) -> bool:
    return response.status_code in FAILOVER_STATUSES or still_starting(response, path)


@dataclass(frozen=True)
class Answer:
    """The response a worker gave (``url``: that worker), possibly a failure after the retries."""

    url: str
    response: requests.Response


class NoWorkerAnswered(Exception):
    """Every attempt, on every worker, ended without an HTTP response; ``failures`` holds each
    worker's last failure (``ExceptionType: message``), in the order the workers were tried."""

    def __init__(self, failures: dict[str, str]) -> None:
        self.failures = dict(failures)
        super().__init__("; ".join(f"{url}: {why}" for url, why in failures.items()))


class WorkerFailover:
    """Sends requests to the cluster's workers with one ``Retry`` policy (see the module docstring)."""

    def __init__(self, urls: Sequence[str], session: requests.Session, retry: Retry) -> None:
        self.urls = tuple(urls)
        self._session = session
        self._retry = retry.new(total=retry.total + len(self.urls) - 1) if isinstance(retry.total, int) else retry
        self._current = 0
        for url in self.urls:
            # no retries underneath: this class retries, and a shared session's other mounts keep theirs
            session.mount(f"{url}/", HTTPAdapter(max_retries=0))

    @property
    def current(self) -> str:
        """The worker that answered last (the first one before any answer)."""
        return self.urls[self._current]

    def send(self, method: str, path: str, **kwargs: Any) -> Answer:
        """The first answer from a serving worker; after the budget, the last answer any worker
        gave (to become a typed error); :class:`NoWorkerAnswered` when none answered at all."""
        retry, index = self._retry, self._current
        failures: dict[str, str] = {}
        last: Answer | None = None
        while True:
            url = self.urls[index]
            error: Exception | None = None
            try:
                response: requests.Response | None = self._session.request(method, url + path, **kwargs)
            except (requests.ConnectionError, requests.Timeout) as exc:
                response, error = None, exc
            moving_on = response is None or not_serving(response, path)
            if response is not None:
                last = Answer(url, response)
                if not moving_on:
                    self._current = index  # stick to the worker that answers
                    if not retry.is_retry(method, response.status_code, "Retry-After" in response.headers):
                        return last
            failures[url] = f"{type(error).__name__}: {error}" if error is not None else f"HTTP {response.status_code}"
            try:
                retry = retry.increment(method, shown(url) + path, response=response.raw if response is not None else None,
                                        error=error)
            except MaxRetryError:
                if last is not None:
                    return last
                raise NoWorkerAnswered({shown(u): why for u, why in failures.items()}) from error
            if moving_on:
                index = (index + 1) % len(self.urls)
                if self.urls[index] in failures:
                    retry.sleep(response.raw if response is not None else None)
            else:
                retry.sleep(response.raw)


def _connect_error_body(response: requests.Response) -> bool:
    """Is the body Connect's JSON error (``{"error_code": ..., "message": ...}``)?"""
    try:
        payload = response.json()
    except ValueError:
        return False
    return isinstance(payload, dict) and "error_code" in payload
