"""The lakehouse on the local stack: DWS refresh cost vs ODS history, small files, bytes per event.

(a) **One hour-partition materialization, ODS holding 1 day vs 30 days.** Synthetic ODS tables
with the sink's schema are written directly with Spark (``bets_per_day`` bets and a third as many
recharges per day, one data file per day, like a sink whose commits follow the clock), in two
layouts: *unpartitioned* — what the sink auto-creates, since the connector config sets no
``iceberg.tables.default-partition-by`` — and *partitioned by log_date*. For each, the hour tables
(``dws_biz_bet_hour`` + ``dws_biz_recharge_hour``) of one hour of the last day are refreshed with
the same code as the assets (:func:`lakebus_dagster.lake.dws.build_scope`); median of ``repeats`` warm
runs. Files scanned = ODS data files left after Iceberg's pruning for the hour's predicate (pyiceberg
plans the same min/max and partition pruning). Target: 30-day time <= 1.5x the 1-day time.

(b) **Scan before vs after compaction.** An ODS-shaped table written in ``small_commits`` INSERTs
of ``rows_per_commit`` rows (like the sink's commit-interval files), scanned by a DWS-like
aggregate (median of ``repeats`` warm runs), then compacted by the maintenance code
(``rewrite_data_files`` + ``rewrite_manifests``) and scanned again. Target: >= 3x faster after.

(c) **Parquet bytes per event.** ``sink_events`` generated events sent through a real, isolated bus
(provisioned like the tests, the sink's default 10 s commit interval) into the two ODS tables; the
tables' data bytes per event against the Schema+JSON envelope bytes per event, as the sink wrote
them and after compaction. Target: <= 5 % of the raw envelope.

    python benchmarks/bench_lakehouse.py     (needs the local stack: make stack-up)
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from typing import Any

from lakebus_dagster.lake import dws
from lakebus_dagster.lake.catalog import LakeEndpoints, load_catalog
from lakebus_dagster.lake.maintenance import rewrite_data_files, rewrite_manifests, table_files
from lakebus_dagster.lake.spark import prepare_driver_env, spark_conf, spark_jars
from lakebus_dagster.settings import Settings, load_local_secrets
from lakebus_dagster.stack.local_settings import load_stack_settings

LAST_DAY = date(2025, 11, 30)
HOUR = 12

ODS_COLUMNS = {
    "bet": "category string NOT NULL, event string NOT NULL, log_date string NOT NULL, hour string NOT NULL, "
    "plat_id int NOT NULL, app_id int NOT NULL, ts bigint NOT NULL, schema_version int NOT NULL, "
    "user_id int, order_id string, amount double, currency string, game_id int",
    "recharge": "category string NOT NULL, event string NOT NULL, log_date string NOT NULL, hour string NOT NULL, "
    "plat_id int NOT NULL, app_id int NOT NULL, ts bigint NOT NULL, schema_version int NOT NULL, "
    "status string, user_id int, order_id string, amount double, currency string, reason string",
}


def _select(event: str, first_day: date, per_day: int, start: int, end: int, partitions: int | None = None) -> str:
    """Deterministic ODS rows ``start``..``end`` (``per_day`` per day from ``first_day``), in time order."""
    common = (
        f"'biz' AS category, '{event}' AS event, "
        f"date_format(date_add(DATE '{first_day}', CAST(id DIV {per_day} AS INT)), 'yyyy-MM-dd') AS log_date, "
        f"lpad(CAST(CAST((id % {per_day}) * 24 DIV {per_day} AS INT) AS STRING), 2, '0') AS hour, "
        "CAST(1 + pmod(hash(id, 1), 2) AS INT) AS plat_id, CAST(10406 + pmod(hash(id, 2), 3) AS INT) AS app_id, "
        f"unix_millis(CAST(date_add(DATE '{first_day}', CAST(id DIV {per_day} AS INT)) AS TIMESTAMP)) "
        f"+ CAST((id % {per_day}) * 86400000 DIV {per_day} AS BIGINT) AS ts, 1 AS schema_version"
    )
    user = "CAST(2001 + pmod(hash(id, 3), 1000) AS INT) AS user_id, CAST(10001 + id AS STRING) AS order_id"
    money = "round(1 + pmod(hash(id, 4), 49900) / 100.0, 2) AS amount, IF(pmod(hash(id, 5), 2) = 0, 'BRL', 'USD') AS currency"
    if event == "bet":
        cols = f"{common}, {user}, {money}, CAST(777 + pmod(hash(id, 6), 3) AS INT) AS game_id"
    else:
        cols = (
            f"{common}, IF(pmod(hash(id, 7), 10) = 0, 'failed', 'success') AS status, {user}, {money}, "
            "IF(pmod(hash(id, 7), 10) = 0, 'timeout', CAST(NULL AS STRING)) AS reason"
        )
    return f"SELECT {cols} FROM range({start}, {end}" + (f", 1, {partitions})" if partitions else ")")


def _create_ods(spark, table: str, event: str, partitioned: bool) -> None:
    spark.sql(
        f"CREATE TABLE {table} ({ODS_COLUMNS[event]}) USING iceberg "
        + ("PARTITIONED BY (log_date) " if partitioned else "")
        + "TBLPROPERTIES ('format-version'='2', 'write.parquet.compression-codec'='zstd')"
    )


def _write_days(spark, table: str, event: str, days: int, per_day: int) -> None:
    """``days`` days ending on LAST_DAY, one data file per day, one commit."""
    first = LAST_DAY - timedelta(days=days - 1)
    rows = spark.sql(_select(event, first, per_day, 0, days * per_day))
    rows.repartitionByRange(days, "log_date").sortWithinPartitions("log_date", "hour").writeTo(table).append()


def _median_time(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _files_scanned(catalog, table: str, scope: dws.Scope) -> tuple[int, int]:
    """(data files after pruning for the scope's ODS predicate, all data files)."""
    t = catalog.load_table(table)
    (log_date, hour), = scope.slots()
    planned = len(list(t.scan(row_filter=f"log_date == '{log_date}' and hour == '{hour:02d}'").plan_files()))
    return planned, len(list(t.scan().plan_files()))


def bench_history(spark, catalog, prefix: str, *, days: int, bets_per_day: int, repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    scope = dws.Scope.hours(datetime(LAST_DAY.year, LAST_DAY.month, LAST_DAY.day, HOUR, tzinfo=timezone.utc))
    configs: dict[tuple[str, int], dws.LakehouseTables] = {}
    for layout, partitioned in (("unpartitioned", False), ("partitioned", True)):
        for n in (1, days):
            ns = f"{prefix}_{layout[0]}{n}"
            spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{ns}")
            tables = dws.LakehouseTables.from_routes({"bet": f"{ns}.dwd_biz_bet", "recharge": f"{ns}.dwd_biz_recharge"})
            for event, per_day in (("bet", bets_per_day), ("recharge", max(1, bets_per_day // 3))):
                table = tables.qualified(getattr(tables, f"ods_{event}"))
                _create_ods(spark, table, event, partitioned)
                _write_days(spark, table, event, n, per_day)
            configs[layout, n] = tables

    def materialize(tables: dws.LakehouseTables) -> float:
        start = time.perf_counter()
        for spec in (dws.BET_HOUR, dws.RECHARGE_HOUR):
            dws.build_scope(spark, spec, tables, scope)
        return time.perf_counter() - start

    for tables in configs.values():  # creates the DWS tables and warms the JVM, twice
        materialize(tables)
        materialize(tables)
    times: dict[tuple[str, int], list[float]] = {key: [] for key in configs}
    for _ in range(repeats):  # interleaved, so load from elsewhere on the machine hits every config alike
        for key, tables in configs.items():
            times[key].append(materialize(tables))
    for (layout, n), tables in configs.items():
        scanned, total = _files_scanned(catalog, tables.ods_table("bet"), scope)
        out[f"{layout}_{n}d_s"] = round(statistics.median(times[layout, n]), 3)
        out[f"{layout}_{n}d_bet_rows"] = n * bets_per_day
        out[f"{layout}_{n}d_bet_files_scanned"] = scanned
        out[f"{layout}_{n}d_bet_files_total"] = total
    for layout in ("unpartitioned", "partitioned"):
        out[f"{layout}_{days}d_vs_1d_ratio"] = round(out[f"{layout}_{days}d_s"] / out[f"{layout}_1d_s"], 3)
    return out


SCAN_SQL = "SELECT log_date, hour, plat_id, currency, count(*) AS n, sum(amount) AS amount FROM {t} GROUP BY log_date, hour, plat_id, currency"


def bench_small_files(spark, prefix: str, *, commits: int, rows_per_commit: int, repeats: int) -> dict[str, Any]:
    ns = f"{prefix}_small"
    table = f"lake.{ns}.dwd_biz_bet"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{ns}")
    _create_ods(spark, table, "bet", partitioned=False)
    per_day = commits * rows_per_commit  # one day, in arrival order
    start = time.perf_counter()
    for i in range(commits):
        # one task, one file per commit: what the sink writes per table and commit interval
        spark.sql(f"INSERT INTO {table} {_select('bet', LAST_DAY, per_day, i * rows_per_commit, (i + 1) * rows_per_commit, 1)}")
    write_s = time.perf_counter() - start

    def scan() -> None:
        spark.sql(SCAN_SQL.format(t=table)).collect()

    scan()
    before_files = table_files(spark, table)
    before = _median_time(scan, repeats)
    manifests_before = spark.sql(f"SELECT count(*) AS n FROM {table}.manifests").collect()[0]["n"]
    start = time.perf_counter()
    rewrite_data_files(spark, table)
    rewrite_manifests(spark, table)
    compact_s = time.perf_counter() - start
    scan()
    after = _median_time(scan, repeats)
    after_files = table_files(spark, table)
    manifests_after = spark.sql(f"SELECT count(*) AS n FROM {table}.manifests").collect()[0]["n"]
    return {
        "commits": commits,
        "write_s": round(write_s, 1),
        "data_files_before": before_files.data_files,
        "data_bytes_per_row_before": round(before_files.data_bytes / before_files.records, 2),
        "manifests_before": manifests_before,
        "scan_before_s": round(before, 3),
        "compaction_s": round(compact_s, 1),
        "data_files_after": after_files.data_files,
        "data_bytes_per_row_after": round(after_files.data_bytes / after_files.records, 2),
        "manifests_after": manifests_after,
        "scan_after_s": round(after, 3),
        "scan_speedup": round(before / after, 2),
    }


def bench_bytes_per_event(spark, settings: Settings, *, events: int, suffix: str) -> dict[str, Any]:
    """Events through a real isolated bus (sink, default commit interval) -> data bytes per event."""
    from lakebus_dagster.connect import ConnectClient
    from lakebus_dagster.defs.environment import build_resources
    from lakebus_dagster.defs.resources import BusLayoutResource
    from lakebus_dagster.definitions import defs
    from lakebus_dagster.events import EnvelopeEncoder, EventProducer, GeneratorConfig, generate_events

    resources = {**build_resources(settings), "layout": BusLayoutResource(name_suffix=suffix)}
    layout = resources["layout"].layout()
    client = ConnectClient(settings.connect.urls[0])
    try:
        quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
        assert defs.resolve_job_def("provision_lakebus").execute_in_process(resources=resources, run_config=quiet).success
        sample = list(generate_events(GeneratorConfig(count=events, seed=11, days=("2025-11-25", "2025-11-26"))))
        encoder = EnvelopeEncoder()
        envelope_bytes = sum(len(encoder.encode(e)) for e in sample)
        with EventProducer(layout.bus_topic.name, {"bootstrap.servers": settings.kafka.bootstrap_servers}) as producer:
            for event in sample:
                producer.send(event)
        expected = {layout.routes[n]: sum(e.event == n for e in sample) for n in ("bet", "recharge")}
        catalog = load_catalog(settings)

        def landed() -> bool:
            for table, n in expected.items():
                try:
                    snapshot = catalog.load_table(table).current_snapshot()
                except Exception:
                    return False
                if snapshot is None or int(snapshot.summary.additional_properties.get("total-records", 0)) < n:
                    return False
            return True

        deadline = time.monotonic() + 300
        while not landed():
            if time.monotonic() > deadline:
                raise TimeoutError(f"events did not land in {list(expected)} within 300 s")
            time.sleep(1)
        tables = [f"lake.{t}" for t in expected]
        for t in tables:
            spark.catalog.refreshTable(t)
        sink = [table_files(spark, t) for t in tables]
        for t in tables:
            rewrite_data_files(spark, t)
        compacted = [table_files(spark, t) for t in tables]
    finally:
        if client.exists(layout.connector_name):
            client.delete(layout.connector_name)
        client.close()
    sink_bytes, compact_bytes = sum(f.data_bytes for f in sink), sum(f.data_bytes for f in compacted)
    return {
        "events": events,
        "envelope_bytes_per_event": round(envelope_bytes / events, 1),
        "sink_data_files": sum(f.data_files for f in sink),
        "parquet_bytes_per_event_sink": round(sink_bytes / events, 2),
        "parquet_vs_envelope_ratio_sink": round(sink_bytes / envelope_bytes, 4),
        "parquet_bytes_per_event_compacted": round(compact_bytes / events, 2),
        "parquet_vs_envelope_ratio_compacted": round(compact_bytes / envelope_bytes, 4),
    }


def _spark(settings: Settings):
    from pyspark.sql import SparkSession

    from lakebus_dagster.stack.jars import jars_dir

    prepare_driver_env()
    conf = spark_conf(LakeEndpoints.local(settings), master=settings.spark.master,
                      driver_memory=settings.spark.driver_memory, jars=spark_jars(jars_dir(settings)))
    builder = SparkSession.builder.appName("bench-lakehouse").config("spark.ui.showConsoleProgress", "false")
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _drop_namespaces(spark, *prefixes: str) -> None:
    """Drop the benchmark's tables and namespaces (the catalog entries; the local S3Proxy refuses the
    AWS SDK's bulk deletes, so PURGE would leave the files anyway)."""
    for (ns,) in spark.sql("SHOW NAMESPACES IN lake").collect():
        if ns.startswith(prefixes):
            for row in spark.sql(f"SHOW TABLES IN lake.{ns}").collect():
                spark.sql(f"DROP TABLE IF EXISTS lake.{ns}.{row['tableName']}")
            spark.sql(f"DROP NAMESPACE IF EXISTS lake.{ns}")


def run(
    days: int = 30,
    bets_per_day: int = 60_000,
    small_commits: int = 500,
    rows_per_commit: int = 200,
    sink_events: int = 40_000,
    repeats: int = 3,
) -> dict[str, Any]:
    settings = load_stack_settings()
    load_local_secrets(settings)
    spark = _spark(settings)
    run_id = uuid.uuid4().hex[:6]
    prefix, bus_suffix = f"bench_lh_{run_id}", f"benchlh{run_id}"
    results: dict[str, Any] = {}
    try:
        results.update({f"history_{k}": v for k, v in bench_history(
            spark, load_catalog(settings), prefix, days=days, bets_per_day=bets_per_day, repeats=repeats).items()})
        results.update({f"compaction_{k}": v for k, v in bench_small_files(
            spark, prefix, commits=small_commits, rows_per_commit=rows_per_commit, repeats=repeats).items()})
        results.update({f"bytes_{k}": v for k, v in bench_bytes_per_event(spark, settings, events=sink_events, suffix=bus_suffix).items()})
    finally:
        _drop_namespaces(spark, prefix, f"{settings.lake.namespace}_{bus_suffix}")
    return results


if __name__ == "__main__":
    # one runner prints every benchmark with its targets (benchmarks/__main__.py)
    from benchmarks.__main__ import main

    sys.exit(main(["bench_lakehouse", *sys.argv[1:]]))
