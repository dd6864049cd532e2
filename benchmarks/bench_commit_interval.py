"""The sink's commit interval (``iceberg.control.commit.interval-ms``): freshness vs snapshots, data
files and metadata bytes, for each interval in ``intervals`` (lakebus ships 10 s; Iceberg's streaming
guidance says >= 1 min), measured side by side in one run.

* One isolated bus per interval (``provisioned_bus``: the shipped ``provision_lakebus`` job, topics,
  connector and namespace carrying a suffix of their own, the shipped ``SinkTuning`` but for the
  commit interval), all on the running local stack's Connect worker at once, so machine noise hits
  every interval alike. The bus topic has 1 partition and the sink 1 task (asserted).
* One producer loop sends the *same* events (event SDK ``Bet`` / ``Recharge``, 3 : 1, stamped with
  the current time) to every bus at ``rate`` events/s each, for ``minutes``. Each event's send time
  (``time.time()`` when the SDK hands it to librdkafka) and, from the delivery report, its offset are
  recorded (an injected producer wrapping ``confluent_kafka.Producer``).
* A poller reads every bus table's snapshots every ~1 s (``catalog.load_table(t).snapshots()``) and
  notes when each snapshot was first seen.
* Freshness of an event = commit time of the first snapshot of its table that contains it
  (``snapshot.timestamp_ms``) minus its send time; "visible" = the poll that first saw that snapshot
  minus the send time. Mapping: the sink writes one partition in offset order, so the k-th event of
  a type (in offset order) is in the first snapshot of its table whose ``total-records`` >= k
  (per table, not summed over the tables: the sink commits the two tables one after the other,
  and a sum read between those commits would be off). **Verified** for every event: each data
  file is mapped to the snapshot that added it (manifest entries) and its ``_kafka_offset`` column
  read; the count of events where the two mappings disagree, lost and duplicated offsets, and
  final rows vs events sent are reported.
  Only events sent after ``warmup_s`` (connector start, table creation) count. After ``minutes`` the
  same load continues, unmeasured, until every measured event is committed (a live bus, as in
  ``bench_ingest_e2e``), then stops and the buses drain.
* Growth per hour (EXTRAPOLATED from the measured window, commits in [warmup, minutes]): commits
  (= snapshots) per table per hour from the mean gap between commits; data files per hour = that ×
  mean files added per commit; every ``metadata.json`` on S3 (``<table location>/metadata/``) read:
  its size and the snapshots it holds -> the newest file's size and the bytes each snapshot adds
  (least-squares slope); metadata PUT volume per hour = commits/h × mean ``metadata.json`` size,
  both during this run (young tables) and at the steady state the shipped maintenance keeps
  (snapshots expired when > 18 min old at :10 and :40: 18-48 min of snapshots, >= 100, plus the 31
  tagged ones and their refs; at most 50 previous ``metadata.json`` kept), beside the former one
  (> 6 h, hourly: 6-7 h), where a file's size is extrapolated from the measured bytes per snapshot.

The connectors are deleted at the end (``provisioned_bus``) and the buses' tables dropped (``--keep``
keeps them); per-commit details go to ``build/bench_commit_interval_<run>.json``.

    python -m benchmarks bench_commit_interval            (10 s vs 60 s, 6 min; needs the local stack)
    python -m benchmarks.bench_commit_interval [--intervals 10000,60000] [--minutes 6] [--rate 50] [--warmup-s 60] [--keep]
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import random
import sys
import threading
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from lakebus_dagster.defs.lakehouse.constants import EXPIRE_SNAPSHOTS_OLDER_THAN_HOURS, RETAIN_LAST_SNAPSHOTS
from lakebus_dagster.lake.time_travel import DAYS_KEPT, HOURS_KEPT
from lakebus_dagster.settings import REPO_ROOT, load_local_secrets
from lakebus_dagster.stack.local_settings import load_stack_settings

DEFAULT_INTERVALS = (10_000, 60_000)
DEFAULT_MINUTES = 6.0
DEFAULT_RATE = 50.0
DEFAULT_WARMUP_S = 60.0
POLL_S = 1.0
#: the shipped maintenance: expire snapshots older than 18 min at :10 and :40, keep >= 100 and the
#: time-travel tags (24 hour tops + 7 midnights, each keeping at most one snapshot more)
EXPIRE_AGE_H = EXPIRE_SNAPSHOTS_OLDER_THAN_HOURS
MAINTENANCE_PERIOD_H = 0.5
TAGGED_SNAPSHOTS_MAX = HOURS_KEPT + DAYS_KEPT
#: the baseline it replaced, computed from the same measured bytes: older than 6 h, hourly, no tags
FORMER_EXPIRE_AGE_H, FORMER_PERIOD_H = 6.0, 1.0
#: bytes of one tag in the refs map ("lakebus-hour-2026-11-28T09": snapshot id, type, max-ref-age-ms)
TAG_REF_BYTES = 110
MIN_SNAPSHOTS_KEPT = RETAIN_LAST_SNAPSHOTS
PREVIOUS_VERSIONS_MAX = 50
INTERVAL_KEY = "iceberg.control.commit.interval-ms"


def log(msg: str) -> None:
    print(f"[bench_commit_interval] {time.strftime('%H:%M:%S')} {msg}", flush=True)


class RecordingProducer:
    """A ``confluent_kafka.Producer`` injected into the SDK's ``EventProducer``: remembers each
    delivered event's send time and type by offset."""

    def __init__(self, config: dict[str, Any]) -> None:
        import confluent_kafka

        from lakebus_dagster.events.producer import producer_config

        self._producer = confluent_kafka.Producer(producer_config(config))
        self.kind = 0  # the type of the next event handed to produce(): 0 bet, 1 recharge
        self.by_offset: dict[int, tuple[float, int]] = {}
        self.partitions: set[int] = set()
        self.errors = 0

    def produce(self, topic, value=None, key=None, on_delivery=None) -> None:
        sent, kind = time.time(), self.kind

        def delivered(err, msg) -> None:
            if err is None:
                self.by_offset[msg.offset()] = (sent, kind)
                self.partitions.add(msg.partition())
            else:
                self.errors += 1
            if on_delivery is not None:
                on_delivery(err, msg)

        self._producer.produce(topic, value=value, key=key, on_delivery=delivered)

    def poll(self, timeout: float) -> int:
        return self._producer.poll(timeout)

    def flush(self, timeout: float) -> int:
        return self._producer.flush(timeout)


@dataclass
class Bus:
    interval_ms: int
    layout: Any
    producer: RecordingProducer
    sdk: Any = None
    #: table -> {snapshot id: first time a poll saw it}
    seen: dict[str, dict[int, float]] = field(default_factory=dict)
    #: table -> total-records of the newest snapshot seen
    rows: dict[str, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        s = self.interval_ms / 1000
        return f"{s:g}s"

    @property
    def tables(self) -> dict[int, str]:
        return {0: self.layout.routes["bet"], 1: self.layout.routes["recharge"]}


class Poller(threading.Thread):
    """Every ``POLL_S``: each bus table's snapshots (first-seen times) and committed rows."""

    def __init__(self, catalog, buses: list[Bus]) -> None:
        super().__init__(daemon=True)
        self.catalog, self.buses = catalog, buses
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.cycles = 0
        self.cycle_s: list[float] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        from pyiceberg.exceptions import NoSuchTableError

        while not self.stop.is_set():
            start = time.monotonic()
            try:
                for bus in self.buses:
                    for table_name in bus.tables.values():
                        try:
                            table = self.catalog.load_table(table_name)
                        except NoSuchTableError:
                            continue
                        now = time.time()
                        with self.lock:
                            seen = bus.seen.setdefault(table_name, {})
                            for snap in table.snapshots():
                                seen.setdefault(snap.snapshot_id, now)
                            current = table.current_snapshot()
                            if current is not None and current.summary is not None:
                                bus.rows[table_name] = int(current.summary.additional_properties.get("total-records", 0))
            except Exception as exc:  # noqa: BLE001 - a transient catalog error: count it, keep polling
                self.error = exc
            took = time.monotonic() - start
            self.cycle_s.append(took)
            self.cycles += 1
            self.stop.wait(max(0.0, POLL_S - took))

    def committed(self, bus: Bus, table_name: str) -> int:
        with self.lock:
            return bus.rows.get(table_name, 0)


# -- the load ----------------------------------------------------------------------------------------
def make_event(rng: random.Random, seq: int, first_order_id: int, versions: dict) -> tuple[int, Any]:
    from lakebus_dagster.events import Bet, Recharge

    now = datetime.now(timezone.utc)
    is_bet = rng.random() < 0.75
    common = dict(category="biz", log_date=now.strftime("%Y-%m-%d"), hour=now.strftime("%H"), plat_id=1, app_id=10406,
                  ts=int(now.timestamp() * 1000), user_id=2001 + rng.randrange(1000), order_id=str(first_order_id + seq),
                  currency=rng.choice(("BRL", "USD")))
    if is_bet:
        return 0, Bet(event="bet", schema_version=versions[Bet], amount=round(rng.uniform(1, 500), 2),
                      game_id=rng.choice((777, 778, 779)), **common)
    failed = rng.random() < 0.1
    return 1, Recharge(event="recharge", schema_version=versions[Recharge], amount=round(rng.uniform(10, 2000), 2),
                       status="failed" if failed else "success", reason="timeout" if failed else None, **common)


def produce(buses: list[Bus], poller: Poller, rate: float, measure_s: float, tail_s: float) -> dict[str, float]:
    """Send one event to every bus ``rate`` times a second for ``measure_s``; then go on (unmeasured)
    until every bus has committed every event sent in the measured window, for at most ``tail_s``."""
    from lakebus_dagster.events import Bet, Recharge
    from lakebus_dagster.events.registry import default_registry

    versions = {m: default_registry.for_model(m).version for m in (Bet, Recharge)}
    rng = random.Random(20261127)
    first_order_id = 10**9 + random.randrange(10**8)
    start_wall, start = time.time(), time.monotonic()
    measure_end_wall = start_wall + measure_s
    seq = 0
    tail_started = None
    next_check = 0.0
    while True:
        due = start + seq / rate
        if (ahead := due - time.monotonic()) > 0:
            for bus in buses:
                bus.producer.poll(0)
            time.sleep(ahead)
        kind, event = make_event(rng, seq, first_order_id, versions)
        for bus in buses:
            bus.producer.kind = kind
            bus.sdk.send(event)
        seq += 1
        now = time.monotonic()
        if now - start < measure_s:
            continue
        if tail_started is None:
            tail_started = now
            log(f"measured window over ({seq} events to each bus); the load goes on until every measured event is committed")
        if now >= next_check:
            next_check = now + 1.0
            if all(measured_committed(bus, poller, measure_end_wall) for bus in buses) or now - tail_started > tail_s:
                break
    for bus in buses:
        bus.sdk.flush(60)
    return {"start": start_wall, "measure_end": measure_end_wall, "stop": time.time(), "sent_per_bus": seq,
            "tail_s": round(time.monotonic() - tail_started, 1)}


def measured_committed(bus: Bus, poller: Poller, measure_end_wall: float) -> bool:
    for kind, table_name in bus.tables.items():
        need = sum(1 for sent, k in list(bus.producer.by_offset.values()) if k == kind and sent < measure_end_wall)
        if poller.committed(bus, table_name) < need:
            return False
    return True


# -- analysis ----------------------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def offsets_by_snapshot(table) -> tuple[dict[int, int], int]:
    """``{_kafka_offset: id of the snapshot that added its data file}`` over the table's live files, and
    how many offsets appear more than once."""
    import pyarrow.parquet as pq

    out: dict[int, int] = {}
    duplicated = 0
    for entry in table.inspect.entries().to_pylist():
        if entry["status"] == 2:  # DELETED
            continue
        with table.io.new_input(entry["data_file"]["file_path"]).open() as fh:
            for offset in pq.read_table(fh, columns=["_kafka_offset"]).column(0).to_pylist():
                if offset in out:
                    duplicated += 1
                else:
                    out[offset] = entry["snapshot_id"]
    return out, duplicated


def metadata_files(s3, location: str) -> list[dict[str, Any]]:
    """Every ``metadata.json`` under the table: key, bytes, snapshots and metadata-log entries it holds."""
    from benchmarks.bench_compressed_month import list_objects

    bucket, _, prefix = location.removeprefix("s3://").removeprefix("s3a://").partition("/")
    out = []
    for obj in list_objects(s3, bucket, prefix.rstrip("/") + "/metadata/"):
        if not obj["Key"].endswith(".metadata.json"):
            continue
        doc = json.loads(s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read())
        out.append({"key": obj["Key"], "bytes": int(obj["Size"]), "snapshots": len(doc.get("snapshots", [])),
                    "metadata_log": len(doc.get("metadata-log", [])), "doc": doc})
    out.sort(key=lambda f: (f["snapshots"], f["metadata_log"], f["key"]))
    return out


def slope(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 2:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return None if den == 0 else sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den


def entry_bytes(items: list) -> float:
    """Mean compact-JSON bytes of ``items`` (+1 for the separating comma), as a metadata.json holds them."""
    if not items:
        return 0.0
    return sum(len(json.dumps(i, separators=(",", ":"))) + 1 for i in items) / len(items)


def analyse_table(bus: Bus, kind: int, table, s3, events: list[tuple[int, float, int]], window: tuple[float, float]) -> dict[str, Any]:
    """Freshness of this table's events and its growth; ``events`` = (offset, sent, kind) in offset order."""
    lo, hi = window
    snaps = sorted(table.snapshots(), key=lambda s: (s.sequence_number or 0, s.timestamp_ms))
    props = [s.summary.additional_properties if s.summary else {} for s in snaps]
    totals = [int(p.get("total-records", 0)) for p in props]
    commit_s = [s.timestamp_ms / 1000 for s in snaps]
    seen = bus.seen.get(bus.tables[kind], {})
    mine = [(offset, sent) for offset, sent, k in events if k == kind]
    exact, duplicated = offsets_by_snapshot(table)
    index_of = {s.snapshot_id: i for i, s in enumerate(snaps)}

    lat, vis, mismatched, unmapped, unseen = [], [], 0, 0, 0
    for rank, (offset, sent) in enumerate(mine):
        i = bisect.bisect_left(totals, rank + 1)  # totals only grow (appends; nothing else writes the table)
        if i == len(snaps):
            unmapped += 1
            continue
        if index_of.get(exact.get(offset)) != i:
            mismatched += 1
        if not lo <= sent < hi:
            continue
        lat.append(commit_s[i] - sent)
        first_seen = seen.get(snaps[i].snapshot_id)
        if first_seen is None:
            unseen += 1
        else:
            vis.append(first_seen - sent)
    sent_offsets = {o for o, _ in mine}

    in_window = [i for i, t in enumerate(commit_s) if lo <= t <= hi]
    n = len(in_window)
    if n >= 2:
        gap_s = (commit_s[in_window[-1]] - commit_s[in_window[0]]) / (n - 1)
    else:
        gap_s = (hi - lo) / max(n, 1)
    commits_h = 3600 / gap_s
    added_files = [int(props[i].get("added-data-files", 0)) for i in in_window]
    added_bytes = [int(props[i].get("added-files-size", 0)) for i in in_window]
    added_rows = [int(props[i].get("added-records", 0)) for i in in_window]
    files_per_commit = sum(added_files) / max(n, 1)

    # metadata.json: every version on S3 with the snapshots it holds
    mfiles = metadata_files(s3, table.metadata.location)
    with_snaps = [f for f in mfiles if f["snapshots"] > 0]
    newest = next((f for f in mfiles if f["key"].endswith(table.metadata_location.rsplit("/", 1)[-1])), mfiles[-1] if mfiles else None)
    growth = slope([f["snapshots"] for f in with_snaps], [f["bytes"] for f in with_snaps])
    doc = newest["doc"] if newest else {}
    per_snapshot = entry_bytes(doc.get("snapshots", [])) + entry_bytes(doc.get("snapshot-log", []))
    per_log_entry = entry_bytes(doc.get("metadata-log", []))
    mean_json = sum(f["bytes"] for f in with_snaps) / len(with_snaps) if with_snaps else 0.0

    def size_at(snapshots: float) -> float:
        """metadata.json bytes with ``snapshots`` snapshots (and a full metadata log): the newest file
        plus the measured bytes per snapshot and per metadata-log entry."""
        if not newest:
            return 0.0
        return (newest["bytes"] + per_snapshot * (snapshots - newest["snapshots"])
                + per_log_entry * max(0, PREVIOUS_VERSIONS_MAX - newest["metadata_log"]))

    tags = TAGGED_SNAPSHOTS_MAX * TAG_REF_BYTES
    steady_min = max(MIN_SNAPSHOTS_KEPT, commits_h * EXPIRE_AGE_H)
    steady_max = max(MIN_SNAPSHOTS_KEPT, commits_h * (EXPIRE_AGE_H + MAINTENANCE_PERIOD_H)) + TAGGED_SNAPSHOTS_MAX
    steady_mean_json = size_at((steady_min + steady_max) / 2) + tags
    former_min = max(MIN_SNAPSHOTS_KEPT, commits_h * FORMER_EXPIRE_AGE_H)
    former_max = max(MIN_SNAPSHOTS_KEPT, commits_h * (FORMER_EXPIRE_AGE_H + FORMER_PERIOD_H))
    return {
        "events": len(mine),
        "latencies": lat, "visible": vis,
        "unmapped": unmapped, "mismatched": mismatched, "unseen_by_poll": unseen,
        "lost": len(sent_offsets - set(exact)), "duplicated": duplicated, "unexpected": len(set(exact) - sent_offsets),
        "final_rows": totals[-1] if totals else 0,
        "snapshots_total": len(snaps),
        "commits_in_window": n, "commit_gap_s": gap_s, "commits_h": commits_h,
        "files_per_commit": files_per_commit, "files_h": commits_h * files_per_commit,
        "mean_file_kib": (sum(added_bytes) / max(sum(added_files), 1)) / 1024,
        "rows_per_commit": sum(added_rows) / max(n, 1),
        "live_data_files": int(props[-1].get("total-data-files", 0)) if props else 0,
        "metadata_json_files": len(mfiles),
        "newest_json_bytes": newest["bytes"] if newest else 0, "newest_json_snapshots": newest["snapshots"] if newest else 0,
        "json_growth_per_snapshot_b": growth, "json_bytes_per_snapshot_entry": per_snapshot,
        "mean_json_bytes": mean_json, "put_bytes_h_run": commits_h * mean_json,
        "steady_snapshots": (steady_min, steady_max), "steady_json_bytes_max": size_at(steady_max) + tags,
        "steady_put_bytes_h": commits_h * steady_mean_json,
        "former_snapshots_max": former_max, "former_json_bytes_max": size_at(former_max),
        "former_put_bytes_h": commits_h * size_at((former_min + former_max) / 2),
        "commits": [{"snapshot_id": s.snapshot_id, "sequence": s.sequence_number, "commit_ms": s.timestamp_ms,
                     "first_seen_ms": int(seen[s.snapshot_id] * 1000) if s.snapshot_id in seen else None,
                     "total_records": totals[i], "added_records": int(props[i].get("added-records", 0)),
                     "added_files": int(props[i].get("added-data-files", 0))} for i, s in enumerate(snaps)],
        "metadata_json": [{"key": f["key"].rsplit("/", 1)[-1], "bytes": f["bytes"], "snapshots": f["snapshots"],
                           "metadata_log": f["metadata_log"]} for f in mfiles],
    }


def analyse_bus(bus: Bus, catalog, s3, window: tuple[float, float]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Flat results for ``bus`` (keys prefixed with its interval) and its details."""
    offsets = sorted(bus.producer.by_offset)
    events = [(o, *bus.producer.by_offset[o]) for o in offsets]
    tables = {kind: analyse_table(bus, kind, catalog.load_table(name), s3, events, window) for kind, name in bus.tables.items()}
    lat = [x for t in tables.values() for x in t["latencies"]]
    vis = [x for t in tables.values() for x in t["visible"]]
    p = bus.label
    out: dict[str, Any] = {
        f"{p} events_sent": len(events),
        f"{p} events_measured": len(lat),
        f"{p} offsets_contiguous": bool(offsets) and offsets[0] == 0 and offsets[-1] == len(offsets) - 1,
        f"{p} rows_committed": sum(t["final_rows"] for t in tables.values()),
        f"{p} mapping_mismatches": sum(t["mismatched"] for t in tables.values()),
        f"{p} unmapped": sum(t["unmapped"] for t in tables.values()),
        f"{p} lost": sum(t["lost"] for t in tables.values()),
        f"{p} duplicated": sum(t["duplicated"] for t in tables.values()),
        f"{p} unexpected": sum(t["unexpected"] for t in tables.values()),
        f"{p} freshness_p50_s": round(pct(lat, 0.5), 2) if lat else None,
        f"{p} freshness_p95_s": round(pct(lat, 0.95), 2) if lat else None,
        f"{p} freshness_p99_s": round(pct(lat, 0.99), 2) if lat else None,
        f"{p} freshness_max_s": round(max(lat), 2) if lat else None,
        f"{p} freshness_mean_s": round(sum(lat) / len(lat), 2) if lat else None,
        f"{p} visible_p50_s": round(pct(vis, 0.5), 2) if vis else None,
        f"{p} visible_p95_s": round(pct(vis, 0.95), 2) if vis else None,
        f"{p} visible_max_s": round(max(vis), 2) if vis else None,
    }
    put_run = put_steady = 0.0
    for kind, t in tables.items():
        short = "bet" if kind == 0 else "recharge"
        q = f"{p} {short}"
        out.update({
            f"{q} commits_in_window": t["commits_in_window"],
            f"{q} commit_gap_s": round(t["commit_gap_s"], 2),
            f"{q} snapshots_per_h": round(t["commits_h"]),
            f"{q} data_files_per_h": round(t["files_h"]),
            f"{q} rows_per_commit": round(t["rows_per_commit"]),
            f"{q} mean_data_file_kib": round(t["mean_file_kib"], 1),
            f"{q} snapshots_total": t["snapshots_total"],
            f"{q} live_data_files": t["live_data_files"],
            f"{q} metadata_json_files": t["metadata_json_files"],
            f"{q} newest_metadata_json_kib": round(t["newest_json_bytes"] / 1024, 1),
            f"{q} newest_metadata_json_snapshots": t["newest_json_snapshots"],
            f"{q} metadata_json_growth_b_per_snapshot": round(t["json_growth_per_snapshot_b"]) if t["json_growth_per_snapshot_b"] else None,
            f"{q} metadata_json_snapshot_entry_b": round(t["json_bytes_per_snapshot_entry"]),
            f"{q} metadata_put_mib_per_h_run": round(t["put_bytes_h_run"] / 2**20, 2),
            f"{q} steady_snapshots_max": round(t["steady_snapshots"][1]),
            f"{q} steady_metadata_json_kib_max": round(t["steady_json_bytes_max"] / 1024),
            f"{q} steady_metadata_put_mib_per_h": round(t["steady_put_bytes_h"] / 2**20, 1),
            f"{q} former_steady_snapshots_max": round(t["former_snapshots_max"]),
            f"{q} former_steady_metadata_json_kib_max": round(t["former_json_bytes_max"] / 1024),
            f"{q} former_steady_metadata_put_mib_per_h": round(t["former_put_bytes_h"] / 2**20, 1),
        })
        put_run += t["put_bytes_h_run"]
        put_steady += t["steady_put_bytes_h"]
    out[f"{p} metadata_put_mib_per_h_run (2 tables)"] = round(put_run / 2**20, 2)
    out[f"{p} steady_metadata_put_mib_per_h (2 tables)"] = round(put_steady / 2**20, 1)
    details = {short: {k: v for k, v in tables[kind].items() if k not in ("latencies", "visible")}
               for kind, short in ((0, "bet"), (1, "recharge"))}
    return out, details


def print_comparison(results: dict[str, Any], buses: list[Bus]) -> None:
    labels = [b.label for b in buses]
    metrics: list[str] = []
    for key in results:
        for label in labels:
            if key.startswith(label + " "):
                metric = key[len(label) + 1:]
                if metric not in metrics:
                    metrics.append(metric)
    width = max(len(m) for m in metrics)
    print(f"\n{'metric':<{width}}  " + "  ".join(f"{label:>12}" for label in labels))
    for metric in metrics:
        cells = []
        for label in labels:
            v = results.get(f"{label} {metric}")
            cells.append(f"{v:>12,.2f}" if isinstance(v, float) else f"{v!s:>12}")
        print(f"{metric:<{width}}  " + "  ".join(cells))
    print(flush=True)


# -- the run -----------------------------------------------------------------------------------------
def run(intervals: tuple[int, ...] = DEFAULT_INTERVALS, minutes: float = DEFAULT_MINUTES, rate: float = DEFAULT_RATE,
        warmup_s: float = DEFAULT_WARMUP_S, keep: bool = False) -> dict[str, Any]:
    from lakebus_dagster.events import EventProducer
    from lakebus_dagster.lake.catalog import load_catalog
    from lakebus_dagster.lake.dws import LakehouseTables
    from lakebus_dagster.stack.s3 import s3_client
    from lakebus_dagster_tests.integration.helpers import provisioned_bus

    if minutes * 60 <= warmup_s:
        raise SystemExit(f"bench_commit_interval: --minutes {minutes} leaves nothing after the {warmup_s:.0f} s warm-up")
    settings = load_stack_settings()
    load_local_secrets(settings)
    catalog, s3 = load_catalog(settings), s3_client(settings)
    run_id = uuid.uuid4().hex[:6]
    results: dict[str, Any] = {"run_id": run_id, "intervals_ms": ",".join(str(i) for i in intervals), "minutes": minutes,
                               "rate_per_s_per_bus": rate, "warmup_s": warmup_s,
                               "load_1min_at_start": round(os.getloadavg()[0], 2)}
    details: dict[str, Any] = {}
    buses: list[Bus] = []
    drop: list[str] = []
    try:
        with ExitStack() as stack:
            for interval in intervals:
                suffix = f"ci{interval // 1000}s{run_id}"
                t0 = time.monotonic()
                _, layout, client = stack.enter_context(provisioned_bus(settings, suffix, commit_interval_ms=interval))
                drop += list(layout.routes.values())
                try:
                    drop += list(LakehouseTables.from_routes(layout.routes).all_dws)
                except Exception:  # noqa: BLE001 - no DWS spec for these routes
                    pass
                if layout.bus_topic.partitions != 1 or layout.tasks_max != 1:
                    raise RuntimeError(f"{layout.bus_topic.name}: {layout.bus_topic.partitions} partitions / {layout.tasks_max} "
                                       "tasks; the offset-order mapping needs 1 and 1 (unset LAKEBUS_BUS_PARTITIONS/_TASKS_MAX)")
                stored = client.get_config(layout.connector_name).get(INTERVAL_KEY)
                if stored != str(interval):
                    raise RuntimeError(f"{layout.connector_name}: {INTERVAL_KEY}={stored}, expected {interval}")
                client.wait_for_state(layout.connector_name, ("RUNNING",), timeout=180, fail_states=("FAILED",))
                log(f"{layout.connector_name}: {INTERVAL_KEY}={stored}, RUNNING (provisioned in {time.monotonic() - t0:.1f} s)")
                producer = RecordingProducer({**settings.kafka.client_config(), "linger.ms": 5})
                bus = Bus(interval, layout, producer)
                bus.sdk = EventProducer(layout.bus_topic.name, producer)
                buses.append(bus)

            poller = Poller(catalog, buses)
            poller.start()
            longest = max(intervals) / 1000
            log(f"{rate:g} events/s to each of {len(buses)} buses for {minutes:g} min (first {warmup_s:.0f} s not measured) ...")
            times = produce(buses, poller, rate, minutes * 60, tail_s=3 * longest + 120)
            log(f"load stopped after a {times['tail_s']} s tail; draining ...")
            deadline = time.monotonic() + 2 * longest + 120
            while time.monotonic() < deadline:
                if all(sum(poller.committed(b, t) for t in b.tables.values()) >= len(b.producer.by_offset) for b in buses):
                    break
                time.sleep(1)
            time.sleep(2 * POLL_S)
            poller.stop.set()
            poller.join(30)
            window = (times["start"] + warmup_s, times["measure_end"])
            results.update({"sent_per_bus": times["sent_per_bus"], "tail_s": times["tail_s"],
                            "measured_window_s": round(window[1] - window[0], 1),
                            "events_per_s_achieved": round(times["sent_per_bus"] / (times["stop"] - times["start"]), 1),
                            "poll_cycle_s_mean": round(sum(poller.cycle_s) / max(1, len(poller.cycle_s)), 2),
                            "poll_cycle_s_max": round(max(poller.cycle_s, default=0), 2),
                            "poll_errors": repr(poller.error) if poller.error else "none"})
            for bus in buses:
                if bus.producer.errors:
                    raise RuntimeError(f"{bus.label}: {bus.producer.errors} delivery errors")
                flat, detail = analyse_bus(bus, catalog, s3, window)
                results.update(flat)
                details[bus.label] = detail
            # connectors are deleted here (provisioned_bus)
        results["load_1min_at_end"] = round(os.getloadavg()[0], 2)
        ok = all(results[f"{b.label} rows_committed"] == results[f"{b.label} events_sent"]
                 and results[f"{b.label} mapping_mismatches"] == 0 and results[f"{b.label} offsets_contiguous"]
                 for b in buses)
        results["mapping_verified"] = ok
        path = REPO_ROOT / "build" / f"bench_commit_interval_{run_id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"results": results, "tables": details}, indent=1, default=str) + "\n")
        results["details_file"] = str(path.relative_to(REPO_ROOT))
        print_comparison(results, buses)
        return results
    finally:
        if drop and not keep:
            from benchmarks.bench_compressed_month import _drop

            _drop(catalog, s3, drop)
            for ns in {t.split(".", 1)[0] for t in drop}:
                try:
                    catalog.drop_namespace(ns)
                except Exception:  # noqa: BLE001 - gone already
                    pass


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_commit_interval")
    p.add_argument("--intervals", default=",".join(str(i) for i in DEFAULT_INTERVALS),
                   help="commit intervals in ms, comma-separated (default: %(default)s)")
    p.add_argument("--minutes", type=float, default=DEFAULT_MINUTES, help="load duration incl. warm-up (default: %(default)s)")
    p.add_argument("--rate", type=float, default=DEFAULT_RATE, help="events/s to each bus (default: %(default)s)")
    p.add_argument("--warmup-s", type=float, default=DEFAULT_WARMUP_S, help="not measured at the start (default: %(default)s)")
    p.add_argument("--keep", action="store_true", help="keep the buses' tables")
    args = p.parse_args(argv)
    intervals = tuple(int(x) for x in args.intervals.split(",") if x.strip())
    from benchmarks.recording import record_run

    return record_run("bench_commit_interval", lambda: run(intervals, args.minutes, args.rate, args.warmup_s, args.keep))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
