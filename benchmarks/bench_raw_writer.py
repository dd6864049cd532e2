"""The Iceberg sink against a plain writer of the same files: how close to the hardware ingest runs.

The sink's throughput means little alone: 2,000 events/s can be 10 % or 90 % of what two cores can
write. The baseline here is the simplest writer that produces the same tables: one Python process
that reads the same backlog from Kafka (confluent-kafka, from the earliest offset), decodes each
Schema+JSON envelope (``json``; the typed money and time columns cast by Arrow), routes it by its ``event`` field, adds the four provenance columns the sink
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
    python -m benchmarks.bench_raw_writer [n] [rounds] [--profile] [--partitions=P]
        (--profile: a JFR recording of the sink; --partitions: a bus of P partitions, P sink tasks,
        the plain writer still one process)
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


def shipped(partitions: int) -> Variant:
    """The shipped sink on a bus of ``partitions`` partitions: one task per partition (provisioning's rule)."""
    return SHIPPED if partitions == 1 else Variant(f"shipped{partitions}p", partitions, SinkTuning())
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


def _as_read(schema: pa.Schema) -> pa.Schema:
    """``schema`` with the types ``json`` reads in place of the typed ones: a decimal as a double, a
    timestamp as epoch milliseconds (exact for the generator's amounts, two decimals under a billion)."""
    def read(f: pa.Field) -> pa.Field:
        if pa.types.is_decimal(f.type):
            return f.with_type(pa.float64())
        return f.with_type(pa.int64()) if pa.types.is_timestamp(f.type) else f
    return pa.schema([read(f) for f in schema], metadata=schema.metadata)


def _arrow(rows: list[dict], schema: pa.Schema, as_read: pa.Schema) -> pa.Table:
    """Rows as the table's Arrow types: read loosely, then the typed columns cast (Arrow, vectorised)."""
    table = pa.Table.from_pylist(rows, schema=as_read)
    if as_read == schema:
        return table
    columns = [(c.cast(pa.timestamp("ms", tz="UTC")) if pa.types.is_timestamp(f.type) else c).cast(f.type)
               if c.type != f.type else c for c, f in zip(table.columns, schema)]
    return pa.Table.from_arrays(columns, schema=schema)


def raw_write(settings: Settings, topic: str, tables: dict[str, str], n: int, interval_s: float,
              partitions: int = 1) -> dict[str, float]:
    """Read ``n`` envelopes from ``topic`` and append them to ``tables`` once per ``interval_s``;
    events/s and CPU-µs/event of this process, files and bytes it wrote."""
    catalog = load_catalog(settings)
    loaded = {event: catalog.load_table(name) for event, name in tables.items()}
    schemas = {event: table.schema().as_arrow() for event, table in loaded.items()}
    as_read = {event: _as_read(schema) for event, schema in schemas.items()}
    consumer = Consumer({**settings.kafka.client_config(), "group.id": f"bench-raw-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "fetch.max.bytes": 52_428_800,
                         "max.partition.fetch.bytes": 10_485_760})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
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
                        loaded[event].append(_arrow(rows, schemas[event], as_read[event]))
                        written += len(rows)
                pending.clear()
                last_commit = time.monotonic()
            if time.monotonic() - start > 900:
                raise RuntimeError(f"raw writer: {written}/{n} written after 900 s")
    finally:
        consumer.close()
    seconds, cpu = time.monotonic() - start, time.process_time() - cpu0
    files = [f for name in tables.values() for f in catalog.load_table(name).inspect.files().to_pylist()]
    return {"raw_events_per_s": n / seconds, "raw_s": seconds, "raw_cpu_us_per_event": cpu / n * 1e6, "raw_cores": cpu / seconds,
            "raw_data_files": len(files), "raw_data_bytes": sum(f["file_size_in_bytes"] for f in files)}


def _sink_files(catalog: Catalog, layout: BusLayout) -> dict[str, float]:
    files = [f for name in layout.tables for f in catalog.load_table(name).inspect.files().to_pylist()]
    return {"sink_data_files": len(files), "sink_data_bytes": sum(f["file_size_in_bytes"] for f in files)}


def _distinct_offsets(catalog: Catalog, tables: list[str]) -> int:
    """Distinct (partition, offset) positions in ``tables``."""
    total = 0
    for name in tables:
        rows = catalog.load_table(name).scan(selected_fields=(PARTITION_COLUMN, OFFSET_COLUMN)).to_arrow()
        total += len(set(zip(rows.column(PARTITION_COLUMN).to_pylist(), rows.column(OFFSET_COLUMN).to_pylist())))
    return total


def one_round(settings: Settings, n: int, profile: bool = False, partitions: int = 1) -> dict[str, float]:
    tag = uuid.uuid4().hex[:6]
    variant = shipped(partitions)
    layout = _layout(BusLayout.default().with_suffix(f"raw{tag}"), tag, variant)
    raw_namespace = f"bench_raw_{tag}"
    catalog = load_catalog(settings)
    try:
        sink = run_variant(settings, layout, variant, n, 0.0, 0.0, profile, tag, settings.connect.urls[0], connect_pid(settings))
        result = {"sink_events_per_s": sink[f"{variant.name}_events_per_s"], "sink_s": sink[f"{variant.name}_backlog_s"],
                  "sink_cpu_us_per_event": sink[f"{variant.name}_connect_cpu_us_per_event"],
                  "sink_cores": sink[f"{variant.name}_connect_cpu_cores"], **_sink_files(catalog, layout)}
        raw_tables = _like_sink_tables(catalog, layout, raw_namespace)
        result.update(raw_write(settings, layout.bus_topic.name, raw_tables, n, layout.tuning.commit_interval_ms / 1000,
                                partitions))
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


def run(n: int = 200_000, rounds: int = 2, profile: bool = False, partitions: int = 1) -> dict[str, float]:
    # pyarrow's AWS SDK sends checksums only where S3 requires them, as every lakebus S3 client does
    # (S3-compatible stores refuse the newer trailing checksums on UploadPart)
    os.environ.update(AWS_SDK_ENV)
    settings = load_stack_settings()
    load_local_secrets(settings)
    results: dict[str, float] = {"events": n, "rounds": rounds, "partitions": partitions,
                                 "load_1min_at_start": os.getloadavg()[0]}
    per_round = [one_round(settings, n, profile, partitions) for _ in range(rounds)]
    for key in per_round[0]:
        results[key] = statistics.median(r[key] for r in per_round)
        results[f"{key}_rounds"] = [round(r[key], 3) for r in per_round]  # type: ignore[assignment]
    results["load_1min_at_end"] = os.getloadavg()[0]
    return results


def main(argv: list[str]) -> None:
    args = [a for a in argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 200_000
    rounds = int(args[1]) if len(args) > 1 else 2
    partitions = next((int(a.split("=", 1)[1]) for a in argv if a.startswith("--partitions=")), 1)
    print(json.dumps(run(n, rounds, profile="--profile" in argv, partitions=partitions), indent=1))


if __name__ == "__main__":
    main(sys.argv)
