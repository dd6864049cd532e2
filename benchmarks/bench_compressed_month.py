"""Day thirty, compressed: an ODS table after ~10,000 small commits, before and after the shipped
``lakehouse_maintenance`` (issue: metadata and files grow without bound).

1. An isolated bus is provisioned by the shipped ``provision_lakebus`` (its own topics, connector and
   namespace ``demo_<suffix>``, commit interval 1 s) and a few bets go through the **real sink**, so
   the sink creates ``dwd_biz_bet`` itself: its schema (provenance columns included), its
   ``log_date`` partition spec and the table properties it ships (reported as seen).
2. **A pyiceberg writer stands in for the sink's commits** (the real sink commits at most once per
   commit interval: 10,000 commits would take 2.8 h at 1 s, 28 h at the shipped 10 s). Each
   snapshot is what one sink commit leaves: one small Parquet data file (``rows_per_commit`` rows,
   one ``log_date``, the month spread over ``days`` days), one manifest, one manifest list, an
   ``append`` snapshot whose summary carries the sink's ``kafka.connect.*`` keys (copied from the
   sink's own first commit, so ``metadata.json`` grows per snapshot like the sink's), and the
   manifests are merged into one every 100 (what the sink's Java ``MergeAppend`` does with
   ``commit.manifest.min-count-to-merge=100``). To fit the time, ``batch`` snapshots go to the
   catalog in one REST commit (one ``metadata.json`` per batch); the last ``tail_commits`` are one
   snapshot per REST commit, so the newest ``metadata.json`` files on S3 are one commit apart, as
   the sink leaves them. (pyiceberg's own ``Table.append`` deep-copies the table metadata ~18 times
   per commit: measured 0.75 s/commit at 1,000 snapshots, hours for 10,000.)
3. **Before**: snapshots, live data files (current snapshot), data files any snapshot references,
   manifests, the ``metadata.json`` files the table tracks (metadata log) and what S3 holds under the
   table's prefix (``metadata/*.metadata.json``, manifest lists, manifests, ``data/``), the catalog's
   ``loadTable`` time, and a representative query over Spark Connect,
   ``SELECT count(*), sum(amount) FROM t WHERE log_date = <mid-month day>`` (median of ``repeats``,
   each after ``REFRESH TABLE`` so the metadata load is paid as a DWS step pays it).
4. **Pass 1, as shipped**: ``lakehouse_maintenance`` with ``scope: full`` and nothing else, on the
   bus's resources (``execute_in_process``). All snapshots are younger than the shipped 6 h expiry.
5. **Pass 2**: the same with ``expire_older_than_hours: 0`` (the commits as if old: day 30).
6. **Pass 3**: ``extra_commits`` (100) more one-snapshot commits (≈17 min of the sink's 10 s commits),
   then pass 2 again: the compacted-away small files are still referenced by the newest 100 snapshots
   (``retain_last``) after pass 2, and only leave once 100 newer snapshots exist.

The Spark Connect server is shared: when another session restarts it mid-run, the failed step (a
measurement or a maintenance pass) is retried once after the server answers again, and the result
says so (``spark_connect_lost_and_retried``).

    python -m benchmarks bench_compressed_month        (needs the local stack: make stack-up)
    python -m benchmarks.bench_compressed_month [--commits N] [--batch N] [--keep]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import statistics
import sys
import time
import uuid
from collections import Counter
from datetime import date, datetime, timedelta, timezone
from typing import Any

from lakebus_dagster.settings import AWS_SDK_ENV, load_local_secrets

# pyarrow's S3 writes (pyiceberg data files and manifests) send checksum headers S3Proxy rejects
for _key, _value in AWS_SDK_ENV.items():
    os.environ.setdefault(_key, _value.lower())

import pyarrow as pa  # noqa: E402

from lakebus_dagster.stack.local_settings import load_stack_settings  # noqa: E402

SPARK_CATALOG = "lake"
#: the sink's Java MergeAppend merges manifests once a snapshot would have this many (Iceberg's default)
MERGE_MIN_COUNT = 100
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def log(msg: str) -> None:
    print(f"[bench_compressed_month] {time.strftime('%H:%M:%S')} {msg}", flush=True)


# -- the stand-in writer -------------------------------------------------------------------------
class SinkLikeWriter:
    """Appends snapshots to a table the way the sink's commits leave it, many per REST commit."""

    def __init__(self, catalog, identifier: str) -> None:
        from pyiceberg.manifest import ManifestEntryStatus

        self.catalog, self.identifier = catalog, identifier
        self.table = catalog.load_table(identifier)
        meta = self.table.metadata
        self.meta, self.io = meta, self.table.io
        self.spec, self.schema = meta.spec(), meta.schema()
        self.arrow_schema = self.schema.as_arrow()
        current = self.table.current_snapshot()
        if current is None:
            raise RuntimeError(f"{identifier} has no snapshot: the sink's first commit is expected")
        self.parent = current.snapshot_id
        self.last_seq = meta.last_sequence_number
        self.last_ts = max(s.timestamp_ms for s in meta.snapshots)
        self.live = list(current.manifests(self.io))
        # every live entry as (snapshot id, data sequence number, file sequence number, data file): merges rewrite them
        self.entries = [
            (e.snapshot_id, e.sequence_number, e.file_sequence_number, e.data_file)
            for m in self.live for e in m.fetch_manifest_entry(self.io, discard_deleted=True)
            if e.status != ManifestEntryStatus.DELETED
        ]
        props = current.summary.additional_properties if current.summary else {}
        self.totals = {k: int(props.get(k, 0)) for k in ("total-records", "total-files-size", "total-data-files")}
        self.connect_keys = {k: v for k, v in props.items() if k.startswith("kafka.connect.")}
        self.snapshots_written = 0
        self.rest_commits = 0
        self.rest_commit_s: list[float] = []

    def _snapshot(self, df: pa.Table):
        from pyiceberg.io.pyarrow import _dataframe_to_data_files
        from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus, write_manifest, write_manifest_list
        from pyiceberg.table.snapshots import Operation, Snapshot, Summary

        snapshot_id = random.getrandbits(63) or 1
        seq = self.last_seq + 1
        files = list(_dataframe_to_data_files(self.meta, df, self.io))
        location = self.meta.location.rstrip("/")
        new_entries = [(snapshot_id, seq, seq, f) for f in files]
        merging = len(self.live) + 1 >= MERGE_MIN_COUNT
        out = self.io.new_output(f"{location}/metadata/{uuid.uuid4()}-m{1 if merging else 0}.avro")
        with write_manifest(2, self.spec, self.schema, out, snapshot_id, "deflate") as writer:
            if merging:  # one manifest with every live file (EXISTING) and the new ones (ADDED)
                for sid, dseq, fseq, data_file in self.entries:
                    writer.existing(ManifestEntry.from_args(status=ManifestEntryStatus.EXISTING, snapshot_id=sid,
                                                            sequence_number=dseq, file_sequence_number=fseq,
                                                            data_file=data_file))
            for f in files:
                writer.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id,
                                                   sequence_number=None, data_file=f))
        manifest = writer.to_manifest_file()
        live = [manifest] if merging else [manifest, *self.live]  # the newest manifest first, as Java writes it
        list_path = f"{location}/metadata/snap-{snapshot_id}-1-{uuid.uuid4()}.avro"
        with write_manifest_list(2, self.io.new_output(list_path), snapshot_id, self.parent, seq, "deflate") as ml:
            ml.add_manifests(live)
        assigned = copy.copy(manifest)
        assigned.sequence_number = seq
        if assigned.min_sequence_number == -1:
            assigned.min_sequence_number = seq
        self.live = [assigned, *live[1:]]
        self.entries.extend(new_entries)
        added_records = sum(f.record_count for f in files)
        added_bytes = sum(f.file_size_in_bytes for f in files)
        self.totals["total-records"] += added_records
        self.totals["total-files-size"] += added_bytes
        self.totals["total-data-files"] += len(files)
        summary = Summary(Operation.APPEND, **{
            "added-data-files": str(len(files)), "added-records": str(added_records), "added-files-size": str(added_bytes),
            "changed-partition-count": "1", **{k: str(v) for k, v in self.totals.items()},
            "total-delete-files": "0", "total-position-deletes": "0", "total-equality-deletes": "0",
            **self.connect_keys,
        })
        self.last_ts = max(int(time.time() * 1000), self.last_ts + 1)
        snapshot = Snapshot(snapshot_id=snapshot_id, parent_snapshot_id=self.parent, sequence_number=seq,
                            timestamp_ms=self.last_ts, manifest_list=list_path, summary=summary,
                            schema_id=self.meta.current_schema_id)
        self.parent, self.last_seq = snapshot_id, seq
        return snapshot

    def commit(self, frames: list[pa.Table]) -> None:
        """One REST commit adding ``len(frames)`` snapshots, one per frame, each then the branch head."""
        from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate

        expected = self.parent
        updates = []
        for df in frames:
            snap = self._snapshot(df)
            updates += [AddSnapshotUpdate(snapshot=snap),
                        SetSnapshotRefUpdate(ref_name="main", type="branch", snapshot_id=snap.snapshot_id)]
        started = time.perf_counter()
        self.catalog.commit_table(self.table, requirements=(AssertRefSnapshotId(ref="main", snapshot_id=expected),),
                                  updates=tuple(updates))
        self.rest_commit_s.append(time.perf_counter() - started)
        self.snapshots_written += len(frames)
        self.rest_commits += 1

    def reload(self) -> None:
        """Start again from the table as it is now (after a maintenance run changed it)."""
        self.__init__(self.catalog, self.identifier)


def ods_rows(arrow_schema: pa.Schema, n: int, *, log_date: str, first_offset: int, topic: str) -> pa.Table:
    """``n`` bet rows of the ODS table's shape, all on ``log_date``."""
    rng = random.Random(first_offset)
    day = datetime.fromisoformat(log_date).replace(tzinfo=timezone.utc)
    hours = sorted(rng.randrange(24) for _ in range(n))
    ts = [int((day + timedelta(hours=h, seconds=rng.randrange(3600))).timestamp() * 1000) for h in hours]
    by_name: dict[str, list] = {
        "category": ["biz"] * n, "event": ["bet"] * n, "log_date": [log_date] * n, "hour": [f"{h:02d}" for h in hours],
        "plat_id": [1] * n, "app_id": [10406] * n, "ts": ts, "schema_version": [1] * n,
        "user_id": [2001 + rng.randrange(1000) for _ in range(n)],
        "order_id": [str(10_000_000 + first_offset + i) for i in range(n)],
        "amount": [round(rng.uniform(1, 500), 2) for _ in range(n)],
        "currency": [rng.choice(("BRL", "USD")) for _ in range(n)], "game_id": [rng.choice((777, 778, 779)) for _ in range(n)],
        "_kafka_topic": [topic] * n, "_kafka_partition": [0] * n,
        "_kafka_offset": list(range(first_offset, first_offset + n)), "_kafka_timestamp": ts,
    }
    columns = {}
    for field in arrow_schema:
        if field.name in by_name:
            columns[field.name] = by_name[field.name]
        elif pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            columns[field.name] = ["x"] * n
        elif pa.types.is_integer(field.type):
            columns[field.name] = [0] * n
        elif pa.types.is_floating(field.type):
            columns[field.name] = [0.0] * n
        elif pa.types.is_timestamp(field.type):
            columns[field.name] = [datetime.fromtimestamp(t / 1000, timezone.utc) for t in ts]
        else:
            columns[field.name] = [None] * n
    return pa.Table.from_pydict(columns, schema=arrow_schema)


# -- measurements --------------------------------------------------------------------------------
def list_objects(s3, bucket: str, prefix: str) -> list[dict[str, Any]]:
    """Every object under ``prefix``, paged with ``StartAfter``: S3Proxy's continuation token for a key
    with ``=`` in it (``log_date=…``) comes back URL-encoded and repeats, which boto3's paginator refuses."""
    out: list[dict[str, Any]] = []
    after = ""
    while True:
        page = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1000, **({"StartAfter": after} if after else {}))
        got = page.get("Contents", [])
        out += got
        if not page.get("IsTruncated") or not got:
            return out
        after = got[-1]["Key"]


def s3_prefix_stats(s3, location: str) -> dict[str, Any]:
    """Objects under the table's location by kind: count and bytes (and the newest metadata.json's size)."""
    bucket, _, prefix = location.removeprefix("s3://").removeprefix("s3a://").partition("/")
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    newest: tuple[Any, int] | None = None
    for obj in list_objects(s3, bucket, prefix.rstrip("/") + "/"):
        key = obj["Key"]
        if key.endswith("/"):  # S3Proxy's filesystem backend lists its directories too
            continue
        name = key.rsplit("/", 1)[-1]
        if "/metadata/" in key:
            kind = ("metadata_json" if name.endswith(".metadata.json") else
                    "manifest_lists" if name.startswith("snap-") else
                    "manifests" if name.endswith(".avro") else "metadata_other")
        elif "/data/" in key:
            kind = "data_files"
        else:
            kind = "other"
        counts[kind] += 1
        sizes[kind] += obj["Size"]
        if kind == "metadata_json" and (newest is None or obj["LastModified"] > newest[0]):
            newest = (obj["LastModified"], obj["Size"])
    out: dict[str, Any] = {}
    for kind in ("metadata_json", "manifest_lists", "manifests", "data_files"):
        out[f"s3_{kind}"] = counts[kind]
        out[f"s3_{kind}_mib"] = round(sizes[kind] / 2**20, 2)
    out["s3_newest_metadata_json_kib"] = round(newest[1] / 1024, 1) if newest else 0
    return out


def measure(label: str, *, catalog, session: Session, s3, identifier: str, query_day: str, repeats: int,
            attempts: list[str]) -> dict[str, Any]:
    return retrying(f"measure {label}", lambda: _measure(label, catalog=catalog, spark=session.get(), s3=s3, identifier=identifier,
                                                         query_day=query_day, repeats=repeats), session, attempts)


def _measure(label: str, *, catalog, spark, s3, identifier: str, query_day: str, repeats: int) -> dict[str, Any]:
    spark_table = f"{SPARK_CATALOG}.{identifier}"
    started = time.perf_counter()
    table = catalog.load_table(identifier)
    load_s = time.perf_counter() - started
    meta = table.metadata
    spark.sql(f"REFRESH TABLE {spark_table}")
    one = lambda sql: spark.sql(sql).collect()[0][0]  # noqa: E731
    out: dict[str, Any] = {
        "snapshots": len(meta.snapshots),
        "snapshot_log": len(meta.snapshot_log),
        "metadata_log": len(meta.metadata_log),
        "metadata_json_tracked": len(meta.metadata_log) + 1,
        "live_data_files": one(f"SELECT count(*) FROM {spark_table}.data_files"),
        "live_manifests": one(f"SELECT count(*) FROM {spark_table}.manifests"),
        "records": one(f"SELECT coalesce(sum(record_count), 0) FROM {spark_table}.data_files"),
    }
    t0 = time.perf_counter()
    out["referenced_data_files"] = one(f"SELECT count(DISTINCT file_path) FROM {spark_table}.all_data_files")
    out["referenced_manifests"] = one(f"SELECT count(DISTINCT path) FROM {spark_table}.all_manifests")
    out["all_files_scan_s"] = round(time.perf_counter() - t0, 2)
    out["catalog_load_table_s"] = round(load_s, 3)
    out.update(s3_prefix_stats(s3, meta.location))
    sql = f"SELECT count(*) AS n, sum(amount) AS amount FROM {spark_table} WHERE log_date = '{query_day}'"
    cold, warm = [], []
    result = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        spark.sql(f"REFRESH TABLE {spark_table}")
        result = spark.sql(sql).collect()[0]
        cold.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        spark.sql(sql).collect()
        warm.append(time.perf_counter() - t0)
    out["query_s"] = round(statistics.median(cold), 3)
    out["query_warm_s"] = round(statistics.median(warm), 3)
    out["query_rows"] = int(result["n"]) if result else 0
    log(f"{label}: " + json.dumps(out))
    return out


class Session:
    """The benchmark's own Spark Connect session, attached again when the server went away (the stack
    is shared: another session's test may restart the Spark Connect server mid-run)."""

    def __init__(self, remote: str) -> None:
        self.remote = remote
        self.spark = None
        self.reattached = 0

    def get(self):
        from lakebus_dagster.lake.spark import attach

        if self.spark is None:
            self.spark = attach(self.remote, timeout_s=120)
        return self.spark

    def reset(self) -> None:
        try:
            if self.spark is not None:
                self.spark.stop()
        except Exception:  # noqa: BLE001 - the server is gone already
            pass
        self.spark = None
        self.reattached += 1
        wait_for_spark(self.remote)

    def stop(self) -> None:
        try:
            if self.spark is not None:
                self.spark.stop()
        except Exception:  # noqa: BLE001
            pass


def wait_for_spark(remote: str, timeout_s: float = 300.0) -> None:
    from lakebus_dagster.lake.spark import attach

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            attach(remote, timeout_s=5).stop()
            return
        except Exception:  # noqa: BLE001 - not back yet
            if time.monotonic() > deadline:
                raise
            time.sleep(5)


def retrying(what: str, fn, session: Session, attempts: list[str]):
    """``fn()``, once more after the Spark Connect server came back if it failed because it went away."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001
        text = str(exc)
        if not any(s in text for s in ("stopped SparkContext", "UNAVAILABLE", "Connection refused", "SparkConnectUnreachable",
                                       "INVALID_HANDLE", "SESSION_NOT_FOUND", "OPERATION_CANCELED")):
            raise
        attempts.append(f"{what}: {type(exc).__name__}: {text.splitlines()[0][:300]}")
        log(f"{what} failed because the Spark Connect server went away ({text.splitlines()[0][:200]}); retrying once it answers")
        session.reset()
        return fn()


def maintenance(resources: dict, config: dict[str, Any]) -> tuple[float, list[dict]]:
    from lakebus_dagster.definitions import defs

    run_config = {"ops": {"maintain_lakehouse": {"config": config}}, **QUIET}
    started = time.perf_counter()
    result = defs.resolve_job_def("lakehouse_maintenance").execute_in_process(resources=resources, run_config=run_config,
                                                                             raise_on_error=False)
    seconds = time.perf_counter() - started
    if not result.success:
        failures = []
        for e in result.all_events:
            if e.is_step_failure:
                err = e.event_specific_data.error
                while err is not None and err.cause is not None and "DagsterExecutionStepExecutionError" in err.cls_name:
                    err = err.cause
                failures.append(f"{err.cls_name}: {err.message.strip()[:1500]}" if err else "?")
        raise RuntimeError(f"lakehouse_maintenance {config} failed after {seconds:.0f} s: {failures}")
    return seconds, result.output_for_node("maintain_lakehouse")


def _report_of(reports: list[dict], identifier: str) -> dict:
    return next((r for r in reports if r["table"].endswith(identifier)), {})


def _flat_report(name: str, report: dict) -> dict[str, Any]:
    """The maintenance run's own counters for the table (its TableReport), as scalar results."""
    compaction, manifests, expiry = report.get("compaction") or {}, report.get("manifests") or {}, report.get("expiry") or {}
    out = {
        f"{name}_rewritten_data_files": compaction.get("rewritten_data_files_count", 0),
        f"{name}_added_data_files": compaction.get("added_data_files_count", 0),
        f"{name}_rewritten_manifests": manifests.get("rewritten_manifests_count", 0),
        f"{name}_expired_data_files": expiry.get("deleted_data_files_count", 0),
        f"{name}_expired_manifests": expiry.get("deleted_manifest_files_count", 0),
        f"{name}_expired_manifest_lists": expiry.get("deleted_manifest_lists_count", 0),
        f"{name}_orphans_removed": "skipped" if report.get("orphan_files") is None else len(report["orphan_files"]),
    }
    out.update({f"{name}_{step}_s": round(s, 1) for step, s in (report.get("seconds") or {}).items()})
    if report.get("notes"):
        out[f"{name}_notes"] = "; ".join(report["notes"])[:300]
    return out


# -- the run -------------------------------------------------------------------------------------
def run(commits: int = 10_000, rows_per_commit: int = 20, days: int = 30, batch: int = 50, tail_commits: int = 60,
        extra_commits: int = 100, repeats: int = 5, max_write_s: float = 1200.0, keep: bool = False) -> dict[str, Any]:
    from lakebus_dagster.connect import ConnectClient
    from lakebus_dagster.definitions import defs
    from lakebus_dagster.defs.environment import build_resources
    from lakebus_dagster.defs.resources import BusLayoutResource
    from lakebus_dagster.events import EventProducer, GeneratorConfig, generate_events
    from lakebus_dagster.lake.catalog import load_catalog
    from lakebus_dagster_tests.lake_counts import committed_rows
    from lakebus_dagster.stack.s3 import s3_client

    settings = load_stack_settings()
    load_local_secrets(settings)
    if not settings.spark.remote:
        raise SystemExit("bench_compressed_month queries through the stack's Spark Connect server: unset LAKEBUS_SPARK_REMOTE=local")
    suffix = f"benchcm{uuid.uuid4().hex[:6]}"
    resources = {**build_resources(settings), "layout": BusLayoutResource(name_suffix=suffix, commit_interval_ms=1000)}
    layout = resources["layout"].layout()
    identifier = layout.routes["bet"]
    results: dict[str, Any] = {"bus_suffix": suffix, "table": identifier, "load_1min_at_start": round(os.getloadavg()[0], 2)}
    catalog, s3 = load_catalog(settings), s3_client(settings)
    client = ConnectClient(settings.connect.urls[0])
    session: Session | None = None
    try:
        log(f"provisioning the isolated bus {suffix} (provision_lakebus) ...")
        assert defs.resolve_job_def("provision_lakebus").execute_in_process(resources=resources, run_config=QUIET).success
        today = datetime.now(timezone.utc).date().isoformat()
        seed = list(generate_events(GeneratorConfig(count=20, seed=30, event_weights={"bet": 1.0}, days=(today,))))
        with EventProducer(layout.bus_topic.name, settings.kafka.client_config()) as producer:
            for event in seed:
                producer.send(event)
        deadline = time.monotonic() + 300
        while committed_rows(catalog, identifier) < len(seed):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the sink did not land {len(seed)} bets in {identifier} within 300 s")
            time.sleep(1)
        table = catalog.load_table(identifier)
        results.update({f"property {k}": v for k, v in sorted(table.properties.items()) if k not in ("write.parquet.compression-codec",)})
        results["partition_spec"] = ", ".join(f"{f.name}: {f.transform}" for f in table.spec().fields) or "unpartitioned"
        log(f"the sink created {identifier}: spec {table.spec()}, properties {dict(table.properties)}")

        writer = SinkLikeWriter(catalog, identifier)
        first = date.fromisoformat(today) - timedelta(days=days - 1)
        query_day = (first + timedelta(days=days // 2)).isoformat()

        def frame(i: int, total: int) -> pa.Table:
            day = (first + timedelta(days=min(days - 1, i * days // total))).isoformat()
            return ods_rows(writer.arrow_schema, rows_per_commit, log_date=day, first_offset=1_000_000 + i * rows_per_commit,
                            topic=layout.bus_topic.name)

        # the month: `batch` snapshots per REST commit, then `tail_commits` single-snapshot commits
        started = time.perf_counter()
        bulk = max(0, commits - tail_commits)
        i, last_log = 0, started
        while i < bulk and time.perf_counter() - started < max_write_s:
            n = min(batch, bulk - i)
            writer.commit([frame(i + k, commits) for k in range(n)])
            i += n
            if time.perf_counter() - last_log > 60:
                last_log = time.perf_counter()
                log(f"{i} snapshots in {last_log - started:.0f} s (last REST commit {writer.rest_commit_s[-1]:.2f} s)")
        tail_started = time.perf_counter()
        for k in range(tail_commits if i >= bulk else 0):
            writer.commit([frame(i, commits)])
            i += 1
        tail_s = time.perf_counter() - tail_started
        write_s = time.perf_counter() - started
        results.update({
            "commits_target": commits, "snapshots_written": writer.snapshots_written, "rest_commits": writer.rest_commits,
            "rows_per_commit": rows_per_commit, "days": days, "batch": batch, "write_s": round(write_s, 1),
            "tail_commit_s_median": round(statistics.median(writer.rest_commit_s[-tail_commits:]), 3) if tail_s else None,
            "query_day": query_day,
        })
        if writer.snapshots_written < commits:
            log(f"only {writer.snapshots_written} of {commits} snapshots fit in {max_write_s:.0f} s")
        log(f"wrote {writer.snapshots_written} snapshots in {writer.rest_commits} REST commits, {write_s:.0f} s")

        session = Session(settings.spark.remote)
        attempts: list[str] = []
        kw = dict(catalog=catalog, session=session, s3=s3, identifier=identifier, query_day=query_day, repeats=repeats,
                  attempts=attempts)
        phases: dict[str, dict[str, Any]] = {"before": measure("before", **kw)}

        passes = [("pass1_shipped", {"scope": "full"}), ("pass2_expire_0h", {"scope": "full", "expire_older_than_hours": 0})]
        for name, config in passes:
            log(f"{name}: lakehouse_maintenance {config} ...")
            seconds, reports = retrying(name, lambda: maintenance(resources, config), session, attempts)
            report = _report_of(reports, identifier)
            log(f"{name}: {seconds:.0f} s, report {json.dumps({k: v for k, v in report.items() if k not in ('before', 'after')}, default=str)[:2000]}")
            results[f"{name}_s"] = round(seconds, 1)
            results.update(_flat_report(name, report))
            phases[name] = measure(name, **kw)

        # pass 3: the sink goes on committing (one snapshot per commit), then the day-30 pass again
        writer.reload()
        for k in range(extra_commits):
            writer.commit([frame(commits - 1, commits)])
        log(f"pass3: {extra_commits} more single commits; lakehouse_maintenance expire 0 h ...")
        seconds, reports = retrying("pass3", lambda: maintenance(resources, passes[1][1]), session, attempts)
        report = _report_of(reports, identifier)
        log(f"pass3: {seconds:.0f} s, report {json.dumps({k: v for k, v in report.items() if k not in ('before', 'after')}, default=str)[:2000]}")
        results["pass3_extra_commits"] = extra_commits
        results["pass3_s"] = round(seconds, 1)
        results.update(_flat_report("pass3", report))
        phases["pass3_after_more_commits"] = measure("pass3_after_more_commits", **kw)

        for phase, values in phases.items():
            results.update({f"{phase}_{k}": v for k, v in values.items()})
        before = phases["before"]
        for phase in ("pass1_shipped", "pass2_expire_0h", "pass3_after_more_commits"):
            results[f"{phase}_query_speedup"] = round(before["query_s"] / phases[phase]["query_s"], 2)
        results["spark_connect_lost_and_retried"] = len(attempts)
        for n, attempt in enumerate(attempts, 1):
            results[f"retried_{n}"] = attempt[:200]
        results["load_1min_at_end"] = round(os.getloadavg()[0], 2)
        return results
    finally:
        if session is not None:
            session.stop()
        if client.exists(layout.connector_name):
            client.delete(layout.connector_name)
        client.close()
        if not keep:
            _drop(catalog, s3, layout.routes.values())


def _drop(catalog, s3, identifiers) -> None:
    """Drop the benchmark's tables and namespace and delete their objects (the catalog's purge does not
    delete on the local S3Proxy), one key at a time."""
    namespaces = set()
    for identifier in identifiers:
        namespaces.add(identifier.split(".")[0])
        try:
            location = catalog.load_table(identifier).metadata.location
        except Exception:  # noqa: BLE001 - never created
            continue
        catalog.drop_table(identifier)
        bucket, _, prefix = location.removeprefix("s3://").partition("/")
        keys = [obj["Key"] for obj in list_objects(s3, bucket, prefix.rstrip("/") + "/")]
        for key in sorted(keys, key=lambda k: (k.endswith("/"), -k.count("/"))):  # files first, then the deepest directories
            try:
                s3.delete_object(Bucket=bucket, Key=key)
            except Exception:  # noqa: BLE001 - a directory the backend still lists as not empty
                pass
    for ns in namespaces:
        try:
            catalog.drop_namespace(ns)
        except Exception:  # noqa: BLE001 - not empty (another table) or gone
            pass


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_compressed_month")
    p.add_argument("--commits", type=int, default=10_000)
    p.add_argument("--batch", type=int, default=50)
    p.add_argument("--tail-commits", type=int, default=60)
    p.add_argument("--extra-commits", type=int, default=100)
    p.add_argument("--rows-per-commit", type=int, default=20)
    p.add_argument("--max-write-s", type=float, default=1200.0)
    p.add_argument("--keep", action="store_true", help="keep the tables and their files")
    args = p.parse_args(argv)
    from benchmarks.recording import record_run

    return record_run("bench_compressed_month", lambda: run(
        commits=args.commits, batch=args.batch, tail_commits=args.tail_commits, extra_commits=args.extra_commits,
        rows_per_commit=args.rows_per_commit, max_write_s=args.max_write_s, keep=args.keep))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
