"""End to end ingest: events/s landed in Iceberg and freshness (produced -> row visible), seed vs tuned.

Sink configurations read the same generated events on the single-node stack, one after the other
(never at once: the machine has two cores), each from its own bus topic into its own namespace,
with everything else as provisioning configures it (strict door, provenance columns):

* **seed** - the seed's connector settings (1 partition, ``tasks.max=1``, ``max.poll.records=500``,
  10 s commit interval, consumer fetch defaults) on the stack's Connect worker as it runs;
* **seedwake** - the same connector on a benchmark-owned Connect worker (:class:`BenchWorker`, the
  stack's jars and config, its own group, internal topics and port) with the tuned worker setting
  ``offset.flush.interval.ms=1000``: separates the worker's share of the gain;
* **tuned** - lakebus's defaults (``SinkTuning()``) on that worker; **tuned5s** - with 5 s commits.

Each configuration runs two phases:

1. **throughput** - ``n`` events are produced into the bus topic *before* the connector starts
   (a backlog: the sink, not the producer, is the limit); landed events/s = ``n`` / (time from
   every task RUNNING until the tables' current snapshots hold ``n`` rows, polled every 0.25 s).
2. **freshness** - with the connector caught up, ``rate`` events/s are produced for
   ``duration_s`` seconds (paced in 50 ms slices). A row's freshness is the commit time of the
   Iceberg snapshot that added its data file (``snapshot.timestamp_ms``) minus the row's
   ``_kafka_timestamp`` (the record's CreateTime, set by the producer when the event was sent):
   "produced" to "visible to a reader". Data files are mapped to snapshots through the manifest
   entries (``inspect.entries``) and each added file's ``_kafka_timestamp`` column is read.

   To measure a live bus, the same rate continues (unmeasured) until the measured rows are
   certainly committed: an idle task would otherwise add its wake-up wait (see BENCHMARKS.md).

Optionally (``profile=True``) a Java Flight Recorder recording of the Connect JVM covers each
throughput phase (``jcmd <pid> JFR.start``; :func:`jfr_top` summarises its execution samples by
thread and component) and :class:`ThreadDumpSampler` takes wall-clock thread dumps of the sink task.

    python -m benchmarks bench_ingest_e2e                        (needs the local stack)
    python -m benchmarks.bench_ingest_e2e [n] [rate] [duration_s] [--profile]
"""

from __future__ import annotations

import collections
import json
import math
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow.parquet as pq
import requests
from confluent_kafka.admin import AdminClient, NewTopic

from lakebus_dagster.bus.desired import sink_connector_config
from lakebus_dagster.bus.layout import BusLayout, SinkTuning
from lakebus_dagster.events import EventProducer, GeneratorConfig, day_range, generate_events
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster_tests.cleanup import remove_layouts
from lakebus_dagster_tests.lake_counts import committed_rows
from lakebus_dagster.settings import REPO_ROOT, Settings, load_local_secrets
from lakebus_dagster.stack.local_settings import load_stack_settings

#: the seed's connector settings (../shared/seeds/000_*.txt: tasks.max 1, max.poll.records 500, 10 s commits)
SEED_TUNING = SinkTuning(tasks_max=1, max_poll_records=500, commit_interval_ms=10_000, commit_timeout_ms=30_000)
#: consumer settings the seed leaves at Kafka's defaults (removed from the seed run's config)
CONSUMER_TUNING_KEYS = ("fetch.min.bytes", "fetch.max.wait.ms", "max.partition.fetch.bytes", "fetch.max.bytes")
#: the bus topic of the tuned run: one partition, one task (2 tasks measured slower and +50 % CPU/event here)
TUNED_PARTITIONS = 1


@dataclass(frozen=True)
class Variant:
    name: str
    partitions: int
    tuning: SinkTuning
    #: extra connector config on top of sink_connector_config (exploration; empty for the shipped runs)
    extra: tuple[tuple[str, str], ...] = ()
    seed_consumer: bool = False
    #: run on a benchmark-owned Connect worker with this offset.flush.interval.ms (None: the stack's worker)
    worker_flush_ms: int | None = None


def variants() -> list[Variant]:
    return [
        Variant("seed", 1, SEED_TUNING, seed_consumer=True),
        # the seed's connector on the tuned worker: separates the worker's share of the gain from the connector's
        Variant("seedwake", 1, SEED_TUNING, seed_consumer=True, worker_flush_ms=TUNED_OFFSET_FLUSH_MS),
        Variant("tuned", TUNED_PARTITIONS, SinkTuning(), worker_flush_ms=TUNED_OFFSET_FLUSH_MS),
        # the same with 5 s commits: what a shorter interval buys (and costs: twice the commits and files)
        Variant("tuned5s", TUNED_PARTITIONS, SinkTuning(commit_interval_ms=5000),
                worker_flush_ms=TUNED_OFFSET_FLUSH_MS),
    ]


def _layout(base: BusLayout, tag: str, v: Variant) -> BusLayout:
    ns = f"bench_e2e_{v.name}_{tag}"
    return replace(
        base,
        bus_topic=replace(base.bus_topic, name=f"{base.bus_topic.name}-{v.name}", partitions=v.partitions),
        control_topic=replace(base.control_topic, name=f"{base.control_topic.name}-{v.name}"),
        dlq_topic=replace(base.dlq_topic, name=f"{base.dlq_topic.name}-{v.name}"),
        connector_name=f"{base.connector_name}-{v.name}",
        routes={e: f"{ns}.{t.split('.', 1)[1]}" for e, t in base.routes.items()},
        tuning=v.tuning,
    )


def connector_config(layout: BusLayout, settings: Settings, v: Variant) -> dict[str, str]:
    cfg = sink_connector_config(layout, settings.lake)
    if v.seed_consumer:
        for key in CONSUMER_TUNING_KEYS:
            cfg.pop(f"consumer.override.{key}", None)
    cfg.update(dict(v.extra))
    return cfg


def _wait_rows(catalog, tables: list[str], n: int, what: str, timeout: float) -> float:
    """Poll until the tables hold ``n`` rows; the monotonic time it was first seen. More than ``n`` is an error."""
    deadline = time.monotonic() + timeout
    while (landed := committed_rows(catalog, *tables)) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: only {landed}/{n} rows after {timeout:.0f}s")
        time.sleep(0.25)
    seen = time.monotonic()
    if landed != n:
        raise RuntimeError(f"{what}: {landed} rows, expected exactly {n}")
    return seen


def _wait_running(url: str, name: str, tasks: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        resp = requests.get(f"{url}/status", timeout=10)
        st = resp.json().get("tasks", []) if resp.status_code == 200 else []
        if len(st) == tasks and all(t["state"] == "RUNNING" for t in st):
            return
        if any(t["state"] == "FAILED" for t in st) or time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not get {tasks} task(s) RUNNING: {resp.text[:2000]}")
        time.sleep(0.2)


def _produce(settings: Settings, topic: str, config: GeneratorConfig, rate: float | None = None,
             until: Callable[[], bool] | None = None) -> int:
    """Produce ``config``'s events, paced at ``rate``/s (50 ms slices) when given, stopping early once
    ``until()`` is true (checked every second). Returns how many were acknowledged."""
    slice_s = 0.05
    with EventProducer(topic, {"bootstrap.servers": settings.kafka.bootstrap_servers, "linger.ms": 5 if rate else 20}) as producer:
        start = last_check = time.monotonic()
        for i, event in enumerate(generate_events(config)):
            if rate and i % max(1, int(rate * slice_s)) == 0:
                due = start + i / rate
                if (ahead := due - time.monotonic()) > 0:
                    time.sleep(ahead)
                if until is not None and time.monotonic() - last_check >= 1.0:
                    last_check = time.monotonic()
                    if until():
                        break
            producer.send(event)
    return producer.delivered


def freshness_ms(catalog, tables: list[str], since_ms: int, until_ms: int, live_until_ms: int) -> tuple[list[int], int]:
    """Per row produced in [``since_ms``, ``until_ms``): commit time of the snapshot that added its data
    file minus its CreateTime; and how many of those rows were committed after ``live_until_ms``."""
    out: list[int] = []
    late = 0
    for name in tables:
        table = catalog.load_table(name)
        committed = {s.snapshot_id: s.timestamp_ms for s in table.snapshots()}
        for entry in table.inspect.entries().to_pylist():
            if entry["status"] != 1:  # 1 = ADDED
                continue
            visible = committed[entry["snapshot_id"]]
            with table.io.new_input(entry["data_file"]["file_path"]).open() as fh:
                produced_ms = pq.read_table(fh, columns=["_kafka_timestamp"]).column(0).to_pylist()
            for produced in produced_ms:
                if since_ms <= produced < until_ms:
                    out.append(visible - produced)
                    late += visible > live_until_ms
    return out, late


def _pct(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)] / 1000.0


# -- profiling ------------------------------------------------------------------------------------
def connect_pid(settings: Settings) -> int:
    return int((settings.run_dir / "connect.pid").read_text().strip())


def cpu_seconds(pid: int) -> float:
    """User + system CPU the process has used so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def jfr_start(pid: int, name: str) -> None:
    subprocess.run(["jcmd", str(pid), "JFR.start", f"name={name}", "settings=profile"], check=True, capture_output=True)


def jfr_stop(pid: int, name: str, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["jcmd", str(pid), "JFR.stop", f"name={name}", f"filename={path}"], check=True, capture_output=True)
    return path


_BUCKETS = (
    ("lakebus door (StrictJsonConverter/RegistryGuard)", ("io.lakebus.connect.StrictJsonConverter",
                                                          "io.lakebus.connect.StrictPayloadValidator",
                                                          "io.lakebus.connect.RegistryGuard")),
    ("provenance transform (KafkaMetadataTransform)", ("org.apache.iceberg.connect.transforms",)),
    ("Kafka JsonConverter / Jackson", ("org.apache.kafka.connect.json", "com.fasterxml.jackson")),
    ("Iceberg record conversion (RecordConverter)", ("org.apache.iceberg.connect.data.RecordConverter",)),
    ("Parquet write + ZSTD", ("org.apache.parquet", "org.apache.iceberg.parquet", "com.github.luben.zstd", "io.airlift")),
    ("Kafka consumer fetch/decompress", ("org.apache.kafka.clients.consumer", "org.apache.kafka.common.record",
                                          "org.apache.kafka.common.compress")),
    ("S3 upload / HTTP", ("software.amazon", "org.apache.iceberg.aws", "org.apache.http", "org.apache.hc")),
    ("Iceberg commit / catalog", ("org.apache.iceberg.connect.channel", "org.apache.iceberg.rest", "org.apache.iceberg.BaseTransaction",
                                  "org.apache.iceberg.SnapshotProducer")),
)


def jfr_top(path: Path, top: int = 12) -> dict[str, object]:
    """Execution samples of the recording: share by thread, by component (any frame of the stack), by top frame."""
    out = subprocess.run(["jfr", "print", "--json", "--events", "jdk.ExecutionSample", str(path)],
                         check=True, capture_output=True, text=True).stdout
    events = json.loads(out)["recording"]["events"]
    threads: collections.Counter = collections.Counter()
    buckets: collections.Counter = collections.Counter()
    frames: collections.Counter = collections.Counter()
    for ev in events:
        values = ev["values"]
        thread = (values.get("sampledThread") or {}).get("javaName") or "?"
        threads[thread.split("|")[0][:60]] += 1
        stack = [f["method"]["type"]["name"].replace("/", ".") + "." + f["method"]["name"] for f in (values.get("stackTrace") or {}).get("frames", [])]
        if stack:
            frames[stack[0]] += 1
        for label, prefixes in _BUCKETS:
            if any(s.startswith(prefixes) for s in stack):
                buckets[label] += 1
    total = max(1, len(events))
    pct = lambda c: {k: round(100 * v / total, 1) for k, v in c.most_common(top)}  # noqa: E731
    return {"samples": len(events), "threads_pct": pct(threads), "components_pct": pct(buckets), "top_frames_pct": pct(frames)}


class ThreadDumpSampler:
    """``jcmd <pid> Thread.print`` every ``interval`` s; counts, per sink task thread, the state and the
    component its stack is in (wall clock: a blocked or waiting thread is counted too, unlike CPU samples)."""

    def __init__(self, pid: int, thread_prefix: str, interval: float = 0.5) -> None:
        import threading

        self.pid, self.prefix, self.interval = pid, thread_prefix, interval
        self.states: collections.Counter = collections.Counter()
        self.where: collections.Counter = collections.Counter()
        self.frames: collections.Counter = collections.Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "ThreadDumpSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            out = subprocess.run(["jcmd", str(self.pid), "Thread.print"], capture_output=True, text=True).stdout
            for block in out.split("\n\n"):
                if not block.startswith(f'"{self.prefix}'):
                    continue
                lines = block.splitlines()
                state = next((ln.split(":", 1)[1].strip().split()[0] for ln in lines if "java.lang.Thread.State" in ln), "?")
                stack = [ln.strip()[3:].split("(")[0] for ln in lines if ln.strip().startswith("at ")]
                self.samples += 1
                self.states[state] += 1
                self.where[_component(stack, state)] += 1
                if stack:
                    # the innermost frame and the innermost Connect / Iceberg frame that called it
                    caller = next((f for f in stack if f.startswith(_CALLERS)), "")
                    short = lambda f: ".".join(f.rsplit(".", 2)[-2:])  # noqa: E731
                    self.frames[f"{short(stack[0])} in {short(caller)}"] += 1

    def summary(self, top: int = 8) -> dict[str, object]:
        n = max(1, self.samples)
        pct = lambda c: {k: round(100 * v / n, 1) for k, v in c.most_common(top)}  # noqa: E731
        return {"samples": self.samples, "state_pct": pct(self.states), "component_pct": pct(self.where), "top_pct": pct(self.frames)}


#: the frames that say which loop a wait belongs to (the sink task's poll vs the Iceberg control channel)
_CALLERS = ("org.apache.iceberg.connect", "org.apache.kafka.connect.runtime.WorkerSinkTask", "io.lakebus")

#: first match wins, innermost component first
_COMPONENTS = (
    ("Iceberg commit: waiting for the coordinator / control topic", ("org.apache.iceberg.connect.channel",)),
    ("Parquet write + ZSTD", ("org.apache.parquet", "org.apache.iceberg.parquet", "com.github.luben.zstd", "io.airlift")),
    ("S3 upload", ("software.amazon", "org.apache.iceberg.aws")),
    ("Iceberg record conversion", ("org.apache.iceberg.connect.data",)),
    ("lakebus door (StrictJsonConverter / RegistryGuard)", ("lakebus", "io.lakebus", "dev.lakebus")),
    ("JsonConverter / Jackson", ("org.apache.kafka.connect.json", "com.fasterxml.jackson")),
    ("Kafka consumer poll (fetch, decompress)", ("org.apache.kafka.clients.consumer", "org.apache.kafka.common")),
)


def _component(stack: list[str], state: str) -> str:
    for frame in stack:
        for label, prefixes in _COMPONENTS:
            if frame.startswith(prefixes):
                return label
    return f"other ({state})"


# -- a benchmark-owned Connect worker --------------------------------------------------------------
#: the worker setting that bounds an idle sink task's wake-up (WorkerSinkTask polls for at most the time
#: to its next offset flush); the stack's worker uses 10 s, Kafka's default is 60 s
TUNED_OFFSET_FLUSH_MS = 1000
BENCH_CONNECT_PORT = 18083


class BenchWorker:
    """A second Connect worker for the tuned run: the stack's own jars, plugins and config, its own group,
    internal topics and REST port, and ``offset.flush.interval.ms`` as given. The shared worker is left alone."""

    def __init__(self, settings: Settings, tag: str, offset_flush_ms: int, port: int = BENCH_CONNECT_PORT) -> None:
        self.settings, self.tag, self.flush_ms, self.port = settings, tag, offset_flush_ms, port
        self.url = f"http://{settings.host}:{port}"
        self.dir = REPO_ROOT / "build" / f"bench-connect-{tag}"
        self.proc: subprocess.Popen | None = None

    @property
    def internal_topics(self) -> list[str]:
        return [f"_bench-connect-{self.tag}-{k}" for k in ("configs", "offsets", "status")]

    def __enter__(self) -> "BenchWorker":
        from lakebus_dagster.stack.jars import jars_dir
        from lakebus_dagster.stack.manager import find_java
        from lakebus_dagster.stack.services import build_services

        stack_props = self.settings.run_dir / "connect-distributed.properties"
        props = dict(line.split("=", 1) for line in stack_props.read_text().splitlines() if "=" in line and not line.startswith("#"))
        configs, offsets, status = self.internal_topics
        props.update({
            "group.id": f"lakebus-bench-connect-{self.tag}", "listeners": f"http://{self.settings.host}:{self.port}",
            "rest.advertised.port": str(self.port), "config.storage.topic": configs, "offset.storage.topic": offsets,
            "status.storage.topic": status, "offset.flush.interval.ms": str(self.flush_ms),
        })
        self.dir.mkdir(parents=True, exist_ok=True)
        worker_props = self.dir / "worker.properties"  # no spaces: the Iceberg sink re-reads it from sun.java.command
        worker_props.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        connect = next(svc for svc in build_services(self.settings, jars_dir(self.settings), find_java()) if svc.name == "connect")
        argv = connect.argv(self.settings, jars_dir(self.settings), find_java(), markers=[])
        argv[-1] = str(worker_props)
        env = {**os.environ, **connect.env}
        self.log = (self.dir / "connect.log").open("ab")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + 240
        while True:
            try:
                if requests.get(f"{self.url}/connector-plugins", timeout=2).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError(f"benchmark Connect worker did not start; see {self.dir / 'connect.log'}")
            time.sleep(1)

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()
        admin = AdminClient({"bootstrap.servers": self.settings.kafka.bootstrap_servers})
        existing = set(admin.list_topics(timeout=30).topics)
        doomed = [t for t in self.internal_topics if t in existing]
        for future in (admin.delete_topics(doomed, operation_timeout=30).values() if doomed else []):
            future.result(timeout=30)


# -- the run --------------------------------------------------------------------------------------


def run_variant(settings: Settings, layout: BusLayout, v: Variant, n: int, rate: float, duration_s: float,
                profile: bool, tag: str, connect_url: str, pid: int) -> dict[str, float]:
    admin = AdminClient({"bootstrap.servers": settings.kafka.bootstrap_servers})
    for t in (layout.bus_topic, layout.control_topic, layout.dlq_topic):
        admin.create_topics([NewTopic(t.name, t.partitions, t.replication_factor, config=dict(t.configs))])[t.name].result(timeout=30)
    delivered = _produce(settings, layout.bus_topic.name, GeneratorConfig(count=n, seed=31, days=day_range("2025-11-25", 1), users=2000))
    assert delivered == n, delivered
    catalog = load_catalog(settings)
    url = f"{connect_url}/connectors/{layout.connector_name}"
    cfg = connector_config(layout, settings, v)
    load_before = os.getloadavg()[0]
    requests.put(f"{url}/config", json=cfg, timeout=30).raise_for_status()
    _wait_running(url, layout.connector_name, int(cfg["tasks.max"]))
    if profile:
        jfr_start(pid, f"lakebus-{v.name}")
    sampler = ThreadDumpSampler(pid, f"task-thread-{layout.connector_name}-")
    cpu0, start = cpu_seconds(pid), time.monotonic()
    if profile:
        with sampler:
            seen = _wait_rows(catalog, layout.tables, n, f"{v.name} backlog", timeout=900)
        print(f"[bench_ingest_e2e] {v.name} task threads, sampled dumps: {json.dumps(sampler.summary(), indent=1)}", flush=True)
    else:
        seen = _wait_rows(catalog, layout.tables, n, f"{v.name} backlog", timeout=900)
    cpu = cpu_seconds(pid) - cpu0
    throughput = n / (seen - start)
    result: dict[str, float] = {
        f"{v.name}_events_per_s": throughput,
        f"{v.name}_backlog_s": seen - start,
        # CPU of the whole Connect JVM while the backlog landed (other connectors on the worker included)
        f"{v.name}_connect_cpu_us_per_event": cpu / n * 1e6,
        f"{v.name}_connect_cpu_cores": cpu / (seen - start),
    }
    if profile:
        rec = jfr_stop(pid, f"lakebus-{v.name}", REPO_ROOT / "build" / f"jfr-ingest-{v.name}-{tag}.jfr")
        summary = jfr_top(rec)
        print(f"[bench_ingest_e2e] {v.name} profile ({rec}): {json.dumps(summary, indent=1)}", flush=True)
        result[f"{v.name}_jfr_samples"] = summary["samples"]
    print(f"[bench_ingest_e2e] {v.name}: {n} events landed in {seen - start:.2f}s = {throughput:,.0f}/s, "
          f"Connect JVM {cpu / n * 1e6:.1f} CPU-us/event, {cpu / (seen - start):.2f} cores "
          f"(load {load_before:.2f} -> {os.getloadavg()[0]:.2f})", flush=True)
    if duration_s <= 0:
        requests.delete(url, timeout=30)
        return result

    # freshness on a live bus: ``m`` measured events at ``rate``/s, then a trickle at the same rate (other
    # events, not measured) until the measured ones have certainly been committed, so no measured event
    # waits on an idle task (see BENCHMARKS.md: an idle sink task wakes only every offset.flush.interval.ms)
    interval_s = layout.tuning.commit_interval_ms / 1000
    since_ms = int(time.time() * 1000)
    m = int(rate * duration_s)
    days = day_range("2025-11-25", 1)
    delivered = _produce(settings, layout.bus_topic.name,
                         GeneratorConfig(count=m, seed=32, days=days, users=2000, first_order_id=10_000_001), rate=rate)
    assert delivered == m, delivered
    until_ms = int(time.time() * 1000)
    reached: list[float] = []

    def measured_committed() -> bool:
        if not reached and committed_rows(catalog, *layout.tables) >= n + m:
            reached.append(time.monotonic())
        return bool(reached) and time.monotonic() - reached[0] > 1.5 * interval_s + 5

    trickle = _produce(settings, layout.bus_topic.name,
                       GeneratorConfig(count=int(rate * 600), seed=33, days=days, users=2000, first_order_id=20_000_001),
                       rate=rate, until=measured_committed)
    trickle_end_ms = int(time.time() * 1000)
    _wait_rows(catalog, layout.tables, n + m + trickle, f"{v.name} freshness", timeout=300)
    fresh, late = freshness_ms(catalog, layout.tables, since_ms, until_ms, trickle_end_ms)
    if len(fresh) != m:
        raise RuntimeError(f"{v.name}: {len(fresh)} rows produced in the measured window, expected {m}")
    result.update({
        f"{v.name}_freshness_rows_committed_after_trickle": late,
        f"{v.name}_freshness_p50_s": _pct(fresh, 0.50),
        f"{v.name}_freshness_p95_s": _pct(fresh, 0.95),
        f"{v.name}_freshness_max_s": max(fresh) / 1000,
        f"{v.name}_commit_interval_s": interval_s,
        f"{v.name}_p95_minus_interval_s": _pct(fresh, 0.95) - interval_s,
    })
    print(f"[bench_ingest_e2e] {v.name}: freshness at {rate:,.0f}/s for {duration_s:.0f}s: p50 {_pct(fresh, .5):.2f}s "
          f"p95 {_pct(fresh, .95):.2f}s max {max(fresh) / 1000:.2f}s (commit interval {interval_s:g}s)", flush=True)
    requests.delete(url, timeout=30)
    return result


def run(n: int = 300_000, rate: float = 2000.0, duration_s: float = 40.0, profile: bool = False,
        only: tuple[Variant, ...] | None = None) -> dict[str, float]:
    settings = load_stack_settings()
    load_local_secrets(settings)
    tag = uuid.uuid4().hex[:6]
    base = BusLayout.default().with_suffix(f"e2e{tag}")
    chosen = list(only) if only else variants()
    layouts = [_layout(base, tag, v) for v in chosen]
    results: dict[str, float] = {"events": n, "freshness_rate_per_s": rate, "freshness_duration_s": duration_s,
                                 "load_1min_at_start": os.getloadavg()[0]}
    workers: dict[int, BenchWorker] = {}
    try:
        for layout, v in zip(layouts, chosen):
            if v.worker_flush_ms is None:
                connect_url, pid = settings.connect.urls[0], connect_pid(settings)
            else:
                if v.worker_flush_ms not in workers:
                    workers[v.worker_flush_ms] = BenchWorker(settings, f"{tag}-{v.worker_flush_ms}", v.worker_flush_ms).__enter__()
                worker = workers[v.worker_flush_ms]
                connect_url, pid = worker.url, worker.proc.pid
            results.update(run_variant(settings, layout, v, n, rate, duration_s, profile, tag, connect_url, pid))
        if {"seed", "tuned"} <= {v.name for v in chosen}:
            for v in chosen:
                if v.name != "seed":
                    results[f"{v.name}_vs_seed_ratio"] = results[f"{v.name}_events_per_s"] / results["seed_events_per_s"]
        results["load_1min_at_end"] = os.getloadavg()[0]
        return results
    finally:
        for worker in workers.values():
            for layout in layouts:
                try:
                    requests.delete(f"{worker.url}/connectors/{layout.connector_name}", timeout=30)
                except requests.RequestException:
                    pass
            worker.__exit__()
        remove_layouts(settings, layouts)


def main(argv: list[str]) -> None:
    args = [a for a in argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 300_000
    rate = float(args[1]) if len(args) > 1 else 2000.0
    duration = float(args[2]) if len(args) > 2 else 40.0
    print(json.dumps(run(n, rate, duration, profile="--profile" in argv), indent=1))


if __name__ == "__main__":
    main(sys.argv)
