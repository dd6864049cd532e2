"""End-to-end ingest on the cluster profile: 3 KRaft brokers (RF 3, min ISR 2), 2 Connect workers,
the sink with 1 task vs 2 tasks (2 bus partitions), measured one after the other in one run.

The benchmark brings up its own cluster profile (``LAKEBUS_PROFILE=cluster``) in
``.lakebus-bench-cluster`` on ports of its own (:data:`CLUSTER_ENV`), so it runs next to the
single-node stack that ``make bench`` starts; the cluster is stopped again at the end unless it
was already running. The measurement itself is :func:`benchmarks.bench_ingest_e2e.run_variant`
(backlog throughput, then freshness at a steady rate), run in a child process that sees only the
cluster's settings; CPU is summed over both Connect workers.

Then the failover measurement (issue 19, :func:`failover`): under ``rate`` events/s on a bus of 2
partitions (2 sink tasks, 10 s commits), the worker running task 0 — the sink's commit coordinator —
is killed with SIGKILL ``kills`` times (brought back after each), the seconds from the kill to the
first Iceberg snapshot committed after it measured each time; first with the sink's consumers on
Kafka's own defaults (connector overrides, :data:`OLD_CONSUMER`: "before"), then as shipped ("after").

    python -m benchmarks bench_cluster_ingest
    python -m benchmarks.bench_cluster_ingest [n] [rate] [duration_s] [kills] [before_kills]
    python -m benchmarks.bench_cluster_ingest --failover-only [kills] [before_kills] [rate]
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import requests
from confluent_kafka.admin import AdminClient, NewTopic

from lakebus_dagster.settings import REPO_ROOT

#: the benchmark's own cluster: state dir and base ports apart from the local stack and from the
#: profiles' stages of ``make test`` (broker n at 24092+10(n-1), workers at 25083/25093)
CLUSTER_ENV = {
    "LAKEBUS_PROFILE": "cluster",
    "LAKEBUS_STATE_DIR": str(REPO_ROOT / ".lakebus-bench-cluster"),
    "LAKEBUS_KAFKA_PORT": "24092",
    "LAKEBUS_KAFKA_CONTROLLER_PORT": "24093",
    "LAKEBUS_CONNECT_PORT": "25083",
    "LAKEBUS_REST_CATALOG_PORT": "25181",
    "LAKEBUS_S3_PORT": "25000",
    "LAKEBUS_SPARK_MASTER_PORT": "25077",
    "LAKEBUS_SPARK_WEBUI_PORT": "25080",
    "LAKEBUS_SPARK_CONNECT_PORT": "24002",
    "LAKEBUS_DAGSTER_PORT": "24000",
}


def _stack(*command: str, quiet: bool = False) -> int:
    return subprocess.run([sys.executable, "-m", "lakebus_dagster.stack", *command], env={**os.environ, **CLUSTER_ENV},
                          cwd=REPO_ROOT, capture_output=quiet).returncode


def _child(*args: str) -> dict:
    child = subprocess.run([sys.executable, "-m", "benchmarks.bench_cluster_ingest", *args],
                           env={**os.environ, **CLUSTER_ENV}, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    line = next((ln for ln in child.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if child.returncode != 0 or line is None:
        raise RuntimeError(f"the measurement failed (exit {child.returncode}):\n{child.stdout[-3000:]}")
    return json.loads(line[len("RESULT "):])


def run(n: int = 200_000, rate: float = 2000.0, duration_s: float = 30.0, kills: int = 10, before_kills: int = 3,
        ingest: bool = True) -> dict:
    was_up = _stack("status", "--check", quiet=True) == 0
    print(f"[bench_cluster_ingest] bringing up the cluster profile in {CLUSTER_ENV['LAKEBUS_STATE_DIR']} ...", flush=True)
    if _stack("up") != 0:
        raise RuntimeError("the cluster profile did not come up; see the [stack] lines above")
    try:
        results = _child("--measure", str(n), str(rate), str(duration_s)) if ingest else {}
        if kills or before_kills:
            results.update(_child("--failover", str(kills), str(before_kills), str(rate)))
        return results
    finally:
        if not was_up:
            _stack("down")


def measure(n: int, rate: float, duration_s: float) -> dict[str, float]:
    """In the child: the cluster's settings come from the environment (CLUSTER_ENV)."""
    from benchmarks.bench_ingest_e2e import Variant, _cleanup, _layout, cpu_seconds, run_variant
    from lakebus_dagster.bus.layout import BusLayout, SinkTuning
    from lakebus_dagster.settings import load_local_secrets
    from lakebus_dagster.stack.local_settings import load_stack_settings

    settings = load_stack_settings()
    load_local_secrets(settings)
    assert settings.profile == "cluster", settings.profile
    pids = [int((settings.run_dir / f"{name}.pid").read_text()) for name in ("connect", "connect-2")]
    tag = uuid.uuid4().hex[:6]
    base = BusLayout.default().with_suffix(f"cl{tag}").with_replication(3, 2)
    chosen = [Variant("tasks1", 1, SinkTuning()), Variant("tasks2", 2, SinkTuning())]
    layouts = [_layout(base, tag, v) for v in chosen]
    results: dict[str, float] = {"events": n, "freshness_rate_per_s": rate, "load_1min_at_start": os.getloadavg()[0]}
    try:
        for layout, v in zip(layouts, chosen):
            cpu0 = sum(cpu_seconds(p) for p in pids)
            measured = run_variant(settings, layout, v, n, rate, duration_s, False, tag, settings.connect.urls[0], pids[0])
            # run_variant's CPU figures are of one worker; both workers' CPU over the whole variant instead
            measured = {k: val for k, val in measured.items() if "connect_cpu" not in k}
            measured[f"{v.name}_workers_cpu_s"] = sum(cpu_seconds(p) for p in pids) - cpu0
            results.update(measured)
        results["tasks2_vs_tasks1_ratio"] = results["tasks2_events_per_s"] / results["tasks1_events_per_s"]
        results["load_1min_at_end"] = os.getloadavg()[0]
        return results
    finally:
        _cleanup(settings, layouts)


def measure_failover(kills: int, before_kills: int, rate: float) -> dict:
    """In the child: ``before_kills`` kills with the sink's consumers on Kafka's defaults, then ``kills``
    as shipped, each on a bus of its own (2 partitions, RF 3 / min ISR 2, 10 s commits)."""
    from dataclasses import replace

    from benchmarks.bench_ingest_e2e import _cleanup
    from lakebus_dagster.bus.layout import BusLayout
    from lakebus_dagster.settings import load_local_secrets
    from lakebus_dagster.stack.local_settings import load_stack_settings

    settings = load_stack_settings()
    load_local_secrets(settings)
    assert settings.profile == "cluster", settings.profile
    results: dict = {"failover_rate_per_s": rate, "load_1min_at_start": os.getloadavg()[0]}
    for label, count, extra in (("before", before_kills, OLD_CONSUMER), ("after", kills, {})):
        if not count:
            continue
        tag = uuid.uuid4().hex[:6]
        base = BusLayout.default().with_suffix(f"fo{tag}").with_replication(3, 2)
        layout = replace(base, bus_topic=replace(base.bus_topic, partitions=2),
                         routes={e: f"bench_failover_{tag}.{t.split('.', 1)[1]}" for e, t in base.routes.items()})
        try:
            results.update(failover(settings, layout, count, rate, extra, label))
        finally:
            _cleanup(settings, [layout])
    results["load_1min_at_end"] = os.getloadavg()[0]
    return results


def main(argv: list[str]) -> None:
    args = [a for a in argv[1:] if not a.startswith("--")]
    if "--measure" in argv:
        n = int(args[0]) if args else 200_000
        rate = float(args[1]) if len(args) > 1 else 2000.0
        duration = float(args[2]) if len(args) > 2 else 30.0
        print("RESULT " + json.dumps(measure(n, rate, duration)), flush=True)
    elif "--failover" in argv:
        print("RESULT " + json.dumps(measure_failover(int(args[0]), int(args[1]), float(args[2]))), flush=True)
    elif "--failover-only" in argv:
        kills = int(args[0]) if args else 10
        before = int(args[1]) if len(args) > 1 else 3
        rate = float(args[2]) if len(args) > 2 else 2000.0
        print(json.dumps(run(rate=rate, kills=kills, before_kills=before, ingest=False), indent=1))
    else:
        n = int(args[0]) if args else 200_000
        rate = float(args[1]) if len(args) > 1 else 2000.0
        duration = float(args[2]) if len(args) > 2 else 30.0
        kills = int(args[3]) if len(args) > 3 else 10
        before = int(args[4]) if len(args) > 4 else 3
        print(json.dumps(run(n, rate, duration, kills, before), indent=1))




# -- failover: the commit coordinator's worker killed under load (issue 19) ------------------------------------
#: Kafka 3.9's own consumer defaults for the sink's consumer group, as the workers ran before issue 19:
#: a connector override puts one sink back on them on the same workers ("before" in the same run)
OLD_CONSUMER = {
    "consumer.override.session.timeout.ms": "45000",
    "consumer.override.heartbeat.interval.ms": "3000",
    "consumer.override.partition.assignment.strategy":
        "org.apache.kafka.clients.consumer.RangeAssignor,org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}
#: log lines of the surviving worker that mark a phase (first match after the kill, seconds since it)
LOG_PHASES = {
    "worker_rebalance": "Rebalance started",
    "task0_started": "Starting task {connector}-0",
    "elected": "elected leader, starting commit coordinator",
    "commit_initiated": "initiated commit",
    "commit_timeout": "Commit timeout reached",
    "commit_done": "completed commit",
}


class _Paced(threading.Thread):
    """Produces at ``rate``/s until stopped; ``delivered`` counts acknowledged events."""

    def __init__(self, settings, topic: str, rate: float) -> None:
        super().__init__(daemon=True)
        self.settings, self.topic, self.rate = settings, topic, rate
        self.stop = threading.Event()
        self.delivered = 0

    def run(self) -> None:
        from benchmarks.bench_ingest_e2e import _produce
        from lakebus_dagster.events import GeneratorConfig, day_range

        config = GeneratorConfig(count=int(self.rate * 7200), seed=41, days=day_range("2025-11-25", 1), users=2000)
        self.delivered = _produce(self.settings, self.topic, config, rate=self.rate, until=self.stop.is_set)


def log_phases(log: Path, since: float, connector: str) -> dict[str, float]:
    """Seconds from ``since`` (epoch) to the first line of each :data:`LOG_PHASES` pattern in ``log``."""
    from lakebus_dagster_tests.failover_kit import log_time

    found: dict[str, float] = {}
    patterns = {k: p.format(connector=connector) for k, p in LOG_PHASES.items()}
    with log.open(errors="replace") as f:
        for line in f:
            at = log_time(line)
            if at is None or at < since:
                continue
            for key, pattern in patterns.items():
                if key not in found and pattern in line:
                    found[key] = round(at - since, 1)
    return found


def _snapshots_after(catalog, tables: list[str], after_ms: int) -> list[int]:
    out = []
    for name in tables:
        if catalog.table_exists(name):
            out += [s.timestamp_ms for s in catalog.load_table(name).snapshots() if s.timestamp_ms > after_ms]
    return sorted(out)


class _GroupWatch(threading.Thread):
    """Samples the sink's consumer group every 0.5 s: when its members and their partitions change."""

    def __init__(self, settings, group: str) -> None:
        super().__init__(daemon=True)
        self.admin = AdminClient({"bootstrap.servers": settings.kafka.bootstrap_servers})
        self.group, self.stop = group, threading.Event()
        self.changes: list[tuple[float, str, tuple]] = []

    def run(self) -> None:
        last = None
        while not self.stop.is_set():
            try:
                g = self.admin.describe_consumer_groups([self.group])[self.group].result(timeout=5)
                now = (str(g.state), tuple(sorted((m.client_id.rsplit("-", 1)[-1], m.member_id[-4:],
                                                   tuple(sorted(tp.partition for tp in m.assignment.topic_partitions)))
                                                  for m in g.members)))
                if now != last:
                    self.changes.append((time.time(), *now))
                    last = now
            except Exception:  # noqa: BLE001 - a sample lost to a broker hiccup is no finding
                pass
            time.sleep(0.5)


#: how long the connector's assignment and its consumer group must stay unchanged before a kill: a
#: worker that just came back takes tasks over in a rebalance of its own, and a kill inside it measures
#: two failovers at once
SETTLE_S = 12.0


def _settle(settings, layout, catalog, settled, label: str, k: int) -> dict:
    """Wait until both tasks are RUNNING, the sink's consumer group is STABLE with one partition per
    member, neither changed for :data:`SETTLE_S`, and a snapshot was committed since."""
    admin = AdminClient({"bootstrap.servers": settings.kafka.bootstrap_servers})
    group = f"connect-{layout.connector_name}"
    deadline, since, last = time.monotonic() + 240, time.time(), None
    while time.monotonic() < deadline:
        st = settled()
        try:
            g = admin.describe_consumer_groups([group])[group].result(timeout=5)
            members = sorted(len(m.assignment.topic_partitions) for m in g.members)
            stable = str(g.state).endswith("STABLE") and members == [1] * layout.bus_topic.partitions
        except Exception:  # noqa: BLE001 - not described: not settled
            stable, members = False, []
        now = (st and tuple(sorted((t["id"], t["worker_id"]) for t in st["tasks"])), stable, tuple(members))
        if st is None or not stable or now != last:
            since, last = time.time(), now
        elif time.time() - since >= SETTLE_S and _snapshots_after(catalog, layout.tables, int(since * 1000)):
            return st
        time.sleep(1)
    raise RuntimeError(f"{label}: the sink did not settle before kill {k + 1}: {last}")


def failover(settings, layout, kills: int, rate: float, extra: dict[str, str], label: str) -> dict[str, object]:
    """``kills`` × kill -9 of the worker running task 0 (the sink's commit coordinator) while ``rate``
    events/s flow; for each, seconds from the kill to the first Iceberg snapshot committed after it, and the
    phases seen in the surviving worker's log and in the sink's consumer group. Every acked event must land
    exactly once. The killed worker comes back (``stack up``) once rows flow again, before the next kill."""
    from lakebus_dagster.bus.desired import sink_connector_config
    from lakebus_dagster.lake.catalog import load_catalog
    from lakebus_dagster_tests.lake_counts import committed_rows
    from lakebus_dagster.stack import manager, process
    from lakebus_dagster.stack.kafka_services import worker_name

    admin = AdminClient({"bootstrap.servers": settings.kafka.bootstrap_servers})
    for t in (layout.bus_topic, layout.control_topic, layout.dlq_topic):
        admin.create_topics([NewTopic(t.name, t.partitions, t.replication_factor, config=dict(t.configs))])[t.name].result(timeout=30)
    catalog = load_catalog(settings)
    urls = {worker_name(n): f"http://{settings.host}:{settings.connect_port(n)}" for n in (1, 2)}
    cfg = {**sink_connector_config(layout, settings.lake), **extra}
    requests.put(f"{urls['connect']}/connectors/{layout.connector_name}/config", json=cfg, timeout=30).raise_for_status()

    def status() -> dict | None:
        for u in urls.values():
            try:
                r = requests.get(f"{u}/connectors/{layout.connector_name}/status", timeout=5)
                if r.status_code == 200:
                    return r.json()
            except requests.RequestException:
                continue
        return None

    def settled() -> dict | None:
        st = status()
        tasks = (st or {}).get("tasks", [])
        return st if len(tasks) == 2 and all(t["state"] == "RUNNING" for t in tasks) else None

    producer = _Paced(settings, layout.bus_topic.name, rate)
    producer.start()
    seconds: list[float] = []
    phases: list[dict] = []
    try:
        for k in range(kills):
            st = _settle(settings, layout, catalog, settled, label, k)
            owner = next(t["worker_id"] for t in st["tasks"] if t["id"] == 0)
            number = next(n for n in (1, 2) if owner.endswith(f":{settings.connect_port(n)}"))
            victim, survivor = worker_name(number), worker_name(3 - number)
            watch = _GroupWatch(settings, f"connect-{layout.connector_name}")
            watch.start()
            proc = process.find_process(settings, victim)
            killed = time.time()
            proc.kill()
            proc.wait(30)
            while not (after := _snapshots_after(catalog, layout.tables, int(killed * 1000))):
                if time.time() - killed > 300:
                    raise RuntimeError(f"{label}: no snapshot {300}s after kill {k + 1}")
                time.sleep(0.5)
            first = after[0] / 1000 - killed
            watch.stop.set()
            watch.join(10)
            phase = {"kill": k + 1, "victim": victim, "first_snapshot_s": round(first, 1),
                     "tasks_on_victim": sorted(t["id"] for t in st["tasks"] if t["worker_id"] == owner),
                     **log_phases(process.log_file(settings, survivor), killed, layout.connector_name),
                     "sink_group": [(round(t - killed, 1), s, m) for t, s, m in watch.changes]}
            print(f"[bench_cluster_ingest] {label} kill {k + 1}: {json.dumps(phase)}", flush=True)
            seconds.append(first)
            phases.append(phase)
            manager.up(settings)  # the killed worker comes back, as an operator brings it back
        producer.stop.set()
        producer.join(120)
        deadline = time.monotonic() + 300
        while committed_rows(catalog, *layout.tables) < producer.delivered and time.monotonic() < deadline:
            time.sleep(1)
        landed = committed_rows(catalog, *layout.tables)
        offsets = set()
        for name in layout.tables:
            rows = catalog.load_table(name).scan(selected_fields=("_kafka_partition", "_kafka_offset")).to_arrow()
            offsets |= set(zip(rows.column("_kafka_partition").to_pylist(), rows.column("_kafka_offset").to_pylist()))
        ordered = sorted(seconds)
        return {
            f"{label}_kills": kills,
            f"{label}_first_rows_p50_s": ordered[len(ordered) // 2],
            f"{label}_first_rows_p95_s": ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)],
            f"{label}_first_rows_max_s": ordered[-1],
            f"{label}_first_rows_s": [round(s, 1) for s in seconds],
            f"{label}_acked": producer.delivered,
            f"{label}_rows": landed,
            f"{label}_distinct_offsets": len(offsets),
            f"{label}_phases": phases,
        }
    finally:
        producer.stop.set()
        manager.up(settings)  # a kill interrupted midway leaves no worker down for the cleanup


if __name__ == "__main__":
    main(sys.argv)
