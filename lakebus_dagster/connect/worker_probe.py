"""Each configured Connect worker asked on its own: does it answer, which version, which plugins.

Why ask every URL instead of reading the worker group: Connect's REST API has no "list workers"
call (a worker shows up only through the connectors and tasks it runs), and the worker group
(protocol type ``connect``) cannot be described through confluent-kafka: librdkafka 2.16's
``describe_consumer_groups`` refuses it ("GroupId lakebus-connect is not a consumer group
(connect)", seen on the cluster profile). So a worker that answers but runs nothing — idle — is
found only by asking it, and a worker's plugins (each worker loads its own ``plugin.path``) only by
asking that worker, not whichever one the failover client reaches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from lakebus_dagster.connect.client import ConnectClient
from lakebus_dagster.connect.errors import ConnectError
from lakebus_dagster.connect.models import ConnectorStatus
from lakebus_dagster.connect.workers import shown

#: a probe answers in seconds: a worker that is down is reported, never retried
PROBE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class WorkerProbe:
    """One configured worker as ``GET /`` found it. ``worker_id`` is the URL's ``host:port``, the
    form Connect names workers in statuses when they advertise the address they are reached at."""

    url: str
    worker_id: str
    answering: bool
    version: str | None = None
    commit: str | None = None
    kafka_cluster_id: str | None = None
    error: str | None = None


def worker_id_of(url: str) -> str:
    """``host:port`` of a worker URL (credentials removed), as statuses name the worker."""
    return urlsplit(shown(url)).netloc


def worker_client(url: str, auth: tuple[str, str] | None = None, timeout: float = PROBE_TIMEOUT_S,
                  verify: str | bool = True) -> ConnectClient:
    """A client bound to this one worker, without retries: no failover to another worker."""
    return ConnectClient(url, auth=auth, verify=verify, timeout=timeout, retries=0)


def probe(url: str, auth: tuple[str, str] | None = None, timeout: float = PROBE_TIMEOUT_S,
          verify: str | bool = True) -> WorkerProbe:
    """``GET /`` on one worker; a worker that does not answer (or is still starting) is reported with why."""
    with worker_client(url, auth, timeout, verify) as client:
        try:
            info = client.server_info()
        except ConnectError as exc:
            return WorkerProbe(shown(url), worker_id_of(url), False, error=f"{type(exc).__name__}: {exc}"[:200])
    return WorkerProbe(shown(url), worker_id_of(url), True, version=info.get("version"), commit=info.get("commit"),
                       kafka_cluster_id=info.get("kafka_cluster_id"))


def probe_workers(urls: Sequence[str], auth: tuple[str, str] | None = None,
                  timeout: float = PROBE_TIMEOUT_S, verify: str | bool = True) -> list[WorkerProbe]:
    """Every configured worker probed, in the configured order."""
    return [probe(url, auth, timeout, verify) for url in urls]


def worker_plugins(url: str, auth: tuple[str, str] | None = None, timeout: float = PROBE_TIMEOUT_S,
                   verify: str | bool = True) -> set[str]:
    """The plugin classes this one worker has loaded (connectors, converters, transforms, predicates).
    Raises :class:`~lakebus_dagster.connect.errors.ConnectError` when it does not answer."""
    with worker_client(url, auth, timeout, verify) as client:
        return {str(p.get("class")) for p in client.plugins(connectors_only=False)}


class RestCluster:
    """The rolling restart's :class:`~lakebus_dagster.connect.rolling.Cluster` over the REST API: statuses
    through the failover client (any worker), each worker's ``GET /`` and plugins through a client bound
    to that worker alone."""

    def __init__(self, client: ConnectClient, auth: tuple[str, str] | None = None) -> None:
        self.client, self.auth = client, auth

    def statuses(self) -> Mapping[str, ConnectorStatus]:
        overview = self.client.list_connectors(expand_status=True, expand_info=False)
        return {name: entry.status for name, entry in overview.items() if entry.status is not None}

    def answers(self, url: str) -> dict[str, Any] | None:
        found = probe(url, self.auth, verify=self.client.verify)
        return {"version": found.version, "commit": found.commit} if found.answering else None

    def plugins(self, url: str) -> set[str] | None:
        try:
            return worker_plugins(url, self.auth, verify=self.client.verify)
        except ConnectError:
            return None  # not answering (yet): the roll waits for it
