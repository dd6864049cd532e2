"""What lakebus's strict door and provenance columns cost the sink, measured in one run.

The same ``n`` generated events are produced once into one topic; then sink connectors read that
topic one after the other (never at the same time: the machine has two cores), each into its own
namespace: **bare** (Kafka's ``JsonConverter``, no guard, no provenance transform: the seed's
sink), **plain** (no door, with provenance) and **door** (lakebus's converter, guard and provenance
exactly as provisioning configures them). Runs rotate bare, plain, door, ... and medians are
reported; every run's Parquet bytes/event are read from the files the real sink wrote.

Throughput = ``n`` / (time from the task being RUNNING until the tables' snapshots hold ``n``
rows). Commits every 2 s, so each run carries up to ~2 s of commit-interval granularity on both
sides; ``n`` is large enough to make that small. Targets (issue 10): door (with provenance) >= 0.85x
bare, and <= 1 percentage point more Parquet bytes/event relative to the envelope.

    python -m benchmarks bench_sink_door      (needs the local stack with the lakebus plugin)
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from dataclasses import replace

import requests
from confluent_kafka.admin import AdminClient

from lakebus_dagster.bus.desired import sink_connector_config
from lakebus_dagster.bus.door import GUARD_ALIAS
from lakebus_dagster.bus.provenance import PROVENANCE_ALIAS
from lakebus_dagster.bus.layout import BusLayout, SinkTuning, TopicSpec
from lakebus_dagster.events import EventProducer, GeneratorConfig, day_range, generate_events
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster_tests.cleanup import remove_layouts
from lakebus_dagster_tests.lake_counts import committed_rows
from lakebus_dagster.settings import Settings, load_local_secrets
from lakebus_dagster.stack.local_settings import load_stack_settings

PLAIN_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
TUNING = SinkTuning(commit_interval_ms=2000, commit_timeout_ms=30000)


def without_transform(cfg: dict[str, str], alias: str) -> dict[str, str]:
    """The same connector config without the transform ``alias`` (its keys and its place in the chain)."""
    out = {k: v for k, v in cfg.items() if not k.startswith(f"transforms.{alias}.")}
    chain = [a for a in cfg.get("transforms", "").split(",") if a and a != alias]
    if chain:
        out["transforms"] = ",".join(chain)
    else:
        out.pop("transforms", None)
    return out


def without_door(cfg: dict[str, str]) -> dict[str, str]:
    """The same connector config with Kafka's JsonConverter and no guard transform."""
    return {**without_transform(cfg, GUARD_ALIAS), "value.converter": PLAIN_CONVERTER}


def without_provenance(cfg: dict[str, str]) -> dict[str, str]:
    """The same connector config without the provenance transform (no ``_kafka_*`` columns)."""
    return without_transform(cfg, PROVENANCE_ALIAS)


def _parquet_bytes(catalog, tables: list[str]) -> int:
    """Bytes of every data file the sink wrote into ``tables`` (their current snapshots)."""
    return sum(task.file.file_size_in_bytes for name in tables for task in catalog.load_table(name).scan().plan_files())


def _run_once(settings: Settings, layout: BusLayout, cfg: dict[str, str], n: int, timeout: float = 600) -> float:
    url = f"{settings.connect.urls[0]}/connectors/{layout.connector_name}"
    catalog = load_catalog(settings)
    resp = requests.put(f"{url}/config", json=cfg, timeout=30)
    resp.raise_for_status()
    try:
        deadline = time.monotonic() + 120
        while True:
            status = requests.get(f"{url}/status", timeout=10)
            tasks = status.json().get("tasks", []) if status.status_code == 200 else []
            if tasks and all(t["state"] == "RUNNING" for t in tasks):
                break
            if any(t["state"] == "FAILED" for t in tasks) or time.monotonic() > deadline:
                raise RuntimeError(f"{layout.connector_name} did not start: {status.text[:2000]}")
            time.sleep(0.2)
        start = time.monotonic()
        deadline = start + timeout
        while (landed := committed_rows(catalog, *layout.tables)) < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{layout.connector_name}: only {landed}/{n} rows after {timeout:.0f}s")
            time.sleep(0.25)
        elapsed = time.monotonic() - start
        if landed != n:
            raise RuntimeError(f"{layout.connector_name}: {landed} rows, expected {n}")
        return elapsed
    finally:
        requests.delete(url, timeout=30)




def run(n: int = 60_000, repeats: int = 2) -> dict[str, float]:
    settings = load_stack_settings()
    load_local_secrets(settings)
    tag = uuid.uuid4().hex[:6]
    base = replace(BusLayout.default().with_suffix(f"bench{tag}"), tuning=TUNING)
    admin = AdminClient({"bootstrap.servers": settings.kafka.bootstrap_servers})
    from confluent_kafka.admin import NewTopic

    shared: list[TopicSpec] = [base.bus_topic, base.control_topic, base.dlq_topic]
    for _, fut in admin.create_topics([NewTopic(t.name, t.partitions, t.replication_factor, config=dict(t.configs))
                                       for t in shared]).items():
        fut.result(timeout=30)
    layouts: list[BusLayout] = []
    topics = [t.name for t in shared]
    try:
        events = list(generate_events(GeneratorConfig(count=n, seed=21, days=day_range("2025-11-25", 1), users=500)))
        from lakebus_dagster.events import EnvelopeEncoder

        encoder = EnvelopeEncoder()
        envelope_bytes = sum(len(encoder.encode(e)) for e in events) / n
        with EventProducer(base.bus_topic.name, {"bootstrap.servers": settings.kafka.bootstrap_servers}) as producer:
            for e in events:
                producer.send(e)
        assert producer.delivered == n, producer.delivered

        times: dict[str, list[float]] = {"bare": [], "plain": [], "door": []}
        sizes: dict[str, list[float]] = {"bare": [], "plain": [], "door": []}
        order = ["bare", "plain", "door"]
        for i in range(repeats * 3):
            kind = order[(i + i // 3) % 3]  # bare, plain, door, plain, door, bare, ...
            ns = f"bench_{kind}_{tag}_{i}"
            layout = replace(base, connector_name=f"{base.connector_name}-{kind}-{i}",
                             control_topic=replace(base.control_topic, name=f"{base.control_topic.name}-{i}"),
                             routes={e: f"{ns}.{t.split('.', 1)[1]}" for e, t in base.routes.items()})
            admin.create_topics([NewTopic(layout.control_topic.name, 1, 1)])[layout.control_topic.name].result(timeout=30)
            topics.append(layout.control_topic.name)
            layouts.append(layout)
            cfg = sink_connector_config(layout, settings.lake)
            if kind in ("plain", "bare"):
                cfg = without_door(cfg)
            if kind == "bare":
                cfg = without_provenance(cfg)
            elapsed = _run_once(settings, layout, cfg, n)
            times[kind].append(elapsed)
            sizes[kind].append(_parquet_bytes(load_catalog(settings), layout.tables) / n)
            print(f"[bench_sink_door] {kind:<5} run {i}: {n} events in {elapsed:.2f}s = {n / elapsed:,.0f}/s, "
                  f"{sizes[kind][-1]:.2f} Parquet B/event", flush=True)
        t = {k: statistics.median(v) for k, v in times.items()}
        b = {k: statistics.median(v) for k, v in sizes.items()}
        return {
            "events": n,
            "envelope_bytes_per_event": envelope_bytes,
            **{f"{k}_events_per_s": n / t[k] for k in t},
            **{f"{k}_parquet_bytes_per_event": b[k] for k in b},
            "door_vs_plain_ratio": t["plain"] / t["door"],
            "lakebus_vs_bare_ratio": t["bare"] / t["door"],
            "lakebus_vs_bare_bytes_pp": (b["door"] - b["bare"]) / envelope_bytes * 100,
        }
    finally:
        remove_layouts(settings, layouts, topics)


def main(argv: list[str]) -> None:
    n = int(argv[1]) if len(argv) > 1 else 60_000
    print(run(n))


if __name__ == "__main__":
    main(sys.argv)
