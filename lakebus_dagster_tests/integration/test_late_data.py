"""Records landing in hours that were already built get those hours rebuilt without a human:
``dws_late_data_sensor``, evaluated through Dagster's tick evaluation against the real ODS tables
(Iceberg metadata of the real sink's commits), requests the closed hours and day the late records
went into — and only those — and the requested runs bring the DWS rows to the sent events."""

from __future__ import annotations

import uuid
from collections import defaultdict

import dagster as dg
import pytest

from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.lakehouse.schedules import PARTITION_RANGE_END_TAG, PARTITION_RANGE_START_TAG
from lakebus_dagster.events import EventProducer, GeneratorConfig, generate_events
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.lake.dws import LakehouseTables

from .helpers import committed_rows, provisioned_bus, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.lake]

DAY = "2025-11-19"
ON_TIME = GeneratorConfig(count=120, seed=31, days=(DAY,), hours=(9,), users=6, plat_ids=(1,), app_ids=(10406,),
                          currencies=("BRL",), game_ids=(777,))
#: late: hours 10, 11 and 14 of a day long closed, order ids of their own
LATE = GeneratorConfig(count=90, seed=32, days=(DAY,), hours=(10, 11, 14), users=6, plat_ids=(1,), app_ids=(10406,),
                       currencies=("BRL",), game_ids=(777,), first_order_id=700001)


def _send(stack, layout, events) -> None:
    with EventProducer(layout.bus_topic.name, {"bootstrap.servers": stack.kafka.bootstrap_servers}) as producer:
        for e in events:
            producer.send(e)


def test_late_records_get_their_closed_hours_and_day_rebuilt(stack, spark):
    sensor = defs.resolve_sensor_def("dws_late_data_sensor")
    with provisioned_bus(stack, uuid.uuid4().hex[:8]) as (resources, layout, _), dg.instance_for_test() as instance:
        catalog = load_catalog(stack)
        sent = list(generate_events(ON_TIME))
        _send(stack, layout, sent)
        counts = lambda: {n: committed_rows(catalog, layout.routes[n]) for n in ("bet", "recharge")}  # noqa: E731
        expect = lambda: {n: sum(e.event == n for e in sent) for n in ("bet", "recharge")}  # noqa: E731
        wait_for(lambda: counts() == expect(), f"rows {expect()}")

        def tick(cursor):
            context = dg.build_sensor_context(instance=instance, cursor=cursor, definitions=defs,
                                              resources={"layout": resources["layout"], "iceberg": resources["iceberg"]})
            result = sensor.evaluate_tick(context)
            return result.run_requests or [], result.skip_message, result.cursor

        requests, skipped, cursor = tick(None)
        assert not requests and "none into a closed hour" in skipped, "the first tick only records where the tables are"

        late = list(generate_events(LATE))
        sent += late
        _send(stack, layout, late)
        wait_for(lambda: counts() == expect(), f"rows {expect()}")
        requests, _, cursor = tick(cursor)
        hourly = sorted((r.tags[PARTITION_RANGE_START_TAG], r.tags[PARTITION_RANGE_END_TAG]) for r in requests if r.job_name == "dws_hourly_job")
        daily = [r.partition_key for r in requests if r.job_name == "dws_daily_job"]
        covered = {h for start, end in hourly for h in range(int(start[-5:-3]), int(end[-5:-3]) + 1)}
        # a data file's bounds are a range: one file of hours 10, 11 and 14 names 12 and 13 too (rebuilt empty, harmless)
        assert {10, 11, 14} <= covered <= set(range(10, 15)), hourly
        assert all(start.startswith(DAY) and end.startswith(DAY) for start, end in hourly), hourly
        assert daily == [DAY]
        assert tick(cursor)[0] == [], "nothing new: nothing requested again"

        for request in requests:  # as the daemon runs them: the request's job, tags and partition
            run = defs.resolve_job_def(request.job_name).execute_in_process(
                resources=resources, instance=instance, tags=request.tags, partition_key=request.partition_key)
            assert run.success and all(e.passed for e in run.get_asset_check_evaluations())

        tables = LakehouseTables.from_routes(layout.routes)
        per_hour: dict[int, int] = defaultdict(int)
        for e in sent:
            if e.event == "bet" and int(e.hour) in (10, 11, 14):
                per_hour[int(e.hour)] += 1
        rows = spark.sql(f"SELECT hour, sum(bet_count) AS n FROM {tables.catalog}.{tables.dws_namespace}.dws_biz_bet_hour "
                         f"WHERE log_date = DATE '{DAY}' GROUP BY hour").collect()
        assert {r["hour"]: r["n"] for r in rows} == dict(per_hour), "the late hours hold every late bet (hour 9 was never built)"
        bets = sum(e.event == "bet" for e in sent)
        day = spark.sql(f"SELECT sum(bet_count) AS n FROM {tables.catalog}.{tables.dws_namespace}.dws_user_day "
                        f"WHERE log_date = DATE '{DAY}'").collect()[0]["n"]
        assert day == bets, "the closed day holds every bet of the day"
