"""The lakehouse domain against the real stack: ODS observations, DWS partitions built with Spark
(compared number by number with plain Python over the generated events), reruns with late data,
the partition checks, maintenance and retention.

One isolated bus for the whole module (topics, connector, ``demo_<id>`` ODS namespace and its
``demo_<id>_dws`` DWS namespace), on the stack's Spark Connect server: the test reads through a
session of its own there, each run's step attaches one more (``LakeSparkResource``), as deployed. The tests run in file order and build on each other's state, each
saying what it expects to find.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal

import dagster as dg
import pytest

from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.defs.lakehouse import build_lakehouse
from lakebus_dagster.defs.lakehouse.constants import MAINTENANCE_JOB, OBSERVE_ODS_JOB, RETENTION_JOB
from lakebus_dagster.defs.lakehouse.schedules import PARTITION_RANGE_END_TAG, PARTITION_RANGE_START_TAG
from lakebus_dagster.defs.ledger import LEDGER_JOB
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster.definitions import defs
from lakebus_dagster.events import EventBase, EventProducer, GeneratorConfig, generate_events
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.lake.dws import BET_HOUR, RECHARGE_HOUR, USER_DAY, DwsTable, LakehouseTables, Scope, scope_predicate

from .helpers import TEST_COMMIT_INTERVAL_MS, committed_rows, wait_for

#: the lakehouse domain with the shipped limits and schedules (the tests set no config file)
lakehouse = build_lakehouse()

pytestmark = [pytest.mark.integration, pytest.mark.lake]  # any default-profile stack: the lake stage's, to balance make test's lanes

DAY1, DAY2 = "2025-11-24", "2025-11-25"
HOURS = (9, 10, 11)
SAMPLE = GeneratorConfig(
    count=600, seed=20251124, days=(DAY1, DAY2), hours=HOURS, users=25,
    plat_ids=(1, 2), app_ids=(10406, 10407), currencies=("BRL", "USD"), game_ids=(777, 778, 779),
)
#: late events for an hour that is already materialized, with keys the hour did not have before
LATE = GeneratorConfig(
    count=60, seed=99, days=(DAY1,), hours=(10,), users=25, first_order_id=900001,
    plat_ids=(1, 3), app_ids=(10406,), currencies=("BRL", "EUR"), game_ids=(777, 780),
)
#: what the tests materialize: 3 hourly partitions in one single-run backfill, one more alone, 2 days
HOUR_RANGE = ("2025-11-25-09:00", "2025-11-25-11:00")
SINGLE_HOUR = "2025-11-24-10:00"
DAY_RANGE = (DAY1, DAY2)
HOUR_SCOPES = [Scope.hours(datetime(2025, 11, 25, 9), 3), Scope.hours(datetime(2025, 11, 24, 10))]
DAY_SCOPE = Scope.days(DAY1, 2)

# written out: the keys the UI and deployments refer to
ODS_KEYS = {"bet": dg.AssetKey(["ods", "dwd_biz_bet"]), "recharge": dg.AssetKey(["ods", "dwd_biz_recharge"])}
DWS_BET_HOUR_KEY = dg.AssetKey(["dws", "dws_biz_bet_hour"])
dws_biz_bet_hour = lakehouse.dws_assets["dws_biz_bet_hour"]
dws_user_day = lakehouse.dws_assets["dws_user_day"]
HOURLY = [dws_biz_bet_hour, lakehouse.dws_assets["dws_biz_recharge_hour"]]
#: the checks are check specs of their asset, computed in the step that MERGEd the partition
HOURLY_CHECKS = [key for asset in HOURLY for key in asset.check_keys]
DAILY_CHECKS = list(dws_user_day.check_keys)


# -- independent expectations, in plain Python ----------------------------------------------------
def _in_slots(event: EventBase, slots: set[tuple[str, int | None]], grain: str) -> bool:
    return (event.log_date, int(event.hour) if grain == "hour" else None) in slots


def _amount(event: EventBase) -> Decimal:
    """What the DWS sums for an event: version 2's exact amount, else version 1's double at cents."""
    typed = getattr(event, "amount_decimal", None)
    if typed is not None:
        return typed
    return Decimal(0) if event.amount is None else Decimal(f"{event.amount:.2f}")


def expected_rows(spec: DwsTable, events: list[EventBase], scopes: list[Scope]) -> dict[tuple, dict[str, float]]:
    """The DWS rows ``spec`` should hold for ``scopes``, computed from the events alone."""
    slots = {s for scope in scopes for s in scope.slots()}
    out: dict[tuple, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for e in events:
        if not _in_slots(e, slots, spec.grain):
            continue
        day = date.fromisoformat(e.log_date)
        if spec is BET_HOUR and e.event == "bet":
            row = out[(day, int(e.hour), e.plat_id, e.app_id, e.currency, e.game_id)]
            row["amount"] += _amount(e)
            row["bet_count"] += 1
        elif spec is RECHARGE_HOUR and e.event == "recharge":
            row = out[(day, int(e.hour), e.plat_id, e.app_id, e.currency, e.status)]
            row["recharge_count"] += 1
            row["amount"] += _amount(e)
        elif spec is USER_DAY and (e.event == "bet" or e.status == "success"):
            row = out[(day, e.user_id)]
            for m in ("bet_count", "bet_amount", "recharge_count", "recharge_amount"):
                row[m] += 0  # every measure present, zero when the user had none
            if e.event == "bet":
                row["bet_count"] += 1
                row["bet_amount"] += _amount(e)
            else:
                row["recharge_count"] += 1
                row["recharge_amount"] += _amount(e)
    if spec is USER_DAY:
        for row in out.values():
            row["net"] = row["recharge_amount"] - row["bet_amount"]
    return {k: dict(v) for k, v in out.items()}


def dws_rows(spark, tables: LakehouseTables, spec: DwsTable, scopes: list[Scope]) -> dict[tuple, dict[str, float]]:
    where = " OR ".join(scope_predicate(s, typed=True) for s in scopes)
    rows = spark.sql(f"SELECT * FROM {tables.qualified(tables.dws(spec))} WHERE {where}").collect()
    out = {}
    for r in rows:
        key = tuple(r[k] for k in spec.keys)
        assert key not in out, f"{spec.name}: duplicate key {key}"
        out[key] = {m: r[m] for m in spec.measures}
    return out


def assert_same(spec: DwsTable, actual: dict, expected: dict) -> None:
    assert set(actual) == set(expected), (
        f"{spec.name}: keys only in DWS {sorted(set(actual) - set(expected), key=str)[:5]}, "
        f"only expected {sorted(set(expected) - set(actual), key=str)[:5]}"
    )
    for key, measures in expected.items():
        for m, value in measures.items():
            got = actual[key][m]
            if m.endswith("count"):
                assert got == value, f"{spec.name} {key} {m}: {got} != {value}"
            else:  # money: decimals, exact
                assert got == value, f"{spec.name} {key} {m}: {got} != {value}"


# -- the isolated bus -----------------------------------------------------------------------------
@dataclass
class Lake:
    """The module's isolated bus: its resources, table names, and every event sent so far."""

    settings: object
    resources: dict
    tables: LakehouseTables
    client: ConnectClient
    events: list[EventBase] = field(default_factory=list)

    def produce(self, events: list[EventBase]) -> None:
        """Send ``events`` and wait until both ODS tables hold exactly the events sent so far."""
        layout = self.resources["layout"].layout()
        with EventProducer(layout.bus_topic.name, {"bootstrap.servers": self.settings.kafka.bootstrap_servers}) as producer:
            for event in events:
                producer.send(event)
        self.events.extend(events)
        expected = {layout.routes[name]: sum(e.event == name for e in self.events) for name in ("bet", "recharge")}
        catalog = load_catalog(self.settings)

        def landed():
            failed = [t for t in self.client.status(layout.connector_name).tasks if t.state == "FAILED"]
            assert not failed, f"{layout.connector_name} task FAILED: {failed[0].trace_summary}"
            counts = {t: committed_rows(catalog, t) for t in expected}
            assert all(counts[t] <= n for t, n in expected.items()), f"more rows than sent (duplicates?): {counts} vs {expected}"
            return counts == expected and counts

        wait_for(landed, f"rows {expected}")


@pytest.fixture(scope="module")
def lake(stack, spark):
    suffix = uuid.uuid4().hex[:8]
    resources = {**build_resources(), "layout": BusLayoutResource(name_suffix=suffix, commit_interval_ms=TEST_COMMIT_INTERVAL_MS)}
    layout = resources["layout"].layout()
    client = ConnectClient(stack.connect.urls[0])
    try:
        provisioned = defs.resolve_job_def("provision_lakebus").execute_in_process(resources=resources)
        assert provisioned.success
        lake = Lake(stack, resources, LakehouseTables.from_routes(layout.routes), client)
        # three batches, each committed before the next: several data files per ODS table
        sample = list(generate_events(SAMPLE))
        for i in range(3):
            lake.produce(sample[i::3])
        yield lake
    finally:
        if client.exists(layout.connector_name):
            client.delete(layout.connector_name)
        client.close()


def _materialize(lake: Lake, assets, *, partition_key=None, partition_range=None, selection=None, raise_on_error=True):
    tags = {PARTITION_RANGE_START_TAG: partition_range[0], PARTITION_RANGE_END_TAG: partition_range[1]} if partition_range else None
    return dg.materialize(
        assets, resources=lake.resources, partition_key=partition_key, tags=tags,
        selection=selection, raise_on_error=raise_on_error,
    )


def _run_job(lake: Lake, job: str, *, partition_key=None, partition_range=None) -> dg.ExecuteInProcessResult:
    tags = {PARTITION_RANGE_START_TAG: partition_range[0], PARTITION_RANGE_END_TAG: partition_range[1]} if partition_range else None
    return defs.resolve_job_def(job).execute_in_process(resources=lake.resources, partition_key=partition_key, tags=tags)


def _checks_only(lake: Lake, asset, partition_key: str) -> dict[str, dg.AssetCheckEvaluation]:
    result = dg.materialize(
        [asset], resources=lake.resources, selection=dg.AssetSelection.checks(*asset.check_keys),
        tags={"dagster/partition": partition_key}, raise_on_error=False,
    )
    assert not result.get_asset_materialization_events(), "a check-only run materialized the asset"
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


@pytest.fixture(scope="module")
def materialized(lake, spark):
    """3 hourly partitions as ONE run (single-run backfill), 1 more alone, 2 days as one run."""
    # as deployed: the code location's jobs (their selection: the grain's assets and their checks)
    runs = {
        "hour_range": _run_job(lake, "dws_hourly_job", partition_range=HOUR_RANGE),
        "single_hour": _run_job(lake, "dws_hourly_job", partition_key=SINGLE_HOUR),
        "day_range": _run_job(lake, "dws_daily_job", partition_range=DAY_RANGE),
    }
    # one step per DWS table: the checks ran in the step that wrote the table
    for name, assets in (("hour_range", HOURLY), ("single_hour", HOURLY), ("day_range", [dws_user_day])):
        steps = {e.step_key for e in runs[name].all_events if e.is_step_success}
        assert steps == {a.op.name for a in assets}, (name, steps)
    return runs


# -- tests ----------------------------------------------------------------------------------------
def test_ods_observations_carry_snapshot_versions_and_pass_freshness(lake, stack):
    instance = dg.DagsterInstance.ephemeral()
    result = defs.resolve_job_def(OBSERVE_ODS_JOB).execute_in_process(resources=lake.resources, instance=instance)
    assert result.success
    catalog = load_catalog(stack)
    for event, key in ODS_KEYS.items():
        table = catalog.load_table(lake.tables.ods_table(event))
        observation = next(e.asset_observation_data.asset_observation for e in result.get_asset_observation_events() if e.asset_key == key)
        assert observation.tags["dagster/data_version"] == str(table.current_snapshot().snapshot_id)
        meta = observation.metadata
        assert meta["total_records"].value == sum(e.event == event for e in lake.events)
        # read independently through pyiceberg: the snapshot's own summary, and the files its manifests list
        assert meta["records_added"].value == int(table.current_snapshot().summary["added-records"])
        assert meta["total_data_files"].value == len(list(table.scan().plan_files())) >= 3  # three committed batches
        assert meta["dagster/last_updated_timestamp"].value == pytest.approx(table.current_snapshot().timestamp_ms / 1000, abs=1e-3)
        # the sink auto-creates the ODS tables partitioned by day (bus/desired.py)
        assert meta["partition_spec"].value == "log_date (identity)"
    freshness = {e.asset_key: e for e in result.get_asset_check_evaluations()}
    assert set(freshness) == set(ODS_KEYS.values())
    assert all(e.passed for e in freshness.values()), [e.description for e in freshness.values()]


def test_hour_tables_equal_python_aggregates(lake, spark, materialized):
    for spec in (BET_HOUR, RECHARGE_HOUR):
        expected = expected_rows(spec, lake.events, HOUR_SCOPES)
        assert len(expected) > 20, "the sample should give many keys per table"
        assert_same(spec, dws_rows(spark, lake.tables, spec, HOUR_SCOPES), expected)
        # nothing outside the materialized partitions (e.g. 2025-11-24 09:00 exists in the ODS)
        everything = spark.sql(f"SELECT count(*) AS n FROM {lake.tables.qualified(lake.tables.dws(spec))}").collect()[0]["n"]
        assert everything == len(expected)

    # the range was ONE run producing one materialization per partition, with the metadata asked for
    run = materialized["hour_range"]
    events = run.get_asset_materialization_events()
    assert {(e.asset_key, e.partition) for e in events} == {
        (a.key, p) for a in HOURLY for p in ("2025-11-25-09:00", "2025-11-25-10:00", "2025-11-25-11:00")
    }
    meta = next(e for e in events if e.asset_key == DWS_BET_HOUR_KEY).materialization.metadata
    bet_rows = expected_rows(BET_HOUR, lake.events, HOUR_SCOPES[:1])
    assert meta["row_count"].value == len(bet_rows)
    assert meta["source_rows"].value == sum(r["bet_count"] for r in bet_rows.values())
    assert meta["partition"].value == "2025-11-25-09:00...2025-11-25-11:00"
    assert meta["table"].value == lake.tables.dws(BET_HOUR) and meta["dagster/table_name"].value == lake.tables.dws(BET_HOUR)
    assert meta["preview"].value.startswith("| log_date | hour | plat_id")
    # and every check of every run passed, once per partition
    for name in ("hour_range", "single_hour"):
        evaluations = materialized[name].get_asset_check_evaluations()
        assert len(evaluations) == len(HOURLY_CHECKS) and all(e.passed for e in evaluations), name


def test_user_day_equals_python_aggregates(lake, spark, materialized):
    expected = expected_rows(USER_DAY, lake.events, [DAY_SCOPE])
    assert_same(USER_DAY, dws_rows(spark, lake.tables, USER_DAY, [DAY_SCOPE]), expected)
    assert any(r["recharge_count"] == 0 for r in expected.values()), "some users only bet that day"
    evaluations = materialized["day_range"].get_asset_check_evaluations()
    assert len(evaluations) == len(DAILY_CHECKS) and all(e.passed for e in evaluations)


def test_late_events_rerun_updates_without_duplicates(lake, spark, materialized):
    bet_table = lake.tables.qualified(lake.tables.dws(BET_HOUR))
    day2_before = dws_rows(spark, lake.tables, BET_HOUR, HOUR_SCOPES[:1])
    hour_before = dws_rows(spark, lake.tables, BET_HOUR, HOUR_SCOPES[1:])
    late = list(generate_events(LATE))
    lake.produce(late)
    # a key that disappears from the source: the ODS loses game 779 of that hour (e.g. an erasure)
    erased = [e for e in lake.events if e.event == "bet" and e.log_date == DAY1 and e.hour == "10" and e.game_id == 779]
    assert erased
    spark.catalog.refreshTable(lake.tables.qualified(lake.tables.ods_table('bet')))  # the sink committed since Spark cached it
    spark.sql(
        f"DELETE FROM {lake.tables.qualified(lake.tables.ods_table('bet'))} WHERE log_date = '{DAY1}' AND hour = '10' AND game_id = 779"
    )
    lake.events[:] = [e for e in lake.events if e not in erased]

    run = _materialize(lake, HOURLY, partition_key=SINGLE_HOUR)
    assert all(e.passed for e in run.get_asset_check_evaluations())
    scope = HOUR_SCOPES[1]
    for spec in (BET_HOUR, RECHARGE_HOUR):
        expected = expected_rows(spec, lake.events, [scope])
        assert_same(spec, dws_rows(spark, lake.tables, spec, [scope]), expected)
    bet = dws_rows(spark, lake.tables, BET_HOUR, [scope])
    assert any(k[2] == 3 or k[4] == "EUR" or k[5] == 780 for k in bet), "the late events' new keys were inserted"
    assert not any(k[5] == 779 for k in bet), "the erased key was not deleted"
    meta = next(e for e in run.get_asset_materialization_events() if e.asset_key == DWS_BET_HOUR_KEY).materialization.metadata
    # the MERGE's counts, against the stored rows before and after (compared exactly, as the MERGE does)
    gone, new = set(hour_before) - set(bet), set(bet) - set(hour_before)
    changed = {k for k in set(bet) & set(hour_before) if bet[k] != hour_before[k]}
    assert gone and new and changed, "the late events and the erasure should insert, update and delete rows"
    assert (meta["rows_inserted"].value, meta["rows_updated"].value, meta["rows_deleted"].value) == (len(new), len(changed), len(gone))
    # exactly that partition was rewritten; the other day is untouched
    summary = spark.sql(f"SELECT summary FROM {bet_table}.snapshots ORDER BY committed_at DESC LIMIT 1").collect()[0][0]
    assert summary["changed-partition-count"] == "1"
    assert dws_rows(spark, lake.tables, BET_HOUR, HOUR_SCOPES[:1]) == day2_before


def test_corrupted_rows_fail_the_partition_checks(lake, spark, materialized):
    target = lake.tables.qualified(lake.tables.dws(BET_HOUR))
    partition = "2025-11-25-10:00"
    row = spark.sql(f"SELECT * FROM {target} WHERE log_date = DATE '{DAY2}' AND hour = 10 ORDER BY amount DESC LIMIT 1").collect()[0]
    key = " AND ".join(f"{k} = {row[k]!r}" if isinstance(row[k], str) else f"{k} = {row[k]}" for k in ("plat_id", "app_id", "currency", "game_id"))
    spark.sql(f"UPDATE {target} SET amount = amount + 0.01 WHERE log_date = DATE '{DAY2}' AND hour = 10 AND {key}")

    checks = _checks_only(lake, dws_biz_bet_hour, partition)
    assert not checks["reconciles_with_ods"].passed
    assert checks["reconciles_with_ods"].metadata["mismatches"].value == 1
    assert "amount" in checks["reconciles_with_ods"].description
    assert checks["no_null_keys"].passed and checks["no_duplicate_keys"].passed
    assert all(c.partition == partition for c in checks.values())

    # a duplicated row and a row with a null key in another partition
    spark.sql(f"INSERT INTO {target} SELECT * FROM {target} WHERE log_date = DATE '{DAY2}' AND hour = 11 LIMIT 1")
    spark.sql(f"INSERT INTO {target} VALUES (DATE '{DAY2}', 11, 1, 10406, NULL, 777, 1.0, 1)")
    checks = _checks_only(lake, dws_biz_bet_hour, "2025-11-25-11:00")
    assert not checks["no_duplicate_keys"].passed and not checks["no_null_keys"].passed
    assert checks["no_null_keys"].severity == dg.AssetCheckSeverity.WARN
    assert not checks["reconciles_with_ods"].passed

    # a rerun repairs a wrong value and removes a stray key; duplicates need the partition emptied first
    spark.sql(f"DELETE FROM {target} WHERE log_date = DATE '{DAY2}' AND hour = 11")
    run = _materialize(lake, HOURLY, partition_range=("2025-11-25-10:00", "2025-11-25-11:00"))
    assert all(e.passed for e in run.get_asset_check_evaluations())
    assert_same(BET_HOUR, dws_rows(spark, lake.tables, BET_HOUR, HOUR_SCOPES[:1]), expected_rows(BET_HOUR, lake.events, HOUR_SCOPES[:1]))


@pytest.mark.parametrize("spec, partition", [(RECHARGE_HOUR, "2025-11-25-09:00"), (USER_DAY, DAY1)], ids=["recharge_hour", "user_day"])
def test_every_check_of_every_dws_table_fails_on_its_corruption(lake, spark, materialized, spec, partition):
    """Drift of a measure, a duplicated key and a null key, each in turn on a clean partition, each
    failing exactly its check (drift: reconciliation; a duplicate also breaks the totals); then a rerun
    repairs the partition and every check passes again."""
    asset = lakehouse.dws_assets[spec.name]
    target = lake.tables.qualified(lake.tables.dws(spec))
    where = "log_date = DATE '2025-11-25' AND hour = 9" if spec.grain == "hour" else f"log_date = DATE '{DAY1}'"
    scope = [Scope.hours(datetime(2025, 11, 25, 9))] if spec.grain == "hour" else [Scope.days(DAY1)]
    money = next(m for m in spec.measures if "amount" in m)
    dimension = spec.dimensions[0]
    cols = ", ".join(f"NULL AS {c}" if c == dimension else c for c in spec.column_names)

    def repaired():
        spark.sql(f"DELETE FROM {target} WHERE {where}")
        run = _materialize(lake, [asset], partition_key=partition)
        assert all(e.passed for e in run.get_asset_check_evaluations())
        assert_same(spec, dws_rows(spark, lake.tables, spec, scope), expected_rows(spec, lake.events, scope))

    one = spark.sql(f"SELECT max({dimension}) AS v FROM {target} WHERE {where}").collect()[0]["v"]
    corruptions = {
        "reconciles_with_ods": f"UPDATE {target} SET {money} = {money} + 0.01 WHERE {where} AND {dimension} = {one}",
        "no_duplicate_keys": f"INSERT INTO {target} SELECT * FROM {target} WHERE {where} LIMIT 1",
        "no_null_keys": f"INSERT INTO {target} SELECT {cols} FROM {target} WHERE {where} LIMIT 1",
    }
    for check, corruption in corruptions.items():
        spark.sql(corruption)
        checks = _checks_only(lake, asset, partition)
        assert not checks[check].passed, f"{spec.name}: {check} passed after {corruption}"
        assert checks[check].partition == partition
        if check == "no_null_keys":
            assert checks["no_duplicate_keys"].passed
        if check == "reconciles_with_ods":
            assert checks["no_null_keys"].passed and checks["no_duplicate_keys"].passed
            assert money in checks[check].description
        repaired()


def test_user_day_fails_when_a_failed_recharge_counts_as_a_success(lake, spark, materialized):
    target = lake.tables.qualified(lake.tables.dws(USER_DAY))
    failed = next(e for e in lake.events if e.event == "recharge" and e.status != "success" and e.log_date == DAY1)
    spark.sql(f"UPDATE {target} SET recharge_count = recharge_count + 1, recharge_amount = recharge_amount + {failed.amount}, "
              f"net = net + {failed.amount} WHERE log_date = DATE '{DAY1}' AND user_id = {failed.user_id}")
    if not spark.sql(f"SELECT 1 FROM {target} WHERE log_date = DATE '{DAY1}' AND user_id = {failed.user_id}").collect():
        spark.sql(f"INSERT INTO {target} VALUES (DATE '{DAY1}', {failed.user_id}, 0, 0D, 1, {failed.amount}D, {failed.amount}D)")
    checks = _checks_only(lake, dws_user_day, DAY1)
    assert not checks["reconciles_with_ods"].passed
    assert "recharge_count" in checks["reconciles_with_ods"].description
    spark.sql(f"DELETE FROM {target} WHERE log_date = DATE '{DAY1}'")
    run = _materialize(lake, [dws_user_day], partition_key=DAY1)
    assert all(e.passed for e in run.get_asset_check_evaluations())


def _count_by_day(spark, table: str) -> dict[str, int]:
    return {r["log_date"]: r["n"] for r in spark.sql(f"SELECT log_date, count(*) AS n FROM {table} GROUP BY log_date").collect()}


def _files(spark, table: str) -> int:
    return spark.sql(f"SELECT count(*) AS n FROM {table}.data_files").collect()[0]["n"]


def test_maintenance_compacts_and_keeps_rows(lake, spark, materialized):
    tables = [lake.tables.qualified(t) for t in (*lake.tables.ods, *lake.tables.all_dws)]
    rows_before = {t: _count_by_day(spark, t) for t in tables}
    files_before = {t: _files(spark, t) for t in tables}
    # several sink commits (and the erasure's rewrite) left more than one data file per ODS table
    assert all(files_before[lake.tables.qualified(t)] >= 2 for t in lake.tables.ods), files_before

    result = defs.resolve_job_def(MAINTENANCE_JOB).execute_in_process(
        resources=lake.resources,
        run_config={"ops": {"maintain_lakehouse": {"config": {"expire_older_than_hours": 0, "retain_last": 1}}}},
    )
    assert result.success
    reports = {r["table"]: r for r in result.output_for_node("maintain_lakehouse")}
    assert set(reports) == set(tables)
    for t in tables:
        assert _count_by_day(spark, t) == rows_before[t], f"{t}: rows changed"
        assert reports[t]["before"]["data_files"] == files_before[t]
        assert reports[t]["after"]["data_files"] == _files(spark, t)
        assert reports[t]["orphan_files"] is not None and reports[t]["retention_deleted_rows"] is None
    for t in lake.tables.ods:
        t = lake.tables.qualified(t)
        assert _files(spark, t) < files_before[t], f"{t}: {files_before[t]} -> {_files(spark, t)} data files"
        assert reports[t]["compaction"]["rewritten_data_files_count"] >= 2
    meta = next(e for e in result.all_node_events if e.step_key == "maintain_lakehouse" and e.is_successful_output).event_specific_data.metadata
    ods_bet = lake.tables.qualified(lake.tables.ods_table('bet'))
    assert meta[f"{ods_bet} data_files before"].value == files_before[ods_bet]
    assert meta[f"{ods_bet} data_files after"].value == _files(spark, ods_bet)
    live_bytes = sum(t.file.file_size_in_bytes for t in load_catalog(lake.settings).load_table(lake.tables.ods_table("bet")).scan().plan_files())
    assert meta[f"{ods_bet} data_bytes after"].value == live_bytes  # read through pyiceberg's manifests, not Spark
    assert "→" in meta["tables"].value


def _ledger(lake) -> tuple[str, int]:
    """The offset_ledger check through Dagster on the lake's bus: (lost offsets as its metadata names
    them, offsets counted retired). Grace 0: every record landed before (lake.produce waits)."""
    result = defs.resolve_job_def(LEDGER_JOB).execute_in_process(
        resources=lake.resources, run_config={"ops": {"offset_ledger": {"config": {"grace_s": 0.0}}}})
    (evaluation, *_) = result.get_asset_check_evaluations()
    retired = sum(r.data["retired"] for r in evaluation.metadata["partitions"].value.records)
    return evaluation.metadata["lost_offsets"].value, retired


def test_retention_drops_only_expired_days(lake, spark, materialized):
    ods = [lake.tables.qualified(t) for t in lake.tables.ods]
    dws = [lake.tables.qualified(t) for t in lake.tables.all_dws]
    before = {t: _count_by_day(spark, t) for t in ods + dws}
    assert all(before[t].get(DAY1) and before[t].get(DAY2) for t in ods)
    # the offset ledger before: rows erased by hand in an earlier test (if it ran) are lost, by design
    lost_before, retired_before = _ledger(lake)
    assert retired_before == 0

    # reference 2025-11-26, keep 1 day before it: log_date < 2025-11-25 is expired
    config = {"retention_days": 1, "reference_date": "2025-11-26",
              "confirm": ",".join(lake.resources["layout"].layout().namespaces)}
    result = defs.resolve_job_def(RETENTION_JOB).execute_in_process(
        resources=lake.resources, run_config={"ops": {"expire_ods_days": {"config": config}}}
    )
    assert result.success
    reports = {r["table"]: r for r in result.output_for_node("expire_ods_days")}
    assert set(reports) == set(ods)
    for t in ods:
        after = _count_by_day(spark, t)
        assert after == {DAY2: before[t][DAY2]}, f"{t}: {before[t]} -> {after}"
        assert reports[t]["retention_deleted_rows"] == before[t][DAY1]
    for t in dws:  # retention is for the ODS only
        assert _count_by_day(spark, t) == before[t]
    # the ledger after: the rows the retention deleted are retired (recorded by the run before it
    # deleted them), not lost; nothing else changed (a hand-made delete stays lost)
    deleted = sum(reports[t]["retention_deleted_rows"] for t in ods)
    assert _ledger(lake) == (lost_before, deleted)
    (output,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    assert output.event_specific_data.metadata["retired_offsets"].value.startswith("[0] "), output.event_specific_data.metadata
