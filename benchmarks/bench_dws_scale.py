"""DWS at a real bus's volume: one hour of millions of bets, built as the hourly schedule builds it.

The demo's hours hold a few hundred events; a real bus carries millions of bets an hour. Here the
ODS tables of an isolated bus (created by the real sink from a handful of real events, so their
schema, partitioning and properties are the sink's) get synthetic hours appended through the stack's
Spark Connect server, each row with the sink's columns, provenance columns included:

* **baseline**: an hour of ``baseline_bets`` bets (a third as many recharges), the demo's scale;
* **scale**: another hour of the same day with ``bets`` bets (and a third as many recharges).

Each hour is appended in the sink's file shapes: the sink commits every 10 s and writes one file
per table and day partition per commit, so an hour is ``FILES_PER_HOUR`` files (the version-2
columns, the typed amount and event time, filled when the table has them). Each hour is then built
the way the hourly schedule's run builds it: ``dws_hourly_job`` for that
partition, ``dagster job execute`` (one process per step, the steps attached to the Spark Connect
server, the partition checks in the step that wrote the table). Measured per hour: the run's wall
time and its own duration (as the UI shows it), CPU of the run's processes, of the Spark Connect
server and of the worker's executors, and the DWS rows written; checked: every check passed (the
run fails otherwise) and the hour's bet count and amount in ``dws_biz_bet_hour`` equal the ODS rows
(summed here through pyiceberg, not Spark). ``scale_s_per_million_bets`` and ``scale_vs_baseline``
say how the run grows with the hour; the target is that a 10-million-bet hour builds in 60 s.
Then ``dws_daily_job`` builds the day that holds both hours, as the daily schedule's run does
(target: 120 s).

    python -m benchmarks bench_dws_scale                 (needs the local stack: make stack-up)
    python -m benchmarks.bench_dws_scale [bets] [baseline_bets]
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
import uuid
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from benchmarks.bench_dws_latency import connect_stack_settings, delete_connector, run_job
from benchmarks.bench_lakehouse import _select
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster.events import EventProducer, GeneratorConfig, generate_events
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.lake.dws import BET_HOUR, LakehouseTables
from lakebus_dagster.lake.spark import attach
from lakebus_dagster.settings import Settings
from lakebus_dagster_tests.lake_counts import committed_rows

DAY = date(2025, 11, 30)
#: the hours the two shapes fill (the real events that create the tables land on the day before)
HOURS = {"baseline": 10, "scale": 12}
#: the sink's data files in an hour of a day-partitioned table: one per 10 s commit
FILES_PER_HOUR = 360


def create_tables(settings: Settings, suffix: str) -> LakehouseTables:
    """Provision an isolated bus and let the real sink create its ODS tables from a few real events."""
    from lakebus_dagster.definitions import defs

    resources = {**build_resources(settings), "layout": BusLayoutResource(name_suffix=suffix)}
    layout = resources["layout"].layout()
    assert defs.resolve_job_def("provision_lakebus").execute_in_process(resources=resources).success
    events = list(generate_events(GeneratorConfig(count=40, seed=7, days=(str(DAY - timedelta(days=1)),), users=20)))
    with EventProducer(layout.bus_topic.name, settings.kafka.client_config()) as producer:
        for event in events:
            producer.send(event)
    catalog, deadline = load_catalog(settings), time.monotonic() + 300
    while sum(committed_rows(catalog, t) for t in layout.routes.values()) < len(events):
        if time.monotonic() > deadline:
            raise TimeoutError("the sink did not create the ODS tables within 300 s")
        time.sleep(1)
    return LakehouseTables.from_routes(layout.routes)


def append_hour(spark, tables: LakehouseTables, hour: int, bets: int) -> float:
    """``bets`` bets and a third as many recharges, all in ``DAY`` ``hour``, each with a position of
    its own on a bench topic (from its order id: no position twice), in ``FILES_PER_HOUR`` files per
    table as the sink writes them. Seconds the two appends took."""
    started = time.monotonic()
    for event, count in (("bet", bets), ("recharge", max(1, bets // 3))):
        table = tables.qualified(tables.ods_table(event))
        columns = set(spark.table(table).columns)
        typed = (", CAST(amount AS DECIMAL(18,2)) AS amount_decimal, timestamp_millis(ts) AS event_time"
                 if {"amount_decimal", "event_time"} <= columns else "")
        # _select spreads a day's ``per_day`` rows over 24 hours: rows hour*count .. (hour+1)*count of
        # a day of 24 x count fall in ``hour``
        hour_rows = _select(event, DAY, count * 24, hour * count, (hour + 1) * count)
        rows = spark.sql(
            f"SELECT *, 'bench' AS _kafka_topic, 0 AS _kafka_partition, coalesce(CAST(order_id AS BIGINT), 0) AS _kafka_offset, "
            f"ts AS _kafka_timestamp{typed} FROM ({hour_rows})"
        )
        # in time order, cut into the sink's commits (no shuffle by the table's partition: one day)
        rows.repartitionByRange(min(FILES_PER_HOUR, count), "ts").writeTo(table).option("distribution-mode", "none").append()
    return time.monotonic() - started


def data_files(spark, tables: LakehouseTables, event: str) -> int:
    return spark.sql(f"SELECT count(*) AS n FROM {tables.qualified(tables.ods_table(event))}.files").collect()[0]["n"]


def ods_hour(catalog, tables: LakehouseTables, hour: int) -> tuple[int, float]:
    """(bets, amount) of ``DAY`` ``hour`` in the ODS bet table, read through pyiceberg."""
    rows = catalog.load_table(tables.ods_table("bet")).scan(
        row_filter=f"log_date == '{DAY}' and hour == '{hour:02d}'", selected_fields=("amount",)).to_arrow()
    return rows.num_rows, float(pc.sum(rows.column("amount")).as_py() or 0.0)


def dws_hour(catalog, tables: LakehouseTables, hour: int) -> tuple[int, int, float]:
    """(rows, bets, amount) of ``DAY`` ``hour`` in ``dws_biz_bet_hour``."""
    rows = [r for r in catalog.load_table(tables.dws(BET_HOUR)).scan().to_arrow().to_pylist()
            if str(r["log_date"]) == str(DAY) and r["hour"] == hour]
    return len(rows), sum(r["bet_count"] for r in rows), float(sum(r["amount"] for r in rows))


def run(bets: int = 10_000_000, baseline_bets: int = 20_000) -> dict[str, Any]:
    settings = connect_stack_settings("bench_dws_scale")
    suffix = f"benchscale{uuid.uuid4().hex[:6]}"
    tables = create_tables(settings, suffix)
    catalog = load_catalog(settings)
    spark = attach(settings.spark.remote)
    home = tempfile.mkdtemp(prefix="bench-dws-scale-")
    Path(home, "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    results: dict[str, Any] = {"bets": bets, "baseline_bets": baseline_bets}
    try:
        for shape, count in (("baseline", baseline_bets), ("scale", bets)):
            hour = HOURS[shape]
            results[f"{shape}_append_s"] = round(append_hour(spark, tables, hour, count), 1)
            ods_bets, ods_amount = ods_hour(catalog, tables, hour)
            if ods_bets != count:
                raise AssertionError(f"{shape}: {ods_bets} bets in the ODS hour, appended {count}")
            measured = run_job(settings, home, suffix, {"dagster/partition": f"{DAY}-{hour:02d}:00"}, {})
            print(f"[bench_dws_scale] {shape} ({count:,} bets): {json.dumps(measured)}", flush=True)
            results.update({f"{shape}_{k}": v for k, v in measured.items()})
            rows, dws_bets, dws_amount = dws_hour(catalog, tables, hour)
            if dws_bets != count or abs(dws_amount - ods_amount) > 1e-6 * max(1.0, ods_amount):
                raise AssertionError(f"{shape}: dws_biz_bet_hour holds {dws_bets} bets / {dws_amount:.2f}, "
                                     f"the ODS {count} / {ods_amount:.2f}")
            results[f"{shape}_dws_bet_rows"] = rows
        results["ods_bet_files"] = data_files(spark, tables, "bet")
        day = run_job(settings, home, suffix, {"dagster/partition": str(DAY)}, {}, job="dws_daily_job")
        print(f"[bench_dws_scale] day {DAY} (both hours): {json.dumps(day)}", flush=True)
        results.update({f"day_{k}": v for k, v in day.items()})
        results["scale_s_per_million_bets"] = round(results["scale_run_s"] / (bets / 1e6), 2)
        results["scale_vs_baseline"] = round(results["scale_run_s"] / results["baseline_run_s"], 2)
    finally:
        spark.stop()
        shutil.rmtree(home, ignore_errors=True)
        delete_connector(settings, suffix)
    return results


def main(argv: list[str]) -> None:
    bets = int(argv[1]) if len(argv) > 1 else 10_000_000
    baseline = int(argv[2]) if len(argv) > 2 else 20_000
    print(json.dumps(run(bets, baseline), indent=1))


if __name__ == "__main__":
    main(sys.argv)
