"""Change capture from PostgreSQL into the lake (issue 30): change events per second from the
database to the current-state table, and the end-to-end latency of one update (database commit →
visible in the lake), against a **baseline** measured in the same run: the batch copy a team does
without change capture (``SELECT *`` of the table → one Iceberg overwrite), whose latency for one
update is a whole copy.

Real parts: the stack's PostgreSQL, the Debezium source and the change-table Iceberg sink on the
stack's Connect worker (exactly-once where the stack runs it), the REST catalog, S3, and the
current-state MERGE on the stack's Spark Connect server. A capture of its own (``bench_<id>``) over
a table of its own in the demo database (``app.bench_<id>``: bigint key, numeric(12,2), text,
timestamptz), the sink at the shipped commit interval (10 s) unless ``--commit-ms`` says otherwise;
all of it removed afterwards.

* **throughput** — ``rows`` inserts then ``updates`` updates, written as fast as the database takes
  them (transactions of 1,000), then timed until the change table holds every event and until the
  MERGE has applied them: events / s from the first write to each.
* **latency** — ``samples`` single-row updates on an idle capture, each at a random point of the
  sink's commit cycle, timed from its commit to the
  change table (the sink's commit) and to the current-state table (one MERGE started as soon as the
  change is there: what a ``cdc_current_state`` run right then gives).
* **baseline** — the same table copied whole (pyiceberg overwrite): rows / s, and its latency for one
  update = one copy. Both legs' final tables must equal the database (``*_matches_database``).

    python -m benchmarks bench_cdc            (needs the stack with LAKEBUS_POSTGRES=on)
    python -m benchmarks.bench_cdc --rows 60000 --updates 40000 --samples 10 --commit-ms 10000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from contextlib import closing
from typing import Any

import psycopg2

from lakebus_dagster.cdc import demo
from lakebus_dagster.cdc.current_state import merge_current_state
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster_tests.integration.helpers import wait_for
from lakebus_dagster_tests.cleanup import remove_capture
from lakebus_dagster_tests.lake_counts import committed_rows
from lakebus_dagster.settings import load_local_secrets
from lakebus_dagster.stack.local_settings import load_stack_settings
from lakebus_dagster.stack.postgres_service import superuser_dsn


def log(line: str) -> None:
    print(f"[bench_cdc] {line}", flush=True)


def _sql(settings, statements: list[tuple], fetch: bool = False) -> list:
    with closing(psycopg2.connect(**superuser_dsn(settings, settings.capture.db))) as conn, conn, conn.cursor() as cur:
        for statement, *params in statements:
            cur.execute(statement, *params)
        return cur.fetchall() if fetch else []


def setup(settings, run_id: str, commit_ms: int):
    """The table, its capture provisioned (snapshot of an empty table), the suffixed layout."""
    from lakebus_dagster.definitions import defs
    from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
    from lakebus_dagster.defs.environment import build_resources
    from lakebus_dagster.defs.resources import BusLayoutResource

    table = f"bench_{run_id}"
    qualified = f"{demo.SCHEMA}.{table}"
    _sql(settings, [(f"CREATE TABLE {qualified} (id bigint PRIMARY KEY, amount numeric(12,2) NOT NULL, status text NOT NULL, "
                     "updated_at timestamptz NOT NULL DEFAULT now())",),
                    (f"ALTER TABLE {qualified} OWNER TO {demo.OWNER_ROLE}",),
                    (f"GRANT SELECT ON {qualified} TO {settings.capture.user}",)])
    base = ChangeCaptureResource.from_settings(settings)
    capture = ChangeCaptureResource(enabled=True, name=f"bench_{run_id}", host=base.host, port=base.port,
                                    database=base.database, user=base.user, namespace=f"bench_cdc_{run_id}", tables=[table],
                                    commit_interval_ms=commit_ms, exactly_once=base.exactly_once,
                                    signal_bootstrap=base.signal_bootstrap)
    layout = BusLayoutResource(name_suffix=run_id, commit_interval_ms=commit_ms)
    run = defs.resolve_job_def("provision_change_capture").execute_in_process(
        resources={**build_resources(settings), "capture": capture, "layout": layout})
    if not run.success:
        raise RuntimeError("bench_cdc: provision_change_capture failed")
    return table, capture.spec()


def teardown(settings, spec, table: str, run_id: str, catalog) -> None:
    from lakebus_dagster.kafka import KafkaClients

    remove_capture(settings, spec)  # the connectors, then the slot once released, and the publication
    _sql(settings, [(f"DROP TABLE IF EXISTS {demo.SCHEMA}.{table}",)])
    for name in catalog.list_tables(spec.namespace):
        catalog.purge_table(name)
    catalog.drop_namespace(spec.namespace)
    admin = KafkaClients(settings.kafka.client_config()).admin()
    mine = [t for t in admin.list_topics(timeout=10).topics if run_id in t]
    if mine:
        for future in admin.delete_topics(mine, operation_timeout=30).values():
            future.result()


def _spark(settings):
    from lakebus_dagster.lake.spark import attach

    if not settings.spark.remote:
        raise SystemExit("bench_cdc: needs the stack's Spark Connect server (LAKEBUS_SPARK_REMOTE is local)")
    return attach(settings.spark.remote)


def measure_throughput(settings, spec, table: str, catalog, spark, rows: int, updates: int) -> dict[str, Any]:
    qualified, name = f"{demo.SCHEMA}.{table}", spec.change_table(table)
    before = committed_rows(catalog, name)
    started = time.time()
    for first in range(1, rows + 1, 1000):
        _sql(settings, [(f"INSERT INTO {qualified} (id, amount, status) SELECT g, (g %% 997) + 0.25, 'new' "
                         "FROM generate_series(%s, %s) g", (first, min(first + 999, rows)))])
    for first in range(1, updates + 1, 1000):
        _sql(settings, [(f"UPDATE {qualified} SET status = 'paid', amount = amount + 1, updated_at = now() "
                         "WHERE id BETWEEN %s AND %s", (first, min(first + 999, updates)))])
    written = time.time()
    events = rows + updates
    wait_for(lambda: committed_rows(catalog, name) >= before + events, f"{events} changes in {name}", 900)
    landed = time.time()
    stats = merge_current_state(spark, spec, table)
    merged = time.time()
    log(f"{events} events: written in {written - started:.1f}s, in the change table after {landed - started:.1f}s, "
        f"merged ({stats.rows} rows) after {merged - started:.1f}s")
    return {"events": events, "db_write_events_per_s": round(events / (written - started), 1),
            "change_table_events_per_s": round(events / (landed - started), 1),
            "current_state_events_per_s": round(events / (merged - started), 1),
            "merge_s": round(merged - landed, 1), "current_state_rows": stats.rows}


def measure_latency(settings, spec, table: str, catalog, spark, samples: int, commit_ms: int) -> dict[str, Any]:
    import random

    from pyiceberg.expressions import EqualTo

    to_change, to_current, rng = [], [], random.Random(30)
    for i in range(samples):
        # a random phase within the sink's commit interval (a fixed pause would lock every sample to
        # the same point of the commit cycle); the update is alone in its window
        time.sleep(rng.uniform(0, commit_ms / 1000))
        marker = f"lat{i}"
        _sql(settings, [(f"UPDATE {demo.SCHEMA}.{table} SET status = %s, updated_at = now() WHERE id = 1", (marker,))])
        committed = time.time()
        wait_for(lambda: catalog.load_table(spec.change_table(table)).scan(row_filter=EqualTo("status", marker)).to_arrow().num_rows,
              f"update {marker} in the change table", 300, interval=0.2)
        to_change.append(time.time() - committed)
        merge_current_state(spark, spec, table)
        current = catalog.load_table(spec.current_table(table)).scan(row_filter=EqualTo("id", 1)).to_arrow().to_pylist()
        if current[0]["status"] != marker:
            raise RuntimeError(f"bench_cdc: the current state shows {current[0]['status']!r}, not {marker!r}")
        to_current.append(time.time() - committed)
        log(f"update {marker}: change table after {to_change[-1]:.1f}s, current state after {to_current[-1]:.1f}s")
    return {"latency_to_change_table_p50_s": round(statistics.median(to_change), 1),
            "latency_to_change_table_max_s": round(max(to_change), 1),
            "latency_to_current_state_p50_s": round(statistics.median(to_current), 1),
            "latency_to_current_state_max_s": round(max(to_current), 1), "latency_samples": samples}


def measure_baseline(settings, spec, table: str, spark) -> dict[str, Any]:
    """A batch copy: the whole table read and written as one Iceberg table replace through the same
    Spark Connect server (latency = one copy)."""
    import pyarrow as pa

    from lakebus_dagster.lake.spark import SPARK_CATALOG

    name = f"{SPARK_CATALOG}.{spec.namespace}.{table}_copy"
    started = time.time()
    with closing(psycopg2.connect(**superuser_dsn(settings, settings.capture.db))) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT id, amount, status, updated_at FROM {demo.SCHEMA}.{table}")
        rows = cur.fetchall()
    arrow = pa.Table.from_pylist([dict(zip(("id", "amount", "status", "updated_at"), r)) for r in rows], schema=pa.schema([
        ("id", pa.int64()), ("amount", pa.decimal128(12, 2)), ("status", pa.string()), ("updated_at", pa.timestamp("us", "UTC"))]))
    spark.createDataFrame(arrow).writeTo(name).using("iceberg").createOrReplace()
    took = time.time() - started
    log(f"baseline: {len(rows)} rows copied whole in {took:.1f}s")
    return {"baseline_copy_rows_per_s": round(len(rows) / took, 1), "baseline_latency_one_update_s": round(took, 1),
            "baseline_rows": len(rows)}


def _matches(settings, catalog, name: str, table: str) -> int:
    """1 when the lake table holds exactly the database's rows (id, amount, status), else 0."""
    db = {r[0]: (r[1], r[2]) for r in _sql(settings, [(f"SELECT id, amount, status FROM {demo.SCHEMA}.{table}",)], fetch=True)}
    lake = {r["id"]: (r["amount"], r["status"]) for r in catalog.load_table(name).scan(
        selected_fields=("id", "amount", "status")).to_arrow().to_pylist()}
    return int(db == lake)


def run(rows: int = 60_000, updates: int = 40_000, samples: int = 10, commit_ms: int = 10_000) -> dict[str, Any]:
    import os

    settings = load_stack_settings()
    if not settings.capture.enabled:
        raise SystemExit("bench_cdc: needs LAKEBUS_POSTGRES=on (the stack's PostgreSQL, Debezium)")
    load_local_secrets(settings)
    catalog, run_id = load_catalog(settings), uuid.uuid4().hex[:6]
    results: dict[str, Any] = {"commit_interval_ms": commit_ms, "load_1min_at_start": round(os.getloadavg()[0], 2)}
    table, spec = setup(settings, run_id, commit_ms)
    spark = _spark(settings)
    try:
        results.update(measure_throughput(settings, spec, table, catalog, spark, rows, updates))
        results.update(measure_latency(settings, spec, table, catalog, spark, samples, commit_ms))
        results.update(measure_baseline(settings, spec, table, spark))
        results["current_state_matches_database"] = _matches(settings, catalog, spec.current_table(table), table)
        results["baseline_matches_database"] = _matches(settings, catalog, f"{spec.namespace}.{table}_copy", table)
        results["cdc_vs_baseline_latency_ratio"] = round(
            results["latency_to_current_state_p50_s"] / results["baseline_latency_one_update_s"], 2)
        # a copy's latency grows with the table, change capture's with the changes: the table size above
        # which one update reaches the lake sooner through capture than through a whole copy
        results["break_even_table_rows"] = int(results["latency_to_current_state_p50_s"] * results["baseline_copy_rows_per_s"])
        results["load_1min_at_end"] = round(os.getloadavg()[0], 2)
    finally:
        spark.stop()
        teardown(settings, spec, table, run_id, catalog)
    return results


def main(argv: list[str]) -> int:
    from benchmarks.recording import record_run

    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_cdc", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=60_000)
    parser.add_argument("--updates", type=int, default=40_000)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--commit-ms", type=int, default=10_000)
    args = parser.parse_args(argv[1:])
    return record_run("bench_cdc", lambda: run(args.rows, args.updates, args.samples, args.commit_ms))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
