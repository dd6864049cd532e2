"""The Iceberg sink against a plain writer of the same files: how close to the hardware ingest runs.

The sink's throughput means little alone: 2,000 events/s can be 10 % or 90 % of what two cores can
write. The baseline here is the simplest writer that produces the same tables: one Python process
that reads the same backlog from Kafka (confluent-kafka, from the earliest offset), decodes each
Schema+JSON envelope, routes it by its ``event`` field, adds the four provenance columns the sink
adds (``_kafka_topic``/``_partition``/``_offset``/``_timestamp``), and every commit interval appends
one Arrow table per event type through pyiceberg — Parquet with ZSTD, the same schema, partition
spec and table properties as the tables the sink created. It has none of the sink's guarantees (no
transactions, no coordinator, no strict door, no DLQ): it is the cost of the bytes alone.

Per round, on the single-node stack (``lakebus stack up``), one after the other (two cores):

1. ``n`` events are produced into a fresh bus topic of one partition (a backlog);
2. **sink**: the shipped connector (``SinkTuning()``, one task) on the stack's Connect worker lands
   the backlog: events/s from every task RUNNING until the tables hold ``n`` rows, and the Connect
   JVM's CPU meanwhile (:func:`benchmarks.bench_ingest_e2e.run_variant`);
3. **raw**: the plain writer reads the same topic into tables of its own namespace with the same
   commit interval: events/s from its first poll until its last commit, and its own CPU
   (process-wide, pyarrow's threads included).

The tables of both are checked to hold exactly ``n`` rows with ``n`` distinct offsets. Reported per
round and as the median over rounds: events/s and CPU-µs per event of each, data files and bytes
written, and ``sink_vs_raw_ratio`` (sink events/s over raw events/s).

    python -m benchmarks bench_raw_writer                      (needs the local stack)
    python -m benchmarks.bench_raw_writer [n] [rounds]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import uuid
from collections import defaultdict

import pyarrow as pa
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from pyiceberg.catalog import Catalog

from benchmarks.bench_ingest_e2e import Variant, _layout, connect_pid, run_variant
from lakebus_dagster.bus.layout import BusLayout, SinkTuning
from lakebus_dagster.bus.provenance import OFFSET_COLUMN, PARTITION_COLUMN, TIMESTAMP_COLUMN, TOPIC_COLUMN
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.settings import AWS_SDK_ENV, Settings, load_local_secrets
from lakebus_dagster.stack.local_settings import load_stack_settings
from lakebus_dagster_tests.cleanup import remove_layouts
from lakebus_dagster_tests.lake_counts import committed_rows

#: the shipped sink on the stack's own worker: the baseline's opponent
SHIPPED = Variant("shipped", 1, SinkTuning())
#: records per poll of the plain writer (confluent-kafka's consume batch)
POLL_BATCH = 10_000


def _like_sink_tables(catalog: Catalog, layout: BusLayout, namespace: str) -> dict[str, str]:
    """``{event: table}`` in ``namespace``: each a new table with the schema, partition spec, sort order
    and properties of the table the sink created for that event (Parquet, ZSTD, the same bounds)."""
    catalog.create_namespace_if_not_exists(namespace)
    out = {}
    for event, name in layout.routes.items():
        source = catalog.load_table(name)
        target = f"{namespace}.{name.split('.', 1)[1]}"
        catalog.create_table(target, schema=source.schema(), partition_spec=source.spec(),
                             sort_order=source.sort_order(), properties=dict(source.properties))
        out[event] = target
    return out


def raw_write(settings: Settings, topic: str, tables: dict[str, str], n: int, interval_s: float) -> dict[str, float]:
    """Read ``n`` envelopes from ``topic`` and append them to ``tables`` once per ``interval_s``;
    events/s and CPU-µs/event of this process, files and bytes it wrote."""
    catalog = load_catalog(settings)
    loaded = {event: catalog.load_table(name) for event, name in tables.items()}
    schemas = {event: table.schema().as_arrow() for event, table in loaded.items()}
    consumer = Consumer({**settings.kafka.client_config(), "group.id": f"bench-raw-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "fetch.max.bytes": 52_428_800,
                         "max.partition.fetch.bytes": 10_485_760})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    pending: dict[str, list[dict]] = defaultdict(list)
    read = written = 0
    cpu0, start = time.process_time(), time.monotonic()
    last_commit = start
    try:
        while written < n:
            for msg in consumer.consume(POLL_BATCH, timeout=0.2):
                if msg.error():
                    raise RuntimeError(f"{topic}: {msg.error()}")
                row = json.loads(msg.value())["payload"]
                row[TOPIC_COLUMN], row[PARTITION_COLUMN], row[OFFSET_COLUMN] = msg.topic(), msg.partition(), msg.offset()
                row[TIMESTAMP_COLUMN] = msg.timestamp()[1]
                pending[row["event"]].append(row)
                read += 1
            if time.monotonic() - last_commit >= interval_s or read == n:
                for event, rows in pending.items():
                    if rows:
                        loaded[event].append(pa.Table.from_pylist(rows, schema=schemas[event]))
                        written += len(rows)
                pending.clear()
                last_commit = time.monotonic()
            if time.monotonic() - start > 900:
                raise RuntimeError(f"raw writer: {written}/{n} written after 900 s")
    finally:
        consumer.close()
    seconds, cpu = time.monotonic() - start, time.process_time() - cpu0
    files = [f for name in tables.values() for f in catalog.load_table(name).inspect.files().to_pylist()]
    return {"raw_events_per_s": n / seconds, "raw_s": seconds, "raw_cpu_us_per_event": cpu / n * 1e6,
            "raw_data_files": len(files), "raw_data_bytes": sum(f["file_size_in_bytes"] for f in files)}


def _sink_files(catalog: Catalog, layout: BusLayout) -> dict[str, float]:
    files = [f for name in layout.tables for f in catalog.load_table(name).inspect.files().to_pylist()]
    return {"sink_data_files": len(files), "sink_data_bytes": sum(f["file_size_in_bytes"] for f in files)}


def _distinct_offsets(catalog: Catalog, tables: list[str]) -> int:
    return sum(len(set(catalog.load_table(t).scan(selected_fields=(OFFSET_COLUMN,)).to_arrow().column(0).to_pylist()))
               for t in tables)


def one_round(settings: Settings, n: int) -> dict[str, float]:
    tag = uuid.uuid4().hex[:6]
    layout = _layout(BusLayout.default().with_suffix(f"raw{tag}"), tag, SHIPPED)
    raw_namespace = f"bench_raw_{tag}"
    catalog = load_catalog(settings)
    try:
        sink = run_variant(settings, layout, SHIPPED, n, 0.0, 0.0, False, tag, settings.connect.urls[0], connect_pid(settings))
        result = {"sink_events_per_s": sink["shipped_events_per_s"], "sink_s": sink["shipped_backlog_s"],
                  "sink_cpu_us_per_event": sink["shipped_connect_cpu_us_per_event"], **_sink_files(catalog, layout)}
        raw_tables = _like_sink_tables(catalog, layout, raw_namespace)
        result.update(raw_write(settings, layout.bus_topic.name, raw_tables, n, layout.tuning.commit_interval_ms / 1000))
        for what, names in (("sink", list(layout.tables)), ("raw", list(raw_tables.values()))):
            rows, offsets = committed_rows(catalog, *names), _distinct_offsets(catalog, names)
            if rows != n or offsets != n:
                raise RuntimeError(f"{what}: {rows} rows, {offsets} distinct offsets for {n} events")
        result["sink_vs_raw_ratio"] = result["sink_events_per_s"] / result["raw_events_per_s"]
        result["load_1min"] = os.getloadavg()[0]
        print(f"[bench_raw_writer] round {tag}: {json.dumps({k: round(v, 3) for k, v in result.items()})}", flush=True)
        return result
    finally:
        if (raw_namespace,) in catalog.list_namespaces():
            for name in catalog.list_tables(raw_namespace):
                catalog.purge_table(name)
            catalog.drop_namespace(raw_namespace)
        remove_layouts(settings, [layout])


def run(n: int = 200_000, rounds: int = 2) -> dict[str, float]:
    # pyarrow's AWS SDK sends checksums only where S3 requires them, as every lakebus S3 client does
    # (S3-compatible stores refuse the newer trailing checksums on UploadPart)
    os.environ.update(AWS_SDK_ENV)
    settings = load_stack_settings()
    load_local_secrets(settings)
    results: dict[str, float] = {"events": n, "rounds": rounds, "load_1min_at_start": os.getloadavg()[0]}
    per_round = [one_round(settings, n) for _ in range(rounds)]
    for key in per_round[0]:
        results[key] = statistics.median(r[key] for r in per_round)
        results[f"{key}_rounds"] = [round(r[key], 3) for r in per_round]  # type: ignore[assignment]
    results["load_1min_at_end"] = os.getloadavg()[0]
    return results


def main(argv: list[str]) -> None:
    n = int(argv[1]) if len(argv) > 1 else 200_000
    rounds = int(argv[2]) if len(argv) > 2 else 2
    print(json.dumps(run(n, rounds), indent=1))


if __name__ == "__main__":
    main(sys.argv)
