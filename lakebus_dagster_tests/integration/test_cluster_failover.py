"""Failover on the cluster profile (``LAKEBUS_PROFILE=cluster``: 3 KRaft brokers, 2 Connect workers).

1. While events flow, the broker leading the bus topic and the Connect worker running the sink's task 1
are killed with SIGKILL, then brought back by ``stack up``. Proven
from outside: every acknowledged event is in the table exactly once (0 lost, 0 duplicated), the
tasks move to the surviving worker, and the status sensor — each tick evaluated through Dagster's
tick machinery with the shipped monitoring defaults, against the surviving worker — fails no tick
and raises no incident for a rebalance that completes inside its threshold.

2. The Spark standalone worker is killed while a DWS asset runs on the Spark Connect server (the
server's executor on that worker running the run's Spark job); brought back, the master gives the
server a new executor there, the run succeeds; a rerun of the same partitions gives identical DWS rows.

Runs in the ``cluster`` stage of ``make test`` (marker ``cluster``); the stage starts that profile.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import dagster as dg
import pytest
import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.alerts import AlertResource
from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource
from lakebus_dagster.defs.resources import BusLayoutResource, ConnectResource, build_resources
from lakebus_dagster.events import Bet
from lakebus_dagster.events.envelope import EnvelopeEncoder
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.lake.dws import LakehouseTables
from lakebus_dagster.stack import manager, process
from lakebus_dagster.stack.kafka_services import broker_name, worker_name

from .helpers import TEST_COMMIT_INTERVAL_MS, wait_for
from .test_spark_cluster import _dws_rows, connect_server_app, land_sample, leg_result, run_leg

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

EVENTS = 3000
BATCH = 50


@pytest.fixture
def cluster(stack):
    if stack.profile != "cluster":
        pytest.fail("these tests need the cluster profile: LAKEBUS_PROFILE=cluster (make test runs them in its cluster stage)")
    yield stack
    manager.up(stack)  # whatever a failed test left killed comes back for the next one


def _bets(n: int) -> list[Bet]:
    return [
        Bet(category="biz", event="bet", log_date="2025-11-26", hour="09", plat_id=1, app_id=10406,
            ts=1764147600000 + i, schema_version=1, user_id=7000 + i % 97, order_id=f"f{i}", amount=1.0,
            currency="BRL", game_id=3)
        for i in range(n)
    ]


class SteadyProducer(threading.Thread):
    """Sends the events in small batches (one every 0.2 s), acks=all with idempotence, and keeps
    the ids Kafka acknowledged: the test's oracle of what must be in the table."""

    def __init__(self, bootstrap: str, topic: str, events: list[Bet]) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.events = bootstrap, topic, events
        self.acked: list[str] = []
        self.errors: list[str] = []
        self.batches_sent = 0

    def run(self) -> None:
        encoder = EnvelopeEncoder()
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                             "delivery.timeout.ms": 120_000, "linger.ms": 5})

        def delivered(err, msg, order_id):
            (self.errors.append(f"{order_id}: {err}") if err else self.acked.append(order_id))

        for start in range(0, len(self.events), BATCH):
            for event in self.events[start:start + BATCH]:
                producer.produce(self.topic, key=str(event.user_id), value=encoder.encode(event),
                                 on_delivery=lambda err, msg, oid=event.order_id: delivered(err, msg, oid))
            producer.poll(0)
            self.batches_sent += 1
            time.sleep(0.2)
        remaining = producer.flush(150)
        if remaining:
            self.errors.append(f"{remaining} message(s) still undelivered after 150 s")


def _sensor_tick(resources: dict, cursor: str | None, instance) -> tuple:
    sensor = defs.resolve_sensor_def("connector_status_sensor")
    with dg.build_sensor_context(cursor=cursor, instance=instance, definitions=defs,
                                 sensor_name="connector_status_sensor", resources=resources) as ctx:
        result = sensor.evaluate_tick(ctx)
    return result, result.cursor


def _kill(settings, name: str) -> int:
    proc = process.find_process(settings, name)
    assert proc is not None, f"{name} is not running"
    proc.kill()  # SIGKILL: no shutdown hook, no clean leave of the group
    proc.wait(30)
    return proc.pid


def test_broker_and_worker_killed_mid_stream_lose_and_duplicate_nothing(cluster, run_id, webhook):
    url, received = webhook
    layout_resource = BusLayoutResource(name_suffix=run_id, commit_interval_ms=TEST_COMMIT_INTERVAL_MS, bus_partitions=2,
                                        replication_factor=3, min_insync_replicas=2)
    resources = {**build_resources(), "layout": layout_resource,
                 "alerts": AlertResource(sink="webhook", webhook_url=url, body_format="generic"),
                 "monitoring_policy": MonitoringPolicyResource()}  # the shipped defaults
    layout = layout_resource.layout()
    bus, table, connector = layout.bus_topic.name, layout.routes["bet"], layout.connector_name
    assert defs.resolve_job_def("provision_lakebus").execute_in_process(resources=resources).success

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    metadata = admin.list_topics(timeout=10)
    for topic in (bus, layout.control_topic.name, layout.dlq_topic.name):
        assert {len(p.replicas) for p in metadata.topics[topic].partitions.values()} == {3}, topic
        configs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
        (described,) = configs.values()
        assert described.result(timeout=10)["min.insync.replicas"].value == "2", topic

    urls = {worker_name(n): f"http://{cluster.host}:{cluster.connect_port(n)}" for n in (1, 2)}
    clients = {name: ConnectClient(u) for name, u in urls.items()}
    running = wait_for(lambda: (s := clients["connect"].status(connector)) and len(s.tasks) == 2
                       and all(t.state == "RUNNING" for t in s.tasks) and s, f"{connector}: 2 tasks RUNNING", 120)
    # The worker running task 1 dies. Not task 0's: the Iceberg sink 1.11 elects its commit
    # coordinator only when a task is handed partitions, and when the coordinator's own worker dies
    # the cooperative rebalance can leave no task elected — records consumed, never committed, until
    # the connector restarts (seen here in 1 of 5 runs; apache/iceberg#12372, #15955, #17450).
    moving_worker = next(t.worker_id for t in running.tasks if t.id == 1)
    victim_worker = next(n for n in (1, 2) if moving_worker.endswith(f":{cluster.connect_port(n)}"))
    victim, survivor = worker_name(victim_worker), worker_name(3 - victim_worker)
    leader_node = metadata.topics[bus].partitions[0].leader
    victim_broker = broker_name(leader_node)

    # the sensor as deployed, pointed at the surviving worker (in production: the load-balanced URL)
    sensor_resources = {**resources, "connect": ConnectResource(url=urls[survivor])}
    instance = dg.DagsterInstance.ephemeral()
    cursor = None
    ticks: list = []

    producer = SteadyProducer(cluster.bootstrap_servers, bus, _bets(EVENTS))
    producer.start()
    wait_for(lambda: producer.batches_sent >= 10, "the first 10 batches sent", 60, interval=0.2)
    _kill(cluster, victim_broker)
    wait_for(lambda: producer.batches_sent >= 25, "25 batches sent with a broker down", 90, interval=0.2)
    _kill(cluster, victim)
    killed_at = time.monotonic()

    def moved():
        nonlocal cursor
        result, cursor = _sensor_tick(sensor_resources, cursor, instance)
        ticks.append(result)
        status = clients[survivor].status(connector)
        failed = [t for t in status.tasks if t.state == "FAILED"]
        assert not failed, f"{connector} task {failed[0].id} FAILED after the kill: {failed[0].trace_summary}"
        on_survivor = [t for t in status.tasks if t.state == "RUNNING" and t.worker_id == survivor_id]
        return len(status.tasks) == 2 and len(on_survivor) == 2 and status

    survivor_id = f"{cluster.host}:{cluster.connect_port(3 - victim_worker)}"
    wait_for(moved, f"both tasks RUNNING on {survivor}", 120, interval=2)
    rebalance_s = time.monotonic() - killed_at
    ticks_while_moving = len(ticks)
    producer.join(240)
    assert not producer.is_alive(), "the producer did not finish"
    assert producer.errors == [], producer.errors[:5]
    assert len(producer.acked) == EVENTS

    # both come back the way an operator brings them back
    assert set(manager.up(cluster)) == {victim_broker, victim}

    catalog = load_catalog(cluster)

    def landed():
        nonlocal cursor
        result, cursor = _sensor_tick(sensor_resources, cursor, instance)
        ticks.append(result)
        try:
            rows = catalog.load_table(table).scan(selected_fields=("order_id", "_kafka_partition", "_kafka_offset")).to_arrow()
        except Exception:  # noqa: BLE001 - the table appears with the first commit
            return None
        return rows if rows.num_rows >= EVENTS else None

    rows = wait_for(landed, f"{EVENTS} rows in {table}", timeout=240, interval=2).to_pylist()
    print(f"[failover] killed {victim_broker} (leader of {bus}[0]) and {victim} (tasks {[t.id for t in running.tasks if t.worker_id == moving_worker]}); "
          f"tasks RUNNING on {survivor} {rebalance_s:.0f}s later; {len(rows)} rows for {len(producer.acked)} acked events; "
          f"{len(ticks)} sensor ticks, alerts: {[a.get('kind') for a in received]}")
    ids = Counter(r["order_id"] for r in rows)
    assert sorted(ids) == sorted(producer.acked), "lost or unexpected events"
    assert [i for i, n in ids.items() if n > 1] == [], "duplicated events"
    assert len({(r["_kafka_partition"], r["_kafka_offset"]) for r in rows}) == EVENTS

    # the sensor: every tick evaluated (evaluate_tick raises on a failing tick), and no incident
    # for a rebalance well inside its UNASSIGNED threshold
    # ticks while the tasks moved and while the rows landed (each one evaluated by Dagster, none failed),
    # and none asking for a restart
    assert ticks_while_moving >= 1 and len(ticks) > ticks_while_moving, (ticks_while_moving, len(ticks))
    assert [r.run_requests for r in ticks if r.run_requests] == [], "a rebalance inside its threshold needs no restart"
    assert rebalance_s < 60, f"tasks took {rebalance_s:.0f}s to move to {survivor}"
    assert [a for a in received if a.get("kind") == "incident"] == [], received


# -- Spark: the only worker lost while a DWS asset runs on the Spark Connect server ---------------------------
def _executor_dirs(settings, app_id: str) -> list[str]:
    app_dir = settings.data_dir / "spark-worker" / app_id
    return sorted(p.name for p in app_dir.iterdir()) if app_dir.is_dir() else []


def _spark_ui() -> requests.Session:
    """A session for the server's UI that retries GETs (idempotent) on connection and read errors.

    The UI shares the driver JVM with the work the run submits; on two busy cores one poll of it
    timed out in CI while the run's first job started, and that failed the test before the kill.
    """
    session = requests.Session()
    retry = Retry(total=6, connect=6, read=6, backoff_factor=0.5, allowed_methods=["GET"])
    session.mount("http://", HTTPAdapter(max_retries=retry))
    return session


def _jobs(ui: requests.Session, settings, app_id: str) -> list[dict]:
    """The server application's Spark jobs (its UI's REST API: the master's UI port + 2)."""
    url = f"http://{settings.host}:{settings.ports.spark_webui + 2}/api/v1/applications/{app_id}/jobs"
    response = ui.get(url, timeout=15)
    response.raise_for_status()
    return response.json()


def test_spark_worker_lost_mid_asset_then_rerun_gives_identical_dws_rows(cluster, run_id):
    _, layout, events = land_sample(cluster, run_id)
    catalog = load_catalog(cluster)
    tables = LakehouseTables.from_routes(layout.routes)
    app_id = connect_server_app(cluster)["id"]
    executors_before = len(_executor_dirs(cluster, app_id))
    ui = _spark_ui()
    jobs_before = {j["jobId"] for j in _jobs(ui, cluster, app_id)}

    # the run attaches to the server; once it has a Spark job of its own, the server's only worker dies
    leg = run_leg(cluster, run_id, wait=False)
    wait_for(lambda: leg.poll() is None and {j["jobId"] for j in _jobs(ui, cluster, app_id)} - jobs_before,
             "a Spark job of the run on the server", 180, interval=0.2)
    _kill(cluster, "spark-worker")
    assert manager.up(cluster) == ["spark-worker"]  # the operator brings it back; the master gives the server an executor
    lost = leg_result(leg)
    assert lost["success"] and all(lost["checks"]), lost
    assert connect_server_app(cluster)["id"] == app_id, "the server's application changed"
    assert len(_executor_dirs(cluster, app_id)) > executors_before, "the lost executor was not replaced"
    rows_after_loss = _dws_rows(catalog, tables)
    bets = [e for e in events if e.event == "bet"]
    assert sum(dict(r)["bet_count"] for r in rows_after_loss) == len(bets) and len(rows_after_loss) > 10

    # a rerun of the same partitions replaces them: identical rows, nothing doubled
    again = run_leg(cluster, run_id)
    assert again["success"] and all(again["checks"])
    assert _dws_rows(catalog, tables) == rows_after_loss

    client = ConnectClient(cluster.connect_url)
    client.delete(layout.connector_name)
    client.close()
