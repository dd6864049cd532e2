"""Parquet bytes/event cost of the four provenance columns (``KafkaMetadataTransform``), measured
in one run: the same generated events written as Parquet + ZSTD (the sink's codec) with and without
``_kafka_topic/_partition/_offset/_timestamp``, in files of ``rows_per_file`` rows (one sink commit's
worth), against the Schema+JSON envelope bytes of those events.

Offline (pyarrow, no sink): it isolates the columns' encoded size; the sink writes the same Parquet
columns (dictionary-encoded topic, constant partition, monotonically increasing offsets and times).
"""

from __future__ import annotations

import io
import json
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq

from lakebus_dagster.events import EnvelopeEncoder, GeneratorConfig, generate_events


def _parquet_bytes(table: pa.Table, rows_per_file: int) -> int:
    total = 0
    for start in range(0, table.num_rows, rows_per_file):
        buf = io.BytesIO()
        pq.write_table(table.slice(start, rows_per_file), buf, compression="zstd")
        total += buf.tell()
    return total


def bench(events: int = 40_000, rows_per_file: int = 5_000) -> dict:
    sample = list(generate_events(GeneratorConfig(count=events, seed=11, days=("2025-11-25", "2025-11-26"))))
    encoder = EnvelopeEncoder()
    envelope_bytes = sum(len(encoder.encode(e)) for e in sample)
    out = {"events": events, "rows_per_file": rows_per_file, "envelope_bytes_per_event": round(envelope_bytes / events, 1)}
    t0 = int(time.time() * 1000)
    for event_name in ("bet", "recharge"):
        rows = [json.loads(encoder.encode(e))["payload"] for e in sample if e.event == event_name]
        base = pa.Table.from_pylist(rows)
        n = base.num_rows
        offsets = [i for i, e in enumerate(sample) if e.event == event_name]
        with_prov = (base.append_column("_kafka_topic", pa.array(["events"] * n, pa.string()))
                     .append_column("_kafka_partition", pa.array([0] * n, pa.int32()))
                     .append_column("_kafka_offset", pa.array(offsets, pa.int64()))
                     .append_column("_kafka_timestamp", pa.array([t0 + o // 20 for o in offsets], pa.int64())))
        out[f"{event_name}_without"] = _parquet_bytes(base, rows_per_file)
        out[f"{event_name}_with"] = _parquet_bytes(with_prov, rows_per_file)
    without = out["bet_without"] + out["recharge_without"]
    with_ = out["bet_with"] + out["recharge_with"]
    out.update({
        "parquet_bytes_per_event_without": round(without / events, 2),
        "parquet_bytes_per_event_with": round(with_ / events, 2),
        "ratio_vs_envelope_without_pct": round(100 * without / envelope_bytes, 3),
        "ratio_vs_envelope_with_pct": round(100 * with_ / envelope_bytes, 3),
        "provenance_cost_pp": round(100 * (with_ - without) / envelope_bytes, 3),
    })
    return out


if __name__ == "__main__":
    result = bench(*(int(a) for a in sys.argv[1:3]))
    for key, value in result.items():
        print(f"{key}: {value}")
