"""Shared plumbing of the integration tests: deadlines, an isolated sink connector, table reads.

Every integration test runs against the one real local stack that other tests (and people) use
at the same time, so each test works on its own topics, connector and namespace (a
``BusLayout.default().with_suffix(run_id)``), and always deletes its connector — a leftover
connector keeps consuming, committing and logging forever. Nothing here sleeps for a fixed time:
every wait is a poll against a deadline, and a FAILED connector task ends the wait at once with
its stack trace instead of running into the timeout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import pyarrow as pa
import requests
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table

from lakebus_dagster.bus.desired import sink_connector_config, topic_specs
from lakebus_dagster.bus.layout import BusLayout, SinkTuning, TopicSpec
from lakebus_dagster.events.registry import EventRegistry, default_registry
from lakebus_dagster_tests.lake_counts import committed_rows  # re-exported for the tests
from lakebus_dagster.settings import Settings

T = TypeVar("T")

#: How long a test waits for rows to land. Generous: the stack shares two cores with other tests.
DEADLINE_S = 180.0
#: How long a new connector may take to get its task RUNNING (a worker rebalance is ~3-10 s).
RUNNING_DEADLINE_S = 60.0
#: The tests' commit interval, not the shipped 10 s: rows become visible ~2 s after they are consumed
#: and every window counted in commit intervals shrinks 5x — minutes off the suite, the same rules.
#: test_demo_as_user (the lake stage) runs the shipped 10 s end to end.
TEST_COMMIT_INTERVAL_MS = 2000
FAST_COMMITS = SinkTuning(commit_interval_ms=TEST_COMMIT_INTERVAL_MS, commit_timeout_ms=20000)


def wait_for(
    predicate: Callable[[], T], what: str, timeout: float = DEADLINE_S, interval: float = 1.0
) -> T:
    """Call ``predicate`` until it returns something truthy and return that, or fail at the deadline.

    The failure names ``what`` and the last value seen, which is usually enough to tell "slow"
    from "stuck". Exceptions from ``predicate`` (e.g. an assertion about a FAILED task) propagate.
    """
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def isolated_layout(
    run_id: str,
    *,
    namespace: str = "demo",
    routes: Mapping[str, str] | None = None,
    tuning: SinkTuning = FAST_COMMITS,
) -> BusLayout:
    """The default layout with ``run_id`` in every topic, the connector and the namespace."""
    return replace(BusLayout.default(namespace=namespace, routes=routes).with_suffix(run_id), tuning=tuning)


def create_topics(bootstrap_servers: str, specs: Iterable[TopicSpec], timeout: float = 30.0) -> None:
    """Create ``specs`` (auto-creation is off on the broker); an error names the topic."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    futures = admin.create_topics(
        [NewTopic(t.name, t.partitions, t.replication_factor, config=dict(t.configs)) for t in specs]
    )
    for name, future in futures.items():
        try:
            future.result(timeout=timeout)
        except Exception as exc:
            raise AssertionError(f"creating topic {name!r} failed: {exc}") from exc


@contextmanager
def temporary_topics(bootstrap_servers: str, specs: Iterable[TopicSpec]) -> Iterator[list[str]]:
    """Create ``specs`` and delete them afterwards (for tests that run no connector on them)."""
    specs = list(specs)
    create_topics(bootstrap_servers, specs)
    try:
        yield [t.name for t in specs]
    finally:
        admin = AdminClient({"bootstrap.servers": bootstrap_servers})
        for future in admin.delete_topics([t.name for t in specs]).values():
            future.result(timeout=30)


@dataclass(frozen=True)
class SinkConnector:
    """A test's own Iceberg sink connector on the stack's Connect worker."""

    settings: Settings
    layout: BusLayout

    @property
    def url(self) -> str:
        return f"{self.settings.connect.urls[0]}/connectors/{self.layout.connector_name}"

    def stored_config(self) -> dict[str, str]:
        """The config as Connect stores it. Right after the PUT the worker may not have read its
        config topic back yet and answers 404 for a moment, so poll (with a deadline)."""

        def fetch() -> dict[str, str] | None:
            resp = requests.get(f"{self.url}/config", timeout=10)
            return resp.json() if resp.status_code == 200 else None

        return wait_for(fetch, f"{self.layout.connector_name}'s stored config", timeout=30, interval=0.5)

    def running(self) -> dict[str, Any] | bool:
        """The status when connector and tasks run, else False; a FAILED task fails the test at once."""
        status = requests.get(f"{self.url}/status", timeout=10).json()
        tasks = status.get("tasks", [])
        for task in tasks:
            assert task["state"] != "FAILED", (
                f"{self.layout.connector_name} task {task['id']} FAILED: {task.get('trace', '')[:2000]}"
            )
        up = status.get("connector", {}).get("state") == "RUNNING" and tasks and all(
            t["state"] == "RUNNING" for t in tasks
        )
        return bool(up) and status

    def wait_running(self, timeout: float = RUNNING_DEADLINE_S) -> dict[str, Any]:
        return wait_for(self.running, f"{self.layout.connector_name}: connector and task RUNNING", timeout)


@contextmanager
def sink_connector(
    settings: Settings, layout: BusLayout, registry: EventRegistry = default_registry
) -> Iterator[SinkConnector]:
    """Create ``layout``'s topics and PUT its sink connector; always delete the connector after.

    ``registry`` is the event registry the sink's guard enforces (a test registering a new
    version passes its own). The topics stay (cheap, and handy when a failure needs a look); the
    connector must not.
    """
    create_topics(settings.kafka.bootstrap_servers, topic_specs(layout))
    sink = SinkConnector(settings, layout)
    resp = requests.put(f"{sink.url}/config", json=sink_connector_config(layout, settings.lake, registry), timeout=30)
    try:
        assert resp.status_code == 201, resp.text
        yield sink
    finally:
        requests.delete(sink.url, timeout=30)


# -- Iceberg ----------------------------------------------------------------------------------------
def load_table_or_none(catalog: Catalog, table_name: str) -> Table | None:
    """The table, or None while the sink has not created it yet."""
    try:
        return catalog.load_table(table_name)
    except NoSuchTableError:
        return None


def scan_or_none(catalog: Catalog, table_name: str) -> pa.Table | None:
    """Every row of the table as Arrow, or None while the sink has not created it yet."""
    table = load_table_or_none(catalog, table_name)
    return None if table is None else table.scan().to_arrow()


def wait_for_rows(
    sink: SinkConnector, catalog: Catalog, table_name: str, expected: int, timeout: float = DEADLINE_S
) -> int:
    """Poll until ``table_name`` holds at least ``expected`` rows, checking the task never FAILED.

    Returns the committed count, which may exceed ``expected`` (the caller asserts equality: a
    surplus means duplicates, and waiting for "exactly" would hide it behind a timeout).
    """
    return wait_for(
        lambda: sink.running() and (n := committed_rows(catalog, table_name)) >= expected and n,
        f"{expected} rows in {table_name}",
        timeout,
    )


# -- Kafka ------------------------------------------------------------------------------------------
def consume_all(
    bootstrap_servers: str, topic: str, expected: int, group_id: str, timeout: float = 60.0
) -> list[bytes]:
    """Read partition 0 of ``topic`` from the start until its end offset; fail if not ``expected`` values.

    The end offset is read first, so the result is exactly what the topic holds (no waiting for
    messages that will never come, no missing a surplus).
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group_id,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert high - low == expected, f"topic {topic!r} holds {high - low} messages, expected {expected}"
        consumer.assign([TopicPartition(topic, 0, low)])
        values: list[bytes] = []

        def read_to_end() -> bool:
            for msg in consumer.consume(num_messages=1000, timeout=1.0):
                assert msg.error() is None, f"consuming {topic!r}: {msg.error()}"
                values.append(msg.value())
            return len(values) >= high - low

        wait_for(read_to_end, f"{expected} messages from {topic!r}", timeout, interval=0)
        return values
    finally:
        consumer.close()


@contextmanager
def provisioned_bus(settings: Settings, suffix: str, commit_interval_ms: int = 2000) -> Iterator[tuple[dict, BusLayout, Any]]:
    """``provision_lakebus`` (the shipped job) on a bus isolated by ``suffix``; yields (resources,
    layout, a Connect client) and deletes the bus's connector afterwards."""
    from lakebus_dagster.connect import ConnectClient
    from lakebus_dagster.definitions import defs
    from lakebus_dagster.defs.environment import build_resources
    from lakebus_dagster.defs.resources import BusLayoutResource

    resources = {**build_resources(), "layout": BusLayoutResource(name_suffix=suffix, commit_interval_ms=commit_interval_ms)}
    layout = resources["layout"].layout()
    assert defs.resolve_job_def("provision_lakebus").execute_in_process(resources=resources).success
    client = ConnectClient(settings.connect.urls[0])
    try:
        yield resources, layout, client
    finally:
        if client.exists(layout.connector_name):
            client.delete(layout.connector_name)
        client.close()


def metadata_json_files(stack, location: str) -> dict[str, int]:
    """``{key: bytes}`` of ``<location>/metadata/*.metadata.json`` on the stack's S3 (a table's
    metadata versions: what grows with every commit unless the catalog deletes old ones)."""
    from lakebus_dagster.stack.s3 import s3_client

    bucket, _, prefix = location.removeprefix("s3://").removeprefix("s3a://").partition("/")
    pages = s3_client(stack).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix.rstrip('/')}/metadata/")
    return {o["Key"]: int(o["Size"]) for page in pages for o in page.get("Contents", []) if o["Key"].endswith(".metadata.json")}


class Traffic:
    """Events from ``make(i)`` (i = 0, 1, ...; one event or a list) sent every ``every_s`` seconds
    until the block ends, so the sink keeps committing; ``sent`` holds what was produced and flushed."""

    def __init__(self, bootstrap: str, topic: str, make: Callable[[int], Any], every_s: float = 1.0) -> None:
        self.sent: list[Any] = []
        self._args = (bootstrap, topic, make, every_s)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from lakebus_dagster.events import EventProducer

        bootstrap, topic, make, every_s = self._args
        with EventProducer(topic, {"bootstrap.servers": bootstrap}) as producer:
            i = 0
            while not self._stop.is_set():
                made = make(i)
                events = made if isinstance(made, list) else [made]
                for event in events:
                    producer.send(event)
                producer.flush(5)
                self.sent.extend(events)
                i += 1
                self._stop.wait(every_s)

    def __enter__(self) -> "Traffic":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)


def produce(resources: dict, topic: str, events, encoder=None) -> None:
    """Send ``events`` as Schema+JSON envelopes (keyed by user) through the resources' Kafka
    producer, acks=all, and fail unless every one was delivered. ``encoder``: one over another
    registry than the default (a declared event's)."""
    from lakebus_dagster.events import EnvelopeEncoder

    encoder = encoder or EnvelopeEncoder()
    producer = resources["kafka"].producer(acks="all")
    for e in events:
        producer.produce(topic, key=str(e.user_id).encode(), value=encoder.encode(e))
    assert producer.flush(30) == 0
