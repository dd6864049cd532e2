"""The lakehouse domain without Spark: partition keys, scopes and their SQL predicates, SQL builders,
schedules, maintenance rules, the ODS observation and the definitions."""

from __future__ import annotations

import itertools
import random
import sqlite3
from datetime import date, datetime, timedelta, timezone
from types import SimpleNamespace

import dagster as dg
import pytest

from lakebus_dagster.defs.lakehouse import build_lakehouse
from lakebus_dagster.defs.lakehouse.assets import observe_iceberg_table
from lakebus_dagster.defs.lakehouse.constants import LATE_DATA_LAG_MINUTES
from lakebus_dagster.defs.lakehouse.jobs import MaintenanceConfig
from lakebus_dagster.defs.lakehouse.retention import RetentionConfig
from lakebus_dagster.defs.lakehouse.partitions import daily_partitions, hourly_partitions, scope_of_window
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster.definitions import defs
from lakebus_dagster.lake import dws
from lakebus_dagster.lake.dws import BET_HOUR, GONE, RECHARGE_HOUR, USER_DAY, LakehouseTables, Scope, scope_predicate
from lakebus_dagster.lake.maintenance import remove_orphan_files, retention_cutoff, retention_delete_sql
from lakebus_dagster.markdown import markdown_table

UTC = timezone.utc
# written out, not derived: the keys the UI, the demo and deployments refer to
ODS_KEYS = {"bet": dg.AssetKey(["ods", "dwd_biz_bet"]), "recharge": dg.AssetKey(["ods", "dwd_biz_recharge"])}
DWS_BET_HOUR_KEY = dg.AssetKey(["dws", "dws_biz_bet_hour"])
DWS_RECHARGE_HOUR_KEY = dg.AssetKey(["dws", "dws_biz_recharge_hour"])
DWS_USER_DAY_KEY = dg.AssetKey(["dws", "dws_user_day"])


# -- partition keys -> scopes (expected slots written out, not derived) -----------------------------
@pytest.mark.parametrize(
    ("key", "slots"),
    [("2025-11-24-22:00", [("2025-11-24", 22)]), ("2025-11-25-00:00", [("2025-11-25", 0)]),
     ("2025-11-25-09:00", [("2025-11-25", 9)]), ("2025-12-31-23:00", [("2025-12-31", 23)])],
)
def test_an_hourly_partition_key_is_its_log_date_and_hour(key, slots):
    assert scope_of_window(hourly_partitions.time_window_for_partition_key(key), "hour").slots() == slots


@pytest.mark.parametrize("bad", ["2025-11-25", "2025-11-25T09:00", "2025-13-01-00:00"])
def test_malformed_hour_keys_are_refused(bad):
    # (Dagster 1.13 itself accepts "2025-11-25-09:30" as a key of these partitions and maps it to
    # 10:00-11:00; the test that used to refuse it tested a helper of its own, not the product)
    assert not hourly_partitions.has_partition_key(bad)
    with pytest.raises(ValueError):
        hourly_partitions.time_window_for_partition_key(bad)


def test_a_daily_partition_key_is_its_log_date():
    assert scope_of_window(daily_partitions.time_window_for_partition_key("2025-11-25"), "day").slots() == [("2025-11-25", None)]


def test_a_partition_range_is_one_scope():
    first = hourly_partitions.time_window_for_partition_key("2025-11-24-22:00")
    last = hourly_partitions.time_window_for_partition_key("2025-11-25-01:00")
    scope = scope_of_window(dg.TimeWindow(first.start, last.end), "hour")
    assert scope.slots() == [("2025-11-24", 22), ("2025-11-24", 23), ("2025-11-25", 0), ("2025-11-25", 1)]
    assert scope.describe() == "2025-11-24 22:00 .. 2025-11-25 01:00"
    day = scope_of_window(daily_partitions.time_window_for_partition_key("2025-11-25"), "day")
    assert day.slots() == [("2025-11-25", None)]


def test_scopes_must_be_aligned_and_non_empty():
    with pytest.raises(ValueError, match="aligned"):
        Scope(datetime(2025, 11, 25, 9, 30), datetime(2025, 11, 25, 10), "hour")
    with pytest.raises(ValueError, match="aligned"):
        Scope(datetime(2025, 11, 25, 9), datetime(2025, 11, 26, 9), "day")
    with pytest.raises(ValueError, match="empty"):
        Scope(datetime(2025, 11, 25, 9), datetime(2025, 11, 25, 9), "hour")


# -- scope predicates -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("scope", "ods", "typed"),
    [
        (Scope.hours(datetime(2025, 11, 25, 9)), "(log_date = '2025-11-25' AND hour = '09')", "(t.log_date = DATE '2025-11-25' AND t.hour = 9)"),
        (
            Scope.hours(datetime(2025, 11, 25, 9), 3),
            "(log_date = '2025-11-25' AND hour BETWEEN '09' AND '11')",
            "(t.log_date = DATE '2025-11-25' AND t.hour BETWEEN 9 AND 11)",
        ),
        (Scope.hours(datetime(2025, 11, 25), 24), "(log_date = '2025-11-25')", "(t.log_date = DATE '2025-11-25')"),
        (
            Scope.hours(datetime(2025, 11, 24, 22), 4),
            "((log_date = '2025-11-24' AND hour >= '22') OR (log_date = '2025-11-25' AND hour <= '01'))",
            "((t.log_date = DATE '2025-11-24' AND t.hour >= 22) OR (t.log_date = DATE '2025-11-25' AND t.hour <= 1))",
        ),
        (
            Scope.hours(datetime(2025, 11, 23, 22), 2 + 48 + 1),
            "((log_date = '2025-11-23' AND hour >= '22') OR (log_date BETWEEN '2025-11-24' AND '2025-11-25')"
            " OR (log_date = '2025-11-26' AND hour <= '00'))",
            None,
        ),
        (Scope.days("2025-11-25"), "(log_date = '2025-11-25')", "(t.log_date = DATE '2025-11-25')"),
        (Scope.days("2025-11-24", 2), "(log_date BETWEEN '2025-11-24' AND '2025-11-25')", "(t.log_date BETWEEN DATE '2025-11-24' AND DATE '2025-11-25')"),
    ],
)
def test_scope_predicates(scope, ods, typed):
    assert scope_predicate(scope, typed=False) == ods
    if typed:
        assert scope_predicate(scope, typed=True, alias="t") == typed


def test_ods_predicates_select_exactly_the_scope():
    """Evaluate the string predicates in SQLite over every (log_date, hour) of 4 days, for many scopes."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE ods (log_date TEXT, hour TEXT)")
    start = datetime(2025, 11, 23, tzinfo=UTC)
    all_hours = [start + timedelta(hours=i) for i in range(96)]
    db.executemany("INSERT INTO ods VALUES (?, ?)", [(h.date().isoformat(), f"{h.hour:02d}") for h in all_hours])
    rng = random.Random(5)
    cases = [(s, n) for s in range(0, 96, 7) for n in (1, 2, 23, 24, 25)] + [(rng.randrange(90), rng.randrange(1, 72)) for _ in range(40)]
    for offset, n in cases:
        scope = Scope.hours(start + timedelta(hours=offset), min(n, 96 - offset))
        got = db.execute(f"SELECT log_date, CAST(hour AS INTEGER) FROM ods WHERE {scope_predicate(scope, typed=False)} ORDER BY 1, 2").fetchall()
        assert got == scope.slots(), scope
    for first, n in itertools.product(range(4), range(1, 4)):
        if first + n > 4:
            continue
        scope = Scope.days(start.date() + timedelta(days=first), n)
        got = db.execute(f"SELECT DISTINCT log_date FROM ods WHERE {scope_predicate(scope, typed=False)} ORDER BY 1").fetchall()
        assert [d for (d,) in got] == [d for d, _ in scope.slots()]


# -- tables and SQL -----------------------------------------------------------------------------
def test_dws_namespace_follows_the_bus_layout():
    assert LakehouseTables.from_routes(BusLayoutResource().layout().routes).dws_namespace == "demo_dws"
    isolated = LakehouseTables.from_routes(BusLayoutResource(name_suffix="1a2b3c4d").layout().routes)
    assert (isolated.ods_table("bet"), isolated.ods_table("recharge")) == ("demo_1a2b3c4d.dwd_biz_bet", "demo_1a2b3c4d.dwd_biz_recharge")
    assert isolated.dws(BET_HOUR) == "demo_1a2b3c4d_dws.dws_biz_bet_hour"
    assert isolated.qualified(isolated.dws(USER_DAY)) == "lake.demo_1a2b3c4d_dws.dws_user_day"
    with pytest.raises(ValueError, match="recharge"):
        LakehouseTables.from_routes({"bet": "demo.dwd_biz_bet"})


def test_create_table_sql():
    sql = dws.create_table_sql(BET_HOUR, "lake.demo_dws.dws_biz_bet_hour")
    assert sql.startswith("CREATE TABLE IF NOT EXISTS lake.demo_dws.dws_biz_bet_hour (")
    for column in ("log_date date", "hour int", "plat_id int", "app_id int", "currency string", "game_id int", "amount decimal(38,2)", "bet_count bigint"):
        assert f"  {column} COMMENT" in sql
    assert "USING iceberg\nPARTITIONED BY (log_date, hour)\n" in sql
    assert "'write.parquet.compression-codec'='zstd'" in sql and "'format-version'='2'" in sql
    assert "PARTITIONED BY (log_date)\n" in dws.create_table_sql(USER_DAY, "x.y")
    assert [c[0] for c in RECHARGE_HOUR.columns] == [
        "log_date", "hour", "plat_id", "app_id", "currency", "status", "recharge_count", "amount"
    ]
    assert [c[0] for c in USER_DAY.columns] == [
        "log_date", "user_id", "bet_count", "bet_amount", "recharge_count", "recharge_amount", "net"
    ]


def test_source_sql_reads_the_ods_with_the_scope_predicate():
    tables = LakehouseTables.from_routes({"bet": "demo.dwd_biz_bet", "recharge": "demo.dwd_biz_recharge"})
    scope = Scope.hours(datetime(2025, 11, 25, 9))
    bet = dws.source_sql(BET_HOUR, tables, scope)
    assert "FROM lake.demo.dwd_biz_bet\nWHERE (log_date = '2025-11-25' AND hour = '09')" in bet
    assert "GROUP BY log_date, hour, plat_id, app_id, currency, game_id" in bet
    user = dws.source_sql(USER_DAY, tables, Scope.days("2025-11-25"))
    assert "status = 'success'" in user and "FULL OUTER JOIN" in user
    assert "CAST(coalesce(r.recharge_amount, CAST(0 AS DECIMAL(38,2))) - coalesce(b.bet_amount, CAST(0 AS DECIMAL(38,2))) AS DECIMAL(38,2)) AS net" in user
    with pytest.raises(ValueError, match="hour-grained"):
        dws.build_scope(None, BET_HOUR, tables, Scope.days("2025-11-25"))


def test_merge_is_scoped_to_the_partition_and_deletes_vanished_keys():
    scope = Scope.hours(datetime(2025, 11, 25, 9))
    sql = dws.merge_sql(BET_HOUR, "lake.demo_dws.dws_biz_bet_hour", "src", scope)
    on = sql.split("\n")[2]
    # a target-only scope predicate in ON: Iceberg prunes the target to the partition's files
    assert on.startswith("ON (t.log_date = DATE '2025-11-25' AND t.hour = 9) AND t.log_date = s.log_date AND t.hour = s.hour")
    assert "t.currency <=> s.currency" in on and "t.game_id <=> s.game_id" in on
    assert f"WHEN MATCHED AND s.{GONE} THEN DELETE" in sql
    assert "WHEN MATCHED AND NOT (t.amount <=> s.amount AND t.bet_count <=> s.bet_count) THEN UPDATE" in sql
    assert f"WHEN NOT MATCHED AND NOT s.{GONE} THEN INSERT" in sql
    assert "NOT MATCHED BY SOURCE" not in sql  # it would disable the pruning (see the module docstring)
    source = dws.merge_source_sql(BET_HOUR, "agg", "lake.demo_dws.dws_biz_bet_hour", scope)
    assert "FULL OUTER JOIN (SELECT DISTINCT log_date, hour, plat_id, app_id, currency, game_id" in source
    assert f"s._present IS NULL AS {GONE}" in source


def test_reconcile_sql_compares_every_measure():
    tables = LakehouseTables.from_routes({"bet": "demo.dwd_biz_bet", "recharge": "demo.dwd_biz_recharge"})
    sql = dws.totals_sql(USER_DAY, tables, Scope.days("2025-11-25"))
    for m in ("bet_count", "bet_amount", "recharge_count", "recharge_amount"):
        assert f"o.{m} AS ods_{m}, d.{m} AS dws_{m}" in sql
    assert dws.amounts_match(100.0, 100.0 + 1e-9) and not dws.amounts_match(100.0, 100.01)
    assert dws.amounts_match(None, 0.0)


def test_markdown_table():
    assert markdown_table([]) == "_no rows_"
    md = markdown_table([{"a": 1, "b": 2.5, "c": None, "d": "x|y"}])
    assert md.splitlines() == ["| a | b | c | d |", "|---|---|---|---|", "| 1 | 2.50 | ∅ | x\\|y |"]


# -- maintenance --------------------------------------------------------------------------------
def test_retention_cutoff_and_sql():
    assert retention_cutoff(date(2025, 11, 26), 3) == date(2025, 11, 23)
    assert retention_cutoff(date(2025, 11, 26), 0) == date(2025, 11, 26)
    with pytest.raises(ValueError):
        retention_cutoff(date(2025, 11, 26), -1)
    assert retention_delete_sql("lake.demo.dwd_biz_bet", date(2025, 11, 23)) == "DELETE FROM lake.demo.dwd_biz_bet WHERE log_date < '2025-11-23'"
    assert retention_delete_sql("t", date(2025, 11, 23), typed=True) == "DELETE FROM t WHERE log_date < DATE '2025-11-23'"


def test_orphan_removal_refuses_young_files():
    now = datetime(2025, 11, 26, tzinfo=UTC)
    with pytest.raises(ValueError, match="less than 24 hours"):
        remove_orphan_files(None, "lake.demo.t", older_than=now - timedelta(hours=23), now=now)


def test_maintenance_config_defaults_and_bounds():
    config = MaintenanceConfig()
    assert (config.scope, config.orphans_older_than_hours, config.expire_older_than_hours, config.retain_last) == ("full", 72.0, 0.3, 100)
    assert config.time_travel_tags
    assert config.target_file_size_bytes == 134217728
    with pytest.raises(Exception, match="orphans_older_than_hours"):
        MaintenanceConfig(orphans_older_than_hours=1)
    with pytest.raises(Exception, match="scope"):
        MaintenanceConfig(scope="everything")
    retention = RetentionConfig()
    assert (retention.retention_days, retention.reference_date) == (None, None)  # None: the deployment's (shipped 3)
    with pytest.raises(Exception, match="retention_days"):
        RetentionConfig(retention_days=-1)


# -- schedules ----------------------------------------------------------------------------------
def _tick(name: str, at: datetime) -> list[dg.RunRequest]:
    schedule = defs.resolve_schedule_def(name)
    return list(schedule.evaluate_tick(dg.build_schedule_context(scheduled_execution_time=at)).run_requests)


def test_hourly_schedule_runs_the_closed_hour_after_the_lag():
    assert LATE_DATA_LAG_MINUTES == 15
    assert defs.resolve_schedule_def("dws_hourly_schedule").cron_schedule == "15 * * * *"
    (request,) = _tick("dws_hourly_schedule", datetime(2025, 11, 25, 10, 15, tzinfo=UTC))
    assert request.partition_key == "2025-11-25-09:00"
    (request,) = _tick("dws_hourly_schedule", datetime(2025, 11, 26, 0, 15, tzinfo=UTC))
    assert request.partition_key == "2025-11-25-23:00"


def test_daily_schedule_and_late_data_sweep():
    assert defs.resolve_schedule_def("dws_daily_schedule").cron_schedule == "30 1 * * *"
    (request,) = _tick("dws_daily_schedule", datetime(2025, 11, 26, 1, 30, tzinfo=UTC))
    assert request.partition_key == "2025-11-25"
    (sweep,) = _tick("dws_late_data_sweep", datetime(2025, 11, 26, 2, 0, tzinfo=UTC))
    assert sweep.partition_key_range == dg.PartitionKeyRange("2025-11-25-00:00", "2025-11-25-23:00")
    assert sweep.run_key == "late-data-sweep-2025-11-25-00:00"
    assert defs.resolve_schedule_def("dws_late_data_sweep").job_name == "dws_hourly_job"
    assert defs.resolve_schedule_def("lakehouse_maintenance_schedule").cron_schedule == "0 4 * * *"
    assert defs.resolve_schedule_def("lakehouse_maintenance_hourly").cron_schedule == "10,40 * * * *"
    assert defs.resolve_schedule_def("lakehouse_retention_schedule").cron_schedule == "30 4 * * *"
    # the builds, the observation and the maintenance that deletes no data run as shipped (issue 27);
    # only the destructive retention waits (issue 9)
    for name in ("dws_hourly_schedule", "dws_daily_schedule", "dws_late_data_sweep", "observe_ods_schedule",
                 "lakehouse_maintenance_hourly", "lakehouse_maintenance_schedule"):
        assert defs.resolve_schedule_def(name).default_status == dg.DefaultScheduleStatus.RUNNING
    assert defs.resolve_schedule_def("lakehouse_retention_schedule").default_status == dg.DefaultScheduleStatus.STOPPED
    # the ODS freshness checks are evaluated as shipped too (a sensor left stopped never judges anything)
    assert defs.resolve_sensor_def("ods_freshness_checks_sensor").default_status == dg.DefaultSensorStatus.RUNNING


# -- ODS observation ------------------------------------------------------------------------------
class _Catalog:
    def __init__(self, table=None):
        self.table = table

    def load_table(self, name):
        from pyiceberg.exceptions import NoSuchTableError

        if self.table is None:
            raise NoSuchTableError(name)
        return self.table


def test_observation_of_a_missing_table_has_no_update_time():
    result = observe_iceberg_table(_Catalog(), "demo.dwd_biz_bet")
    assert result.data_version == dg.DataVersion("absent")
    assert "dagster/last_updated_timestamp" not in result.metadata


def test_observation_reads_the_current_snapshot():
    from pyiceberg.table.snapshots import Operation

    committed = datetime(2025, 11, 25, 10, 0, 5, tzinfo=UTC)
    summary = SimpleNamespace(operation=Operation.APPEND, additional_properties={
        "added-records": "61", "total-records": "1061", "total-data-files": "7", "total-files-size": "4765",
        "kafka.connect.valid-through-ts": "2025-11-25T10:00:04.000Z",
    })
    snapshot = SimpleNamespace(snapshot_id=42, timestamp_ms=int(committed.timestamp() * 1000), summary=summary)
    table = SimpleNamespace(
        current_snapshot=lambda: snapshot, spec=lambda: SimpleNamespace(fields=[]), metadata=SimpleNamespace(location="s3://w/t")
    )
    result = observe_iceberg_table(_Catalog(table), "demo.dwd_biz_bet")
    assert result.data_version == dg.DataVersion("42")
    meta = result.metadata
    assert meta["dagster/last_updated_timestamp"].value == committed.timestamp()
    assert (meta["records_added"].value, meta["total_records"].value, meta["total_data_files"].value) == (61, 1061, 7)
    assert meta["partition_spec"].value == "unpartitioned" and meta["operation"].value == "append"
    assert meta["sink_valid_through"].value == "2025-11-25T10:00:04.000Z"


# -- definitions --------------------------------------------------------------------------------
def test_lakehouse_definitions():
    dg.Definitions.validate_loadable(defs)  # the lakehouse defs use the code location's shared resources
    assert {a.key for a in build_lakehouse().definitions().assets} == {*ODS_KEYS.values(), DWS_BET_HOUR_KEY, DWS_RECHARGE_HOUR_KEY, DWS_USER_DAY_KEY}
    graph = defs.get_repository_def().asset_graph
    for key in ODS_KEYS.values():
        assert graph.get(key).is_observable and not graph.get(key).is_materializable
    for key, partitions in ((DWS_BET_HOUR_KEY, hourly_partitions), (DWS_RECHARGE_HOUR_KEY, hourly_partitions), (DWS_USER_DAY_KEY, daily_partitions)):
        node = graph.get(key)
        assert node.partitions_def == partitions
        assert node.backfill_policy == dg.BackfillPolicy.single_run()
        assert {c.name for c in graph.get_check_keys_for_assets({key})} == {"reconciles_with_ods", "no_null_keys", "no_duplicate_keys"}
        assert node.parent_keys <= set(ODS_KEYS.values()) and node.parent_keys
    for key in ODS_KEYS.values():
        assert "freshness_check" in {c.name for c in graph.get_check_keys_for_assets({key})}  # other domains may add theirs (ledger)
    assert {"dws_hourly_job", "dws_daily_job", "observe_ods_job", "lakehouse_maintenance"} <= {j.name for j in defs.get_repository_def().get_all_jobs()}
    hourly_job = defs.resolve_job_def("dws_hourly_job")
    assert hourly_job.partitions_def == hourly_partitions


def test_observe_and_maintenance_schedules_tick_into_runs_their_jobs_accept(monkeypatch):
    # the resources' secrets are EnvVars; a unit test must not depend on a local stack having made them
    monkeypatch.setenv("LAKEBUS_S3_ACCESS_KEY_ID", "unit-test-key")
    monkeypatch.setenv("LAKEBUS_S3_SECRET_ACCESS_KEY", "unit-test-secret")
    at = datetime(2025, 11, 26, 4, 0, tzinfo=UTC)
    scopes = {}
    for name, job_name in (("observe_ods_schedule", "observe_ods_job"), ("lakehouse_maintenance_schedule", "lakehouse_maintenance"),
                           ("lakehouse_maintenance_hourly", "lakehouse_maintenance"), ("lakehouse_retention_schedule", "lakehouse_retention")):
        schedule = defs.resolve_schedule_def(name)
        # the retention schedule reads the layout (its runs confirm the ODS namespace): it gets the resources
        context = dg.build_schedule_context(scheduled_execution_time=at, resources={"layout": BusLayoutResource()})
        (request,) = schedule.evaluate_tick(context).run_requests
        assert schedule.job_name == job_name
        config = dg.validate_run_config(defs.resolve_job_def(job_name), request.run_config)
        scopes[name] = config["ops"].get("maintain_lakehouse", {}).get("config", {}).get("scope")
    assert scopes["lakehouse_maintenance_schedule"] == "full" and scopes["lakehouse_maintenance_hourly"] == "recent"


def test_ods_freshness_sensor_requests_the_freshness_checks():
    sensor = defs.resolve_sensor_def("ods_freshness_checks_sensor")
    with dg.instance_for_test() as instance:
        context = dg.build_sensor_context(instance=instance, definitions=defs)
        (request,) = sensor.evaluate_tick(context).run_requests
    assert set(request.asset_check_keys) == {dg.AssetCheckKey(key, "freshness_check") for key in ODS_KEYS.values()}
