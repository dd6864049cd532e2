"""``lakebus metrics``: lakebus's own health as Prometheus gauges on one HTTP endpoint, computed at each scrape.

The gauges come from the readers ``lakebus status`` uses: the sink connector's status (Connect REST,
:func:`lakebus_dagster.cli.status.read_connector`), the sink's progress on the bus
(:func:`lakebus_dagster.observe.sink_progress.sink_progress`: consumed and end offsets, the records past the
sink's watermark, the commit coordinators) and each ODS table's newest sink commit (the catalog,
:func:`lakebus_dagster.observe.sink_progress.sink_snapshot`). Each source read is one ``lakebus_up{source=…}``:
a source that cannot be read is a 0 there (and its gauges absent), never a failed scrape.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakebus_dagster.connect import ConnectorStatus
    from lakebus_dagster.monitor.stall import SinkProgress

DESCRIPTION = """\
Serve lakebus's own health as Prometheus gauges on http://HOST:PORT/metrics, read fresh at every
scrape from Connect, Kafka, the Iceberg catalog and the Dagster instance:

  lakebus_up{source}                        1, or 0 when connector / bus / catalog / ledger /
                                            incidents / dws could not be read
                                            (why: on stderr); bus is read only while the sink exists
  lakebus_read_duration_seconds{source}     how long that read took
  lakebus_connector_deployed, _running      the sink connector exists; it and all its tasks RUN
  lakebus_connector_state{state}            its state (1); lakebus_connector_tasks{state}: tasks per state
  lakebus_sink_lag_records{topic,partition} bus records the sink has not consumed
  lakebus_sink_consumed_offset, lakebus_bus_end_offset   the same partitions' offsets
  lakebus_sink_uncommitted_records          records past the sink's watermark (not in the tables yet)
  lakebus_sink_commit_coordinators          members of the commit coordinators' group (1 normally)
  lakebus_ods_last_commit_age_seconds{table}, _timestamp_seconds{table}
                                            each ODS table's newest sink commit (none: no series)
  lakebus_ledger_verified_offset{topic,partition}  the offset ledger's verified point: every bus
                                            offset below it is in exactly one place (no run yet: none)
  lakebus_ledger_unverified_records{topic,partition}  bus records past it (needs the bus read)
  lakebus_open_incidents{sensor,kind}       incidents the monitoring sensors hold open (Dagster
                                            instance: DAGSTER_HOME, else the local stack's)
  lakebus_dws_missing_partitions{asset}     DWS partitions missing or failed in the gap-fill's 48 h

Runs until interrupted; --once prints one scrape to stdout and exits.
"""

EXAMPLES = """\
  lakebus metrics                       # http://<LAKEBUS_HOST>:<LAKEBUS_DAGSTER_PORT + 5>/metrics
  lakebus metrics --port 9464 --host 0.0.0.0
  lakebus metrics --once                # one scrape, printed
"""

#: the sources one scrape reads, each a ``lakebus_up{source=…}``
SOURCES = ("connector", "bus", "catalog", "ledger", "incidents", "dws")
#: ``lakebus metrics`` listens on the Dagster UI's port + this by default (3005; each local stack's apart)
DEFAULT_PORT_OFFSET = 5


@dataclass(frozen=True)
class Readers:
    """What a scrape reads; each callable may raise (that source's ``lakebus_up`` is then 0)."""

    connector_name: str
    bus_topic: str
    #: the sink connector's status; None when it is not deployed
    connector: Callable[[], ConnectorStatus | None]
    progress: Callable[[], SinkProgress]
    #: ODS table -> its newest sink commit (epoch ms), None when the sink has not committed to it yet
    commits: Callable[[], Mapping[str, int | None]]
    #: the offset ledger's verified point per bus partition (its state topic); None before its first run
    verified: Callable[[], Mapping[int, int] | None] = lambda: None
    #: (sensor, incident kind) -> incidents open; asset -> DWS partitions the gap-fill would rebuild
    incidents: Callable[[], Mapping[tuple[str, str], int]] = dict
    dws: Callable[[], Mapping[str, int]] = dict


class LakebusCollector:
    """A ``prometheus_client`` collector: every gauge computed when scraped (:meth:`collect`)."""

    def __init__(self, readers: Readers, clock: Callable[[], float] = time.time,
                 log: Callable[[str], None] | None = None) -> None:
        self.readers = readers
        self.clock = clock
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))

    def _read(self, source: str, read: Callable[[], Any], up: Any, took: Any) -> tuple[bool, Any]:
        """Read one source, recording its ``lakebus_up`` and read duration."""
        t0 = time.monotonic()
        ok, value = True, None
        try:
            value = read()
        except Exception as exc:  # noqa: BLE001 - an unreadable source is a metric, never a failed scrape
            self.log(f"lakebus metrics: {source} unreadable: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
            ok = False
        up.add_metric([source], 1 if ok else 0)
        took.add_metric([source], time.monotonic() - t0)
        return ok, value

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        r = self.readers
        up = GaugeMetricFamily("lakebus_up", "1 when the source could be read at this scrape, 0 when not", labels=["source"])
        took = GaugeMetricFamily("lakebus_read_duration_seconds", "how long reading the source took at this scrape",
                                 labels=["source"])
        families: list[Any] = []

        ok, status = self._read("connector", r.connector, up, took)
        deployed = ok and status is not None
        progress: SinkProgress | None = None
        if ok:
            families.extend(connector_families(r.connector_name, status))

        if deployed:  # the sink's offsets are Connect's offsets of the connector: none without it
            ok, progress = self._read("bus", r.progress, up, took)
            if ok:
                families.extend(progress_families(r.connector_name, r.bus_topic, progress))

        ok, commits = self._read("catalog", r.commits, up, took)
        if ok:
            families.extend(commit_families(commits, self.clock()))

        ok, verified = self._read("ledger", r.verified, up, took)
        if ok and verified is not None:
            families.extend(ledger_families(r.bus_topic, verified, progress.end if progress is not None else None))
        from lakebus_dagster.cli.metrics_readers import dws_families, incident_families

        for source, read, to_families in (("incidents", r.incidents, incident_families), ("dws", r.dws, dws_families)):
            ok, value = self._read(source, read, up, took)
            if ok:
                families.extend(to_families(value))
        yield up
        yield took
        yield from families


def connector_families(name: str, status: ConnectorStatus | None) -> list[Any]:
    """``lakebus_connector_deployed``, the connector's state and its tasks per state."""
    from prometheus_client.core import GaugeMetricFamily

    deployed = GaugeMetricFamily("lakebus_connector_deployed", "1 when the bus's sink connector exists in Connect",
                                 labels=["connector"])
    deployed.add_metric([name], 0 if status is None else 1)
    if status is None:
        return [deployed]
    running = GaugeMetricFamily("lakebus_connector_running", "1 when the sink connector and all its tasks are RUNNING",
                                labels=["connector"])
    running.add_metric([name], 1 if status.in_states({"RUNNING"}) else 0)
    state = GaugeMetricFamily("lakebus_connector_state", "the sink connector's state (Connect REST), as a 1",
                              labels=["connector", "state"])
    state.add_metric([name, status.state], 1)
    tasks = GaugeMetricFamily("lakebus_connector_tasks", "the sink connector's tasks per state", labels=["connector", "state"])
    per_state: dict[str, int] = {}
    for task in status.tasks:
        per_state[task.state] = per_state.get(task.state, 0) + 1
    for task_state, count in sorted(per_state.items()):
        tasks.add_metric([name, task_state], count)
    return [deployed, running, state, tasks]


def progress_families(connector: str, topic: str, progress: SinkProgress) -> list[Any]:
    """The sink's lag, consumed and end offsets per bus partition, and what else the progress read has."""
    from prometheus_client.core import GaugeMetricFamily

    labels = ["connector", "topic", "partition"]
    lag = GaugeMetricFamily("lakebus_sink_lag_records", "bus records the sink has not consumed yet, per partition", labels=labels)
    consumed = GaugeMetricFamily("lakebus_sink_consumed_offset", "the next bus offset the sink will consume", labels=labels)
    end = GaugeMetricFamily("lakebus_bus_end_offset", "the bus topic's end offset", labels=labels)
    for partition, end_offset in sorted(progress.end.items()):
        at = progress.consumed.get(partition, 0)
        key = [connector, topic, str(partition)]
        lag.add_metric(key, max(0, end_offset - at))
        consumed.add_metric(key, at)
        end.add_metric(key, end_offset)
    out = [lag, consumed, end]
    per_connector = (
        ("lakebus_sink_uncommitted_records", "bus records stamped after the sink's valid-through watermark (not in the tables yet)",
         progress.uncommitted),
        ("lakebus_sink_commit_coordinators", "members of the sink's commit coordinators' group (1 normally; 0: none; 2+: two)",
         progress.coordinator_members),
    )
    for name, text, value in per_connector:
        if value is not None:  # unread this scrape: no sample rather than a made-up 0
            family = GaugeMetricFamily(name, text, labels=["connector"])
            family.add_metric([connector], value)
            out.append(family)
    return out


def ledger_families(topic: str, verified: Mapping[int, int], ends: Mapping[int, int] | None) -> list[Any]:
    """The offset ledger's verified point per bus partition, and the records past it when the bus was read:
    a verified point that stands still while records pile up is a ledger that keeps finding a problem."""
    from prometheus_client.core import GaugeMetricFamily

    point = GaugeMetricFamily("lakebus_ledger_verified_offset",
                              "every bus offset below this one is in exactly one place (the offset ledger's verified point)",
                              labels=["topic", "partition"])
    behind = GaugeMetricFamily("lakebus_ledger_unverified_records", "bus records past the offset ledger's verified point",
                               labels=["topic", "partition"])
    for partition, offset in sorted(verified.items()):
        point.add_metric([topic, str(partition)], offset)
        if ends is not None and partition in ends:
            behind.add_metric([topic, str(partition)], max(0, ends[partition] - offset))
    return [point, behind] if ends is not None else [point]


def commit_families(commits: Mapping[str, int | None], now: float) -> list[Any]:
    """Per ODS table the newest sink commit's time and age; a table the sink never committed to has neither."""
    from prometheus_client.core import GaugeMetricFamily

    at = GaugeMetricFamily("lakebus_ods_last_commit_timestamp_seconds", "the newest sink commit on the ODS table (epoch s)",
                           labels=["table"])
    age = GaugeMetricFamily("lakebus_ods_last_commit_age_seconds", "seconds since the newest sink commit on the ODS table",
                            labels=["table"])
    for table, ms in sorted(commits.items()):
        if ms is None:
            continue
        at.add_metric([table], ms / 1000)
        age.add_metric([table], max(0.0, now - ms / 1000))
    return [at, age]


def registry_for(readers: Readers, clock: Callable[[], float] = time.time) -> Any:
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(LakebusCollector(readers, clock))
    return registry


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default=None, help="address to listen on (default: LAKEBUS_HOST)")
    p.add_argument("--port", type=int, default=None,
                   help=f"port to listen on (default: LAKEBUS_DAGSTER_PORT + {DEFAULT_PORT_OFFSET}, 3005 by default)")
    p.add_argument("--once", action="store_true", help="print one scrape to stdout and exit")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import warnings

    from prometheus_client import generate_latest, start_http_server

    from lakebus_dagster.cli.metrics_readers import readers_for
    from lakebus_dagster.settings import load_local_secrets
    from lakebus_dagster.stack.local_settings import load_stack_settings

    settings = load_stack_settings()
    load_local_secrets(settings)
    with warnings.catch_warnings():  # the layout's resources import Dagster's beta APIs
        warnings.simplefilter("ignore")
        registry = registry_for(readers_for(settings))
    if args.once:
        sys.stdout.write(generate_latest(registry).decode())
        return 0
    host = args.host or settings.host
    port = settings.dagster_port + DEFAULT_PORT_OFFSET if args.port is None else args.port
    server, _ = start_http_server(port, addr=host, registry=registry)
    print(f"lakebus metrics: serving http://{host}:{server.server_port}/metrics (Ctrl-C stops)", flush=True)
    stop = threading.Event()
    # a supervisor stops it with SIGTERM (systemd, Kubernetes): the same clean exit as Ctrl-C
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    server.shutdown()
    return 0
