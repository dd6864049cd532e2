"""Gaps heal themselves: DWS hours that no run built, or whose run failed, are requested by the
shipped automation condition through Dagster's own evaluation (``evaluate_automation_conditions``,
which resolves the conditions against the instance's real run and materialization records, at an
evaluation time the test sets), and the requested ranges, run as the backfill runs them (one
single run per contiguous range of the hourly job), build the right rows from the real ODS.

Expected rows are computed from the events the test sent.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from decimal import Decimal
from datetime import datetime, timezone

import dagster as dg
import pytest

from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.lakehouse import build_lakehouse
from lakebus_dagster.defs.lakehouse.schedules import PARTITION_RANGE_END_TAG, PARTITION_RANGE_START_TAG
from lakebus_dagster.defs.spark import LakeSparkResource
from lakebus_dagster.events import EventProducer, GeneratorConfig, generate_events
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.lake.dws import LakehouseTables

from .helpers import committed_rows, provisioned_bus, wait_for

#: the lakehouse domain with the shipped limits and schedules (the tests set no config file)
lakehouse = build_lakehouse()

pytestmark = [pytest.mark.integration, pytest.mark.lake]

DAY = "2025-11-20"
EVENTS = GeneratorConfig(count=400, seed=4711, days=(DAY,), hours=(8, 9, 10, 11), users=10, plat_ids=(1,), app_ids=(10406,),
                         currencies=("BRL",), game_ids=(777,))
BET_HOUR = dg.AssetKey(["dws", "dws_biz_bet_hour"])
RECHARGE_HOUR = dg.AssetKey(["dws", "dws_biz_recharge_hour"])
SELECTION = dg.AssetSelection.assets(*lakehouse.dws_assets.values())


class SparkDown(LakeSparkResource):
    """The Spark Connect server away for one run: the step fails as it would (a transient fault)."""

    def setup_for_execution(self, context) -> None:
        raise ConnectionError("Spark Connect server unreachable (the test's stand-in for an outage)")


def _evaluate(instance, at: datetime, cursor=None):
    return dg.evaluate_automation_conditions(defs, instance, asset_selection=SELECTION, evaluation_time=at, cursor=cursor)


def _ranges(keys: list[str]) -> list[tuple[str, str]]:
    """Contiguous runs of hourly keys, as a backfill with BackfillPolicy.single_run groups them."""
    every = lakehouse.dws_assets["dws_biz_bet_hour"].partitions_def.get_partition_keys()
    index = sorted(every.index(k) for k in keys)
    out, start = [], index[0]
    for a, b in zip(index, index[1:] + [None]):
        if b != a + 1:
            out.append((every[start], every[a]))
            start = b
    return out


def test_missing_and_failed_hours_are_rebuilt_without_a_human(stack, spark):
    events = list(generate_events(EVENTS))
    with provisioned_bus(stack, uuid.uuid4().hex[:8]) as (resources, layout, _), dg.instance_for_test() as instance:
        catalog = load_catalog(stack)
        with EventProducer(layout.bus_topic.name, {"bootstrap.servers": stack.kafka.bootstrap_servers}) as producer:
            for e in events:
                producer.send(e)
        expected = {name: sum(e.event == name for e in events) for name in ("bet", "recharge")}
        wait_for(lambda: all(committed_rows(catalog, layout.routes[n]) == c for n, c in expected.items()), f"rows {expected}")
        hourly = defs.resolve_job_def("dws_hourly_job")

        # 09:00 built by its schedule; 10:00's run failed (Spark away); 08:00 and 11:00 never ran
        assert hourly.execute_in_process(resources=resources, instance=instance, partition_key=f"{DAY}-09:00").success
        spark_down = SparkDown(**{k: getattr(resources["spark"], k) for k in LakeSparkResource.model_fields
                                  if getattr(resources["spark"], k) is not None})
        failed = hourly.execute_in_process(resources={**resources, "spark": spark_down}, instance=instance,
                                           partition_key=f"{DAY}-10:00", raise_on_error=False)
        assert not failed.success

        first = _evaluate(instance, datetime(2025, 11, 21, 10, 30, tzinfo=timezone.utc))
        assert first.total_requested == 0, "the first evaluation only marks the condition handled"
        second = _evaluate(instance, datetime(2025, 11, 21, 10, 46, tzinfo=timezone.utc), first.cursor)
        for key in (BET_HOUR, RECHARGE_HOUR):
            requested = set(second.get_requested_partitions(key))
            assert {f"{DAY}-08:00", f"{DAY}-10:00", f"{DAY}-11:00"} <= requested, sorted(requested)[:5]
            assert f"{DAY}-09:00" not in requested, "a built hour is not rebuilt"
            assert len(requested) == 47, "the 48 hours before 10:46 but the built one"
        assert not second.get_requested_partitions(dg.AssetKey(["dws", "dws_user_day"])), "the daily table waits for 02:45"

        for start, end in _ranges(sorted(second.get_requested_partitions(BET_HOUR))):
            run = hourly.execute_in_process(resources=resources, instance=instance,
                                            tags={PARTITION_RANGE_START_TAG: start, PARTITION_RANGE_END_TAG: end})
            assert run.success and all(e.passed for e in run.get_asset_check_evaluations())

        # nothing left to heal at the next tick
        third = _evaluate(instance, datetime(2025, 11, 21, 11, 46, tzinfo=timezone.utc), second.cursor)
        assert not set(third.get_requested_partitions(BET_HOUR)) & {f"{DAY}-{h:02d}:00" for h in (8, 9, 10, 11)}

        tables = LakehouseTables.from_routes(layout.routes)
        per_hour: dict[int, list] = defaultdict(lambda: [0, Decimal(0)])
        for e in events:
            if e.event == "bet":
                per_hour[int(e.hour)][0] += 1
                per_hour[int(e.hour)][1] += e.amount_decimal
        rows = spark.sql(f"SELECT hour, sum(bet_count) AS n, sum(amount) AS a FROM {tables.catalog}.{tables.dws_namespace}.dws_biz_bet_hour "
                         f"WHERE log_date = DATE '{DAY}' GROUP BY hour").collect()
        assert {r["hour"]: r["n"] for r in rows} == {h: v[0] for h, v in per_hour.items()}
        for r in rows:
            assert r["a"] == per_hour[r["hour"]][1]  # decimals: exact
