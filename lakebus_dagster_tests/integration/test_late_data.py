"""Records landing in hours that were already built get those hours rebuilt without a human:
``dws_late_data_sensor``, evaluated through Dagster's tick evaluation against the real ODS tables
(Iceberg metadata of the real sink's commits), requests the closed hours and day the late records
went into — and only those — and the requested runs bring the DWS rows to the sent events.

Late records come three ways, each tested: a producer sending late, ``replay_dlq`` bringing back
records the door refused, and ``requeue_lost_records`` copying back records the offset ledger found
lost."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable

import dagster as dg
import pytest

from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.ledger import LEDGER_JOB
from lakebus_dagster.defs.recovery import REQUEUE_JOB
from lakebus_dagster.defs.lakehouse.schedules import PARTITION_RANGE_END_TAG, PARTITION_RANGE_START_TAG
from lakebus_dagster.events import EnvelopeEncoder, EventProducer, GeneratorConfig, generate_events
from lakebus_dagster.kafka import watermarks
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


def _counts(catalog, layout) -> dict[str, int]:
    return {n: committed_rows(catalog, layout.routes[n]) for n in ("bet", "recharge")}


def _expected(events) -> dict[str, int]:
    return {n: sum(e.event == n for e in events) for n in ("bet", "recharge")}


def _ticker(instance, resources) -> Callable:
    """``tick(cursor) -> (run requests, skip message, cursor)``: one evaluation of the shipped
    ``dws_late_data_sensor`` through Dagster's tick evaluation."""
    sensor = defs.resolve_sensor_def("dws_late_data_sensor")

    def tick(cursor):
        context = dg.build_sensor_context(instance=instance, cursor=cursor, definitions=defs,
                                          resources={"layout": resources["layout"], "iceberg": resources["iceberg"]})
        result = sensor.evaluate_tick(context)
        return result.run_requests or [], result.skip_message, result.cursor

    return tick


def test_late_records_get_their_closed_hours_and_day_rebuilt(stack, spark):
    with provisioned_bus(stack, uuid.uuid4().hex[:8]) as (resources, layout, _), dg.instance_for_test() as instance:
        catalog = load_catalog(stack)
        sent = list(generate_events(ON_TIME))
        _send(stack, layout, sent)
        wait_for(lambda: _counts(catalog, layout) == _expected(sent), f"rows {_expected(sent)}")
        tick = _ticker(instance, resources)
        requests, skipped, cursor = tick(None)
        assert not requests and "none into a closed hour" in skipped, "the first tick only records where the tables are"

        late = list(generate_events(LATE))
        sent += late
        _send(stack, layout, late)
        wait_for(lambda: _counts(catalog, layout) == _expected(sent), f"rows {_expected(sent)}")
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


#: refused at the door (no envelope), then brought back by ``replay_dlq``: hour 12
REPLAYED = GeneratorConfig(count=40, seed=33, days=(DAY,), hours=(12,), users=6, plat_ids=(1,), app_ids=(10406,),
                           currencies=("BRL",), game_ids=(777,), first_order_id=800001)
#: skipped by the sink (its offsets moved past them), then copied back by ``requeue_lost_records``: hour 15
REQUEUED = GeneratorConfig(count=30, seed=34, days=(DAY,), hours=(15,), users=6, plat_ids=(1,), app_ids=(10406,),
                           currencies=("BRL",), game_ids=(777,), first_order_id=900001)


def _bare(event) -> bytes:
    """The event's payload without its envelope, digits as the SDK writes them (a producer that
    forgot the envelope): the strict converter sends it to the DLQ."""
    envelope = EnvelopeEncoder().encode(event)
    return envelope[envelope.index(b'"payload":') + len(b'"payload":'):-1]


def _end_offset(resources, topic: str) -> int:
    consumer = resources["kafka"].consumer("lakebus-test-late-offsets")
    try:
        return watermarks(consumer, topic, 0)[1]
    finally:
        consumer.close()


def _run(job: str, resources, instance, **op_config) -> dg.ExecuteInProcessResult:
    ops = {op: {"config": config} for op, config in op_config.items()}
    result = defs.resolve_job_def(job).execute_in_process(resources=resources, instance=instance,
                                                          run_config={"ops": ops}, raise_on_error=False)
    return result


def _rebuilt_hours(tick: Callable, cursor: str, resources, instance) -> tuple[set[int], list[str], str]:
    """One sensor tick after late rows landed: the hours and days it requested, each request run as
    the daemon runs it (its job, tags and partition); every run and check passes."""
    requests, _, cursor = tick(cursor)
    hourly = [(r.tags[PARTITION_RANGE_START_TAG], r.tags[PARTITION_RANGE_END_TAG]) for r in requests
              if r.job_name == "dws_hourly_job"]
    hours = {h for start, end in hourly for h in range(int(start[-5:-3]), int(end[-5:-3]) + 1)}
    for request in requests:
        run = defs.resolve_job_def(request.job_name).execute_in_process(
            resources=resources, instance=instance, tags=request.tags, partition_key=request.partition_key)
        assert run.success and all(e.passed for e in run.get_asset_check_evaluations())
    return hours, [r.partition_key for r in requests if r.job_name == "dws_daily_job"], cursor


def test_records_a_dlq_replay_and_a_requeue_bring_back_get_their_hours_rebuilt(stack, spark):
    with provisioned_bus(stack, uuid.uuid4().hex[:8]) as (resources, layout, connect), \
            dg.instance_for_test() as instance:
        catalog = load_catalog(stack)
        topic, dlq, name = layout.bus_topic.name, layout.dlq_topic.name, layout.connector_name
        landed: list = list(generate_events(ON_TIME))
        _send(stack, layout, landed)
        refused = list(generate_events(REPLAYED))
        raw = resources["kafka"].producer(acks="all")
        for e in refused:
            raw.produce(topic, value=_bare(e))
        assert raw.flush(30) == 0
        landed_all = lambda: _counts(catalog, layout) == _expected(landed)  # noqa: E731
        wait_for(lambda: landed_all() and _end_offset(resources, dlq) == len(refused),
                 f"rows {_expected(landed)} and {len(refused)} records in the DLQ")
        tick = _ticker(instance, resources)
        requests, _, cursor = tick(None)
        assert not requests, "the first tick only records where the tables are"
        tables = LakehouseTables.from_routes(layout.routes)

        def dws_bets(hour: int) -> int | None:
            return spark.sql(f"SELECT sum(bet_count) AS n FROM {tables.catalog}.{tables.dws_namespace}.dws_biz_bet_hour "
                             f"WHERE log_date = DATE '{DAY}' AND hour = {hour}").collect()[0]["n"]

        def rebuilt(events: list, hour: int, how: str, cursor: str) -> str:
            """``events`` land; the next tick requests exactly their hour and day; the rebuilt hour holds their bets."""
            landed.extend(events)
            wait_for(landed_all, f"rows {_expected(landed)} after the {how}")
            hours, days, cursor = _rebuilt_hours(tick, cursor, resources, instance)
            assert hours == {hour} and days == [DAY], (how, hours, days)
            assert dws_bets(hour) == sum(e.event == "bet" for e in events), f"hour {hour} holds every bet of the {how}"
            return cursor

        # the door's refusals come back: replay_dlq wraps the bare payloads in their envelopes
        replay = _run("replay_dlq", resources, instance,
                      replay_dlq_op={"confirm": dlq, "wrap_bare_payloads": True})
        assert replay.success, "replay_dlq failed"
        cursor = rebuilt(refused, 12, "replay", cursor)

        # records the sink skipped (its offsets moved past them while stopped) come back by the re-queue
        connect.stop(name)
        connect.wait_for_state(name, {"STOPPED"}, timeout=60, require_tasks=False)
        skipped = list(generate_events(REQUEUED))
        _send(stack, layout, skipped)
        connect.patch_offsets(name, [{"partition": {"kafka_topic": topic, "kafka_partition": 0},
                                      "offset": {"kafka_offset": _end_offset(resources, topic)}}])
        connect.resume(name)
        # the ledger judges at once (grace 0: the gap is made on purpose), then the re-queue copies them back
        ledger = _run(LEDGER_JOB, resources, instance, offset_ledger={"grace_s": 0.0})
        lost = {e.asset_key.path[-1]: e.metadata["lost_count"].value for e in ledger.get_asset_check_evaluations()}
        assert set(lost.values()) == {len(skipped)}, lost  # each table's check counts the bus's offsets
        requeue = _run(REQUEUE_JOB, resources, instance, requeue_lost_records_op={"confirm": topic, "grace_s": 0.0})
        assert requeue.success, "requeue_lost_records failed"
        cursor = rebuilt(skipped, 15, "re-queue", cursor)
        assert tick(cursor)[0] == [], "nothing new: nothing requested again"
