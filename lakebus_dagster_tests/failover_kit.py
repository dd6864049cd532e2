"""What the failover tests and benchmarks share: the load, the status sensor as the daemon runs it, the
kills and freezes, and a watch on the sink's control topic to time a fault to a commit phase.

A fixture module, not a test module: :mod:`benchmarks.bench_failover_protocol` and the cluster tests
(:mod:`lakebus_dagster_tests.integration.test_cluster_failover`, ``test_rolling_restart``) import it.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime

import dagster as dg
from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.ledger.checks import lost_count_of_run
from lakebus_dagster.defs.monitoring.constants import STATUS_SENSOR_INTERVAL_S
from lakebus_dagster.events import Bet
from lakebus_dagster.events.envelope import EnvelopeEncoder
from lakebus_dagster.monitor.control_events import decode_control
from lakebus_dagster.stack import process

def log_time(line: str) -> float | None:
    """Epoch seconds of a log4j line ``[2025-11-26 09:00:00,123] ...`` (local time)."""
    if not line.startswith("[") or len(line) < 25:
        return None
    try:
        return datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    except ValueError:
        return None


#: events per batch of :class:`SteadyProducer` (a batch every 0.2 s: ~250 events/s)
BATCH = 50


def bet(i: int) -> Bet:
    return Bet(category="biz", event="bet", log_date="2025-11-26", hour="09", plat_id=1, app_id=10406,
               ts=1764147600000 + i, schema_version=1, user_id=7000 + i % 97, order_id=f"f{i}", amount=1.0,
               currency="BRL", game_id=3)


class SteadyProducer(threading.Thread):
    """Sends events in batches of ``BATCH`` every 0.2 s (~250/s) until ``stop`` is set, acks=all with
    idempotence, and keeps the ids Kafka acknowledged: the test's oracle of what must be in the table."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        #: (order_id, partition, offset) of every event Kafka acknowledged
        self.acked: list[tuple[str, int, int]] = []
        self.errors: list[str] = []
        self.batches_sent = 0
        self.stop = threading.Event()

    def run(self) -> None:
        encoder = EnvelopeEncoder()
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                             "delivery.timeout.ms": 120_000, "linger.ms": 5})

        def delivered(err, msg, order_id):
            (self.errors.append(f"{order_id}: {err}") if err else self.acked.append((order_id, msg.partition(), msg.offset())))

        i = 0
        while not self.stop.is_set():
            for event in map(bet, range(i, i + BATCH)):
                producer.produce(self.topic, key=str(event.user_id), value=encoder.encode(event),
                                 on_delivery=lambda err, msg, oid=event.order_id: delivered(err, msg, oid))
            i += BATCH
            producer.poll(0)
            self.batches_sent += 1
            time.sleep(0.2)
        remaining = producer.flush(150)
        if remaining:
            self.errors.append(f"{remaining} message(s) still undelivered after 150 s")


def sensor_tick(resources: dict, cursor: str | None, instance) -> tuple:
    sensor = defs.resolve_sensor_def("connector_status_sensor")
    with dg.build_sensor_context(cursor=cursor, instance=instance, definitions=defs,
                                 sensor_name="connector_status_sensor", resources=resources) as ctx:
        result = sensor.evaluate_tick(ctx)  # raises when the tick fails
    return result, result.cursor


def kill(settings, name: str) -> int:
    proc = process.find_process(settings, name)
    assert proc is not None, f"{name} is not running"
    proc.kill()  # SIGKILL: no shutdown hook, no clean leave of the group
    proc.wait(30)
    return proc.pid


def snapshots_after(catalog, table: str, after_ms: int) -> list[int]:
    """Commit times (ms) of the table's snapshots committed after ``after_ms``."""
    if not catalog.table_exists(table):
        return []
    return sorted(s.timestamp_ms for s in catalog.load_table(table).snapshots() if s.timestamp_ms > after_ms)


class SensorAsDeployed:
    """The status sensor ticking at its shipped interval, and what the daemon does with its requests:
    a ``restart_connector`` run, or the ``offset_ledger_job`` run a resolved stall requests, executed
    in-process with the request's config and tags; after a ledger run, ``requeue_after_loss_sensor``
    evaluated through Dagster's tick machinery (its run-status cursor on the same instance) and its
    ``requeue_lost_records`` request executed the same way."""

    def __init__(self, resources: dict) -> None:
        self.resources = resources
        self.instance = dg.DagsterInstance.ephemeral()
        self.cursor: str | None = None
        self.ticks = 0
        self.last = 0.0
        self.restarts: list[float] = []
        #: (when, lost count) of each ledger run a resolved stall launched, and when each re-queue ran
        self.stall_ledgers: list[tuple[float, int]] = []
        self.requeues: list[float] = []
        self.requeue_sensor = defs.resolve_sensor_def("requeue_after_loss_sensor")
        self.requeue_cursor = self._requeue_tick(None).cursor

    def _requeue_tick(self, cursor: str | None):
        with dg.build_sensor_context(cursor=cursor, instance=self.instance, definitions=defs,
                                     sensor_name=self.requeue_sensor.name, resources=self.resources) as ctx:
            return self.requeue_sensor.evaluate_tick(ctx)

    def _execute(self, request: dg.RunRequest, target: str | None = None):
        """Runs ``request`` as the daemon would: its job, or (a request naming none) its sensor's ``target``."""
        job_name = request.job_name or target
        run = defs.resolve_job_def(job_name).execute_in_process(
            run_config=request.run_config, resources=self.resources, instance=self.instance, tags=request.tags)
        assert run.success, f"the {job_name} run the sensors requested failed"
        return run

    def tick_if_due(self) -> None:
        if time.monotonic() - self.last < STATUS_SENSOR_INTERVAL_S:
            return
        self.last = time.monotonic()
        result, self.cursor = sensor_tick(self.resources, self.cursor, self.instance)
        self.ticks += 1
        for request in result.run_requests or []:
            assert request.job_name in ("restart_connector", "offset_ledger_job"), request
            if request.job_name == "restart_connector":
                self.restarts.append(time.time())
                self._execute(request)
                continue
            ledger = self._execute(request)
            self.stall_ledgers.append((time.time(), lost_count_of_run(self.instance, ledger.run_id)))
            ticked = self._requeue_tick(self.requeue_cursor)
            self.requeue_cursor = ticked.cursor
            for requeue in ticked.run_requests or []:
                self._execute(requeue, self.requeue_sensor.job_name)
                self.requeues.append(time.time())


def provision(cluster, resources: dict, layout) -> None:
    assert defs.resolve_job_def("provision_lakebus").execute_in_process(resources=resources).success
    admin = AdminClient({"bootstrap.servers": cluster.kafka.bootstrap_servers})
    metadata = admin.list_topics(timeout=10)
    for topic in (layout.bus_topic.name, layout.control_topic.name, layout.dlq_topic.name):
        assert {len(p.replicas) for p in metadata.topics[topic].partitions.values()} == {3}, topic
        configs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
        (described,) = configs.values()
        assert described.result(timeout=10)["min.insync.replicas"].value == "2", topic


class ControlWatch(threading.Thread):
    """Reads the sink's control topic from its end as the coordinator does (read_committed): when each
    StartCommit, DataWritten, DataComplete, CommitToTable and CommitComplete of ``group`` became
    visible. :meth:`next_event` times a fault to a phase of the commit cycle."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(daemon=True)
        self.topic, self.group = topic, group
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lakebus-control-watch-{time.time_ns()}",
                                  "enable.auto.commit": False, "isolation.level": "read_committed"})
        self.consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
        #: (seen at, kind) of every event of the group, in order
        self.seen: list[tuple[float, str]] = []
        self.stop = threading.Event()
        self._changed = threading.Condition()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                message = self.consumer.poll(0.2)
                if message is None or message.error():
                    continue
                event = decode_control(message.value())
                if event is not None and event.group == self.group:
                    with self._changed:
                        self.seen.append((time.time(), event.kind))
                        self._changed.notify_all()
        finally:
            self.consumer.close()

    def next_event(self, kind: str, after: float, timeout: float) -> float | None:
        """When the first ``kind`` event seen after ``after`` (epoch s) arrived; None after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = next((t for t, k in self.seen if k == kind and t > after), None)
                left = deadline - time.monotonic()
                if found is not None or left <= 0:
                    return found
                self._changed.wait(min(left, 0.5))


#: the failover remedies of lakebus's sink connector a run may switch off to show what each one holds
#: (``LAKEBUS_FAILOVER_SWITCH_OFF=anchor,release,fence``): the control offsets anchored at start, the
#: coordinator released with its task's first partition, and a task's worker transaction fenced at its start
REMEDIES = {"anchor": "anchor_control_offsets", "release": "release_coordinator_on_close",
            "fence": "fence_worker_transaction"}


def switched_off_remedies(value: str | None) -> tuple[str, ...]:
    """The remedies ``value`` (comma-separated) names; an unknown name is refused with the known ones."""
    names = tuple(n.strip() for n in (value or "").split(",") if n.strip())
    unknown = sorted(set(names) - set(REMEDIES))
    if unknown:
        raise ValueError(f"LAKEBUS_FAILOVER_SWITCH_OFF: unknown remedy {unknown}; known: {sorted(REMEDIES)}")
    return names


def remedies_layout_class():
    """:class:`~lakebus_dagster.defs.resources.BusLayoutResource` whose ``switched_off`` remedies are off."""
    from dataclasses import replace

    from lakebus_dagster.defs.resources import BusLayoutResource

    class RemediesLayout(BusLayoutResource):
        switched_off: list[str] = []

        def layout(self):
            layout = super().layout()
            off = {REMEDIES[name]: False for name in self.switched_off}
            return replace(layout, tuning=replace(layout.tuning, **off)) if off else layout

    return RemediesLayout
