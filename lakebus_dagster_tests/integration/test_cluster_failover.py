"""Failover on the cluster profile (``LAKEBUS_PROFILE=cluster``: 3 KRaft brokers, 2 Connect workers).

1. While events flow, the Connect worker running the sink's task 0 — the Iceberg sink's commit
coordinator — is hit five times in a row (:data:`FAULTS`): killed with SIGKILL and brought back by
``stack up`` once the survivor commits again (the first time the broker leading the bus topic dies
with it), or frozen with SIGSTOP until the survivor has taken over and then thawed with SIGCONT — a
zombie that still believes it runs the coordinator. The status sensor runs as a user deploys it:
both workers' URLs, the shipped monitoring policy, each tick evaluated through Dagster's tick
machinery at its shipped interval, and every run it requests executed (in-process, with the
request's config and tags, as the daemon would launch it): ``restart_connector``, the
``offset_ledger_job`` a resolved stall requests, and the ``requeue_lost_records`` that
``requeue_after_loss_sensor`` (ticked the same way) requests after a ledger run that found records
lost. Proven from outside: within ``REPAIR_DEADLINE_S`` of the last recovery every acknowledged
event is in the table exactly once (an event the sink lost upstream counts once it is back as its
re-queued copy) and the offset ledger finds every offset in one place; after each fault new rows
land within ``FIRST_ROWS_BOUND_S``; the alerts are nothing, or one incident and one recovery notice
per stall the sensor healed, plus a ledger alert and one ``requeued`` alert when records were lost;
no tick fails.

2. The Spark standalone worker is killed while a DWS asset runs on the Spark Connect server (the
server's executor on that worker running the run's Spark job); brought back, the master gives the
server a new executor there, the run succeeds; a rerun of the same partitions gives identical DWS rows.

Runs in the ``cluster`` stage of ``make test`` (marker ``cluster``); the stage starts that profile.
"""

from __future__ import annotations

import re
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
from lakebus_dagster.defs.monitoring.constants import STATUS_SENSOR_INTERVAL_S
from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource
from lakebus_dagster.defs.resources import BusLayoutResource, ConnectResource, build_resources
from lakebus_dagster.events import Bet
from lakebus_dagster.events.envelope import EnvelopeEncoder
from lakebus_dagster.defs.ledger.sensors import lost_count_of_run
from lakebus_dagster.monitor.progress import sink_progress
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.ledger import Ledger, ledger_complete
from lakebus_dagster.lake.dws import LakehouseTables
from lakebus_dagster.stack import manager, process
from lakebus_dagster.stack.kafka_services import broker_name, worker_name

from .helpers import wait_for
from .test_spark_cluster import _dws_rows, connect_server_app, land_sample, leg_result, run_leg

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

#: what happens to the worker running task 0 (the sink's commit coordinator), one after the other
#: under load: SIGKILL (the first time with the broker leading the bus's partition 0), or SIGSTOP
#: until the survivor has taken over and then SIGCONT (a zombie: issue 29.3) — thawed right after
#: the survivor's first commit, or after it has committed for two minutes
#: (five since stop 14: two coordinators are now healed, each heal a restart, maybe a second after
#: the 2-minute backoff, and 90 s to its recovery notice, which every next fault waits for — seven
#: faults took the cluster stage past make test's 30 minutes)
FAULTS = ("kill+broker", "pause", "kill", "long-pause", "kill")
#: a frozen worker stays frozen at least this long (past the sink's 18 s consumer session and the
#: Connect group's 10 s session; a long pause: many commit cycles of the survivor's coordinator), and
#: never longer than PAUSE_MAX_S
PAUSE_MIN_S = {"pause": 45.0, "long-pause": 120.0}
PAUSE_MAX_S = 180.0
#: issue 29's target: every acked event in the table within 3 minutes of a stall's recovery
REPAIR_DEADLINE_S = 180.0
BATCH = 50
#: Bound on kill -9 → first new Iceberg snapshot. The sink's own failover measured 30-52 s
#: (docs/operations.md); when it ends with no coordinator (apache/iceberg#12372) the sensor's rule
#: fires 2 commit intervals after the tasks moved, its restart re-elects, and rows follow one interval
#: later: ~85 s. Issue 19's target (2 intervals + the rebalance delay = 30 s) is not met and not asserted.
FIRST_ROWS_BOUND_S = 120
#: the sink's commit interval as shipped (the layout's default), which this test runs
COMMIT_INTERVAL_S = 10
#: the sink counts as settled before a kill when its tasks have not moved for this long (one commit
#: interval) and a snapshot was committed since they last did
SETTLE_S = 10


@pytest.fixture
def cluster(stack):
    if stack.profile != "cluster":
        pytest.fail("these tests need the cluster profile: LAKEBUS_PROFILE=cluster (make test runs them in its cluster stage)")
    yield stack
    manager.up(stack)  # whatever a failed test left killed comes back for the next one


def _bet(i: int) -> Bet:
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
            for event in map(_bet, range(i, i + BATCH)):
                producer.produce(self.topic, key=str(event.user_id), value=encoder.encode(event),
                                 on_delivery=lambda err, msg, oid=event.order_id: delivered(err, msg, oid))
            i += BATCH
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
        result = sensor.evaluate_tick(ctx)  # raises when the tick fails
    return result, result.cursor


def _kill(settings, name: str) -> int:
    proc = process.find_process(settings, name)
    assert proc is not None, f"{name} is not running"
    proc.kill()  # SIGKILL: no shutdown hook, no clean leave of the group
    proc.wait(30)
    return proc.pid


def _snapshots_after(catalog, table: str, after_ms: int) -> list[int]:
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

    def _execute(self, request: dg.RunRequest):
        run = defs.resolve_job_def(request.job_name).execute_in_process(
            run_config=request.run_config, resources=self.resources, instance=self.instance, tags=request.tags)
        assert run.success, f"the {request.job_name} run the sensors requested failed"
        return run

    def tick_if_due(self) -> None:
        if time.monotonic() - self.last < STATUS_SENSOR_INTERVAL_S:
            return
        self.last = time.monotonic()
        result, self.cursor = _sensor_tick(self.resources, self.cursor, self.instance)
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
                self._execute(requeue)
                self.requeues.append(time.time())


def _provision(cluster, resources: dict, layout) -> None:
    assert defs.resolve_job_def("provision_lakebus").execute_in_process(resources=resources).success
    admin = AdminClient({"bootstrap.servers": cluster.kafka.bootstrap_servers})
    metadata = admin.list_topics(timeout=10)
    for topic in (layout.bus_topic.name, layout.control_topic.name, layout.dlq_topic.name):
        assert {len(p.replicas) for p in metadata.topics[topic].partitions.values()} == {3}, topic
        configs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
        (described,) = configs.values()
        assert described.result(timeout=10)["min.insync.replicas"].value == "2", topic


def _pause(settings, name: str, survivor_committed, min_s: float, max_s: float) -> float:
    """SIGSTOP ``name`` (a frozen VM, a long GC pause: no heartbeat, no clean leave, sockets open),
    until the tasks moved and the survivor committed (``survivor_committed()``) or ``max_s``, then
    SIGCONT: the worker comes back believing it still runs its tasks — task 0's commit coordinator
    among them. Returns how long it was frozen."""
    proc = process.find_process(settings, name)
    assert proc is not None, f"{name} is not running"
    frozen = time.monotonic()
    proc.suspend()
    try:
        wait_for(survivor_committed, f"the survivor committing while {name} is frozen", max_s, interval=0.5)
        # past the sink's 25 s consumer session by a margin, whatever the survivor did
        while time.monotonic() - frozen < min_s:
            time.sleep(0.5)
    finally:
        proc.resume()
    return time.monotonic() - frozen


def test_coordinator_worker_killed_or_frozen_under_load_every_acked_event_lands_once(cluster, run_id, webhook):
    url, received = webhook
    # the shipped 10 s commit interval: the failover timeline and the lost-coordinator rule are both
    # counted in commit intervals, so the test runs the value users get
    layout_resource = BusLayoutResource(name_suffix=run_id, bus_partitions=2, replication_factor=3, min_insync_replicas=2)
    resources = {**build_resources(), "layout": layout_resource,
                 "alerts": AlertResource(sink="webhook", webhook_url=url, body_format="generic"),
                 "monitoring_policy": MonitoringPolicyResource()}  # the shipped defaults
    layout = layout_resource.layout()
    assert layout.tuning.commit_interval_ms == COMMIT_INTERVAL_S * 1000
    bus, table, connector = layout.bus_topic.name, layout.routes["bet"], layout.connector_name
    _provision(cluster, resources, layout)

    urls = [f"http://{cluster.host}:{cluster.connect_port(n)}" for n in (1, 2)]
    # the sensor as a user configures it: every worker's URL; the client uses whichever answers
    sensor = SensorAsDeployed({**resources, "connect": ConnectResource(url=",".join(urls))})
    client = ConnectClient(tuple(urls))
    catalog = load_catalog(cluster)
    kinds = lambda: [a.get("kind") for a in received]  # noqa: E731
    incidents = lambda: [k for k in kinds() if k in ("incident", "recovery")]  # noqa: E731
    watched: dict = {"since": time.time(), "last": None}

    def settled():
        """Both tasks RUNNING and unmoved for SETTLE_S, a snapshot committed since they last moved,
        and no incident still open: a worker that just came back takes tasks over in a rebalance
        of its own, and a fault inside it would be two failovers at once."""
        sensor.tick_if_due()
        status = client.status(connector)
        failed = [t for t in status.tasks if t.state == "FAILED"]
        assert not failed, f"{connector} task {failed[0].id} FAILED: {failed[0].trace_summary}"
        now = tuple(sorted((t.id, t.state, t.worker_id) for t in status.tasks))
        if now != watched["last"] or len(status.tasks) != 2 or any(t.state != "RUNNING" for t in status.tasks):
            watched.update(since=time.time(), last=now)
            return None
        open_incidents = incidents().count("incident") - incidents().count("recovery")
        return (time.time() - watched["since"] >= SETTLE_S and open_incidents == 0
                and _snapshots_after(catalog, table, int(watched["since"] * 1000)) and status)

    producer = SteadyProducer(cluster.kafka.bootstrap_servers, bus)
    producer.start()
    faults: list[dict] = []
    try:
        for k, fault in enumerate(FAULTS):
            running = wait_for(settled, f"fault {k + 1}: the sink settled (tasks unmoved, a commit, no open incident)",
                               300, interval=1)
            coordinator = next(t.worker_id for t in running.tasks if t.id == 0)
            victim = worker_name(next(n for n in (1, 2) if coordinator.endswith(f":{cluster.connect_port(n)}")))
            alerts_before, restarts_before = len(received), len(sensor.restarts)
            started = time.time()

            def landed():
                sensor.tick_if_due()
                after = _snapshots_after(catalog, table, int(started * 1000))
                return after and after[0] / 1000 - started

            victims = [victim]
            if fault in PAUSE_MIN_S:
                frozen_s = _pause(cluster, victim, landed, PAUSE_MIN_S[fault], PAUSE_MAX_S)
            else:
                if fault == "kill+broker":  # the broker leading the bus's partition 0 dies with it
                    leader = AdminClient({"bootstrap.servers": cluster.kafka.bootstrap_servers}).list_topics(timeout=10)
                    victims.insert(0, broker_name(leader.topics[bus].partitions[0].leader))
                for name in victims:
                    _kill(cluster, name)
            seconds = wait_for(landed, f"fault {k + 1} ({fault}): a snapshot after it hit {victims}", 240, interval=0.5)
            faults.append({"fault": fault, "victims": victims, "first_rows_s": round(seconds, 1),
                           **({"frozen_s": round(frozen_s, 1)} if fault in PAUSE_MIN_S else {}),
                           "restarts": len(sensor.restarts) - restarts_before,
                           "alerts": [f"{a.get('kind')}: {a.get('title', '')[:200]}" for a in received[alerts_before:]]})
            print(f"[failover] fault {k + 1}: {faults[-1]}", flush=True)
            if fault not in PAUSE_MIN_S:
                assert sorted(manager.up(cluster)) == sorted(victims)  # the operator brings them back
    finally:
        producer.stop.set()
        producer.join(200)
    assert not producer.is_alive(), "the producer did not finish"
    assert producer.errors == [], producer.errors[:5]
    acked = {(p, o): oid for oid, p, o in producer.acked}

    # every incident resolves (shipped: 90 s after its condition ended); a resolved stall runs the
    # offset ledger at once and, when it finds records lost upstream, the re-queue right after
    wait_for(lambda: sensor.tick_if_due() or incidents().count("incident") == incidents().count("recovery"),
             "a recovery notice for every incident", 300, interval=2)
    recovered = time.time()  # the last recovery, or the faults' end without one (the webhook keeps no timestamps)

    def every_acked_event_once():
        """Every acked event in the table, at the offset it was acked at or as its re-queued copy."""
        sensor.tick_if_due()
        got = catalog.load_table(table).scan(selected_fields=("order_id",)).to_arrow().column("order_id").to_pylist()
        return Counter(got) if set(got) >= set(acked.values()) else None

    ids = wait_for(every_acked_event_once, f"all {len(acked)} acked events in {table} within {REPAIR_DEADLINE_S} s "
                   f"of the last recovery (ledger runs after stalls: {sensor.stall_ledgers}, re-queues: {sensor.requeues})",
                   timeout=REPAIR_DEADLINE_S, interval=2)
    repaired_s = time.time() - recovered
    assert [i for i, n in ids.items() if n > 1] == [], "an acked event twice"
    rows = catalog.load_table(table).scan(selected_fields=("order_id", "_kafka_partition", "_kafka_offset")).to_arrow().to_pylist()
    positions = Counter((r["_kafka_partition"], r["_kafka_offset"]) for r in rows)
    assert [p for p, n in positions.items() if n > 1] == [], "an offset twice"
    # Nothing lost silently: the offset ledger, as offset_ledger_job runs it (grace 0: the sink's
    # offsets are at the end), finds every offset in one place: a row, or re-queued (a copy landed)
    with ConnectClient(tuple(urls)) as c:
        run = ledger_complete(Ledger.from_kafka_config(layout, cluster.kafka.client_config(), catalog, c))
    assert not run.verdict.gaps and not run.verdict.duplicates, (run.verdict.gaps, run.verdict.duplicates)
    lost = sum(n for _, n in sensor.stall_ledgers)
    first_rows = {f: sorted(x["first_rows_s"] for x in faults if (x["fault"] in PAUSE_MIN_S) == (f == "pause"))
                  for f in ("kill", "pause")}
    print(f"[failover] {len(faults)} faults of task 0's worker {FAULTS}: first rows after kills {first_rows['kill']} s, "
          f"after pauses {first_rows['pause']} s (bound {FIRST_ROWS_BOUND_S} s); {len(rows)} rows for {len(acked)} acked "
          f"events; {sensor.ticks} sensor ticks, {len(sensor.restarts)} restart(s); stall ledger runs {sensor.stall_ledgers}, "
          f"{lost} lost upstream and re-queued ({len(sensor.requeues)} re-queue run(s)); every acked event once "
          f"{repaired_s:.0f} s after the last recovery (or the faults' end); alerts: {kinds()}", flush=True)
    assert max(max(v) for v in first_rows.values() if v) <= FIRST_ROWS_BOUND_S, f"first rows took too long: {faults}"
    # Alerts: none, or one incident + one recovery per stall (a stall rule's: nothing committed, or two
    # coordinators — the rejoined worker's; never another kind of incident); a ledger alert and one
    # `requeued` alert only when records were lost
    assert incidents() == ["incident", "recovery"] * (len(incidents()) // 2), received
    # at most two restarts per stall: a restart's own election can leave two coordinators again (seen
    # in make test: two members in the coordinators' group for 82 s after the first restart, one after
    # the second, 2 minutes later as the backoff says); more would be a restart storm
    assert len(sensor.restarts) <= 2 * incidents().count("incident"), (sensor.restarts, received)
    assert all(any(rule in a.get("title", "") + a.get("text", "") for rule in ("committed nothing", "runs two commit coordinators"))
               for a in received if a.get("kind") == "incident"), received
    assert kinds().count("requeued") == len(sensor.requeues) and (lost > 0) == bool(sensor.requeues), (lost, received)
    assert set(kinds()) <= {"incident", "recovery", "offset_ledger", "requeued"}, received
    # lakebus's sink task ran in the workers and gave up its coordinator with its first partition:
    # every fault rebalances the sink's group, and each rebalance closes every task's partitions
    release = re.compile(rf"Task {re.escape(connector)}-\d+ closed its first partition")
    releases = sum(len(release.findall(process.log_file(cluster, worker_name(n)).read_text(errors="replace"))) for n in (1, 2))
    assert releases >= len(faults), f"{releases} coordinator release(s) in the workers' logs for {len(faults)} faults"
    client.delete(connector)
    client.close()


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

    client = ConnectClient(cluster.connect.urls[0])
    client.delete(layout.connector_name)
    client.close()
