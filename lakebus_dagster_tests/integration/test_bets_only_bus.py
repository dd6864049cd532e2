"""A bus that has carried bets only — an ordinary day one of a deployment whose recharge producer
has not started: the sink has created the bet table and no recharge table. Both DWS jobs, as
shipped, must succeed (before, each failed with "ODS table(s) ... do not exist yet"): the recharge
hour is an empty partition whose checks pass, ``dws_user_day`` holds ``net = -bets``, and the run
metadata names the absent source. Then the first recharges land and a rerun picks them up.

Expected rows are computed here from the events the test sent (order by order), not read back
through the product.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from decimal import Decimal

import dagster as dg
import pytest

from lakebus_dagster.definitions import defs
from lakebus_dagster.events import EventProducer, GeneratorConfig, generate_events
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.lake.dws import LakehouseTables

from .helpers import committed_rows, load_table_or_none, provisioned_bus, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.lake]

DAY = "2025-11-20"
HOUR_KEY = "2025-11-20-10:00"
EVENTS = GeneratorConfig(count=300, seed=2011, days=(DAY,), hours=(10,), users=12, plat_ids=(1,), app_ids=(10406,),
                         currencies=("BRL",), game_ids=(777, 778))


def _send(layout, bootstrap: str, events) -> None:
    with EventProducer(layout.bus_topic.name, {"bootstrap.servers": bootstrap}) as producer:
        for e in events:
            producer.send(e)


def _materializations(result: dg.ExecuteInProcessResult) -> dict[str, dict]:
    return {e.asset_key.path[-1]: e.materialization.metadata for e in result.get_asset_materialization_events()}


def _checks(result: dg.ExecuteInProcessResult) -> dict[tuple[str, str], bool]:
    return {(e.asset_key.path[-1], e.check_name): e.passed for e in result.get_asset_check_evaluations()}


def test_dws_jobs_succeed_on_a_bets_only_bus(stack, spark):
    everything = list(generate_events(EVENTS))
    bets = [e for e in everything if e.event == "bet"]
    recharges = [e for e in everything if e.event == "recharge"]
    assert bets and recharges
    with provisioned_bus(stack, uuid.uuid4().hex[:8]) as (resources, layout, client):
        catalog = load_catalog(stack)
        bet_table, recharge_table = layout.routes["bet"], layout.routes["recharge"]
        _send(layout, stack.kafka.bootstrap_servers, bets)
        wait_for(lambda: committed_rows(catalog, bet_table) == len(bets), f"{len(bets)} bets in {bet_table}")
        assert load_table_or_none(catalog, recharge_table) is None, "the bus carried no recharge: no table yet"

        hourly = defs.resolve_job_def("dws_hourly_job").execute_in_process(resources=resources, partition_key=HOUR_KEY)
        daily = defs.resolve_job_def("dws_daily_job").execute_in_process(resources=resources, partition_key=DAY)
        assert hourly.success and daily.success
        checks = {**_checks(hourly), **_checks(daily)}
        assert len(checks) == 9 and all(checks.values()), checks

        built = {**_materializations(hourly), **_materializations(daily)}
        assert "recharge" in built["dws_biz_recharge_hour"]["absent_sources"].value
        assert built["dws_biz_recharge_hour"]["row_count"].value == 0
        assert "recharge" in built["dws_user_day"]["absent_sources"].value
        assert built["dws_biz_bet_hour"]["absent_sources"].value == "none"

        # the bet hour: per (game), count and amount of the bets sent
        expected_hour: dict[int, list] = defaultdict(lambda: [0, Decimal(0)])
        for b in bets:
            expected_hour[b.game_id][0] += 1
            expected_hour[b.game_id][1] += b.amount_decimal
        tables = LakehouseTables.from_routes(layout.routes)
        dws = f"{tables.catalog}.{tables.dws_namespace}"
        rows = spark.sql(f"SELECT game_id, bet_count, amount FROM {dws}.dws_biz_bet_hour WHERE log_date = DATE '{DAY}' AND hour = 10").collect()
        assert {r["game_id"]: r["bet_count"] for r in rows} == {g: v[0] for g, v in expected_hour.items()}
        for r in rows:
            assert r["amount"] == expected_hour[r["game_id"]][1]  # decimals: exact

        # the user day: net = -bets, no recharge
        per_user: dict[int, Decimal] = defaultdict(Decimal)
        for b in bets:
            per_user[b.user_id] += b.amount_decimal
        users = spark.sql(f"SELECT user_id, bet_amount, recharge_count, net FROM {dws}.dws_user_day WHERE log_date = DATE '{DAY}'").collect()
        assert {u["user_id"] for u in users} == set(per_user)
        for u in users:
            assert u["recharge_count"] == 0
            assert u["net"] == -per_user[u["user_id"]]
        assert spark.sql(f"SELECT count(*) AS n FROM {dws}.dws_biz_recharge_hour").collect()[0]["n"] == 0

        # the first recharges arrive: the rerun reads the real table, no stand-in is left behind
        _send(layout, stack.kafka.bootstrap_servers, recharges)
        wait_for(lambda: committed_rows(catalog, recharge_table) == len(recharges), f"{len(recharges)} recharges")
        again = defs.resolve_job_def("dws_daily_job").execute_in_process(resources=resources, partition_key=DAY)
        assert again.success and all(_checks(again).values())
        assert _materializations(again)["dws_user_day"]["absent_sources"].value == "none"
        success: dict[int, Decimal] = defaultdict(Decimal)
        for r in recharges:
            if r.status == "success":
                success[r.user_id] += r.amount_decimal
        users = spark.sql(f"SELECT user_id, net FROM {dws}.dws_user_day WHERE log_date = DATE '{DAY}'").collect()
        assert {u["user_id"] for u in users} == set(per_user) | set(success)
        for u in users:
            assert u["net"] == success[u["user_id"]] - per_user[u["user_id"]]
