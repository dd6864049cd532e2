"""Money and time typed end to end, on the real stack: version-2 bets carry ``amount_decimal`` (a
Connect Decimal) and ``event_time`` (a Connect Timestamp); the sink, provisioned by the shipped job,
creates ``decimal(38,2)`` and ``timestamptz`` columns and stores every amount exactly; an envelope
whose decimal would have to be rounded or does not fit goes to the DLQ with the reason; and the DWS
hour, built by the shipped job, sums the typed column exactly (version-1 rows through their double).

The amounts are chosen so that a double would not do: ``0.10 + 0.20`` is not ``0.30`` in binary, and
``1234567890123.45`` plus cents loses its last digit as a double. The version-2 bets leave the double
``amount`` empty, so a DWS table that still read it would sum them as nothing.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest
from confluent_kafka import Consumer, TopicPartition
from pyiceberg.types import DecimalType, TimestamptzType

from lakebus_dagster.definitions import defs
from lakebus_dagster.events import Bet, BetV2, EnvelopeEncoder
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.lake.dws import LakehouseTables

from .helpers import committed_rows, load_table_or_none, provisioned_bus, wait_for

pytestmark = pytest.mark.integration

DAY, HOUR = "2025-11-21", 9
START = datetime(2025, 11, 21, HOUR, tzinfo=timezone.utc)
AMOUNTS = [Decimal(a) for a in ("0.10", "0.20", "1234567890123.45", "0.01", "-3.07", "9999999999999999.99", "7")]
V1_AMOUNT, V1_BETS = 2.5, 3
ENCODER = EnvelopeEncoder()
MESSAGE = "__connect.errors.exception.message"


def bet_v2(i: int, amount: Decimal) -> BetV2:
    at = START + timedelta(seconds=i, milliseconds=i)
    return BetV2(category="biz", event="bet", log_date=DAY, hour=f"{HOUR:02d}", plat_id=1, app_id=10406,
                 ts=int(at.timestamp() * 1000), schema_version=2, user_id=100 + i, order_id=f"typed-{i}",
                 currency="BRL", game_id=7, amount_decimal=amount, event_time=at)


def bet_v1(i: int) -> Bet:
    return Bet(category="biz", event="bet", log_date=DAY, hour=f"{HOUR:02d}", plat_id=1, app_id=10406,
               ts=int(START.timestamp() * 1000) + 60_000 + i, schema_version=1, user_id=200 + i,
               order_id=f"typed-v1-{i}", amount=V1_AMOUNT, currency="BRL", game_id=7)


def with_raw_amount(text: str) -> bytes:
    """A version-2 bet envelope whose ``amount_decimal`` is the JSON number ``text``, as a careless
    producer outside the SDK would write it (the schema still says decimal(18,2))."""
    envelope = ENCODER.encode(bet_v2(99, Decimal("1.00"))).decode()
    assert '"amount_decimal":1.00,' in envelope
    return envelope.replace('"amount_decimal":1.00,', f'"amount_decimal":{text},').encode()


def dead_letters(bootstrap: str, topic: str, expected: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"typed-{topic}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        tp = TopicPartition(topic, 0)
        wait_for(lambda: consumer.get_watermark_offsets(tp, timeout=5)[1] >= expected, f"{expected} records in {topic}")
        consumer.assign([TopicPartition(topic, 0, 0)])
        letters: list = []
        wait_for(lambda: letters.extend(consumer.consume(num_messages=100, timeout=1.0)) or len(letters) >= expected,
                 f"reading {topic}", interval=0)
        return letters
    finally:
        consumer.close()


def test_amounts_and_times_land_typed_and_exact_and_the_dws_sums_them_exactly(stack, spark):
    v2 = [bet_v2(i, a) for i, a in enumerate(AMOUNTS)]
    v1 = [bet_v1(i) for i in range(V1_BETS)]
    rounded, too_big = with_raw_amount("12.345"), with_raw_amount("10000000000000000.00")
    with provisioned_bus(stack, uuid.uuid4().hex[:8]) as (resources, layout, _client):
        producer = resources["kafka"].producer(acks="all")
        for record in [*v2, *v1]:
            producer.produce(layout.bus_topic.name, key=str(record.user_id).encode(), value=ENCODER.encode(record))
        producer.produce(layout.bus_topic.name, key=b"rounded", value=rounded)
        producer.produce(layout.bus_topic.name, key=b"too-big", value=too_big)
        assert producer.flush(30) == 0

        catalog = load_catalog(stack)
        table_name = layout.routes["bet"]
        wait_for(lambda: committed_rows(catalog, table_name) == len(v2) + len(v1), f"{len(v2) + len(v1)} bets in {table_name}")
        table = load_table_or_none(catalog, table_name)
        assert table.schema().find_field("amount_decimal").field_type == DecimalType(38, 2)
        assert table.schema().find_field("event_time").field_type == TimestamptzType()
        rows = {r["order_id"]: r for r in table.scan().to_arrow().to_pylist()}
        for sent in v2:
            row = rows[sent.order_id]
            assert row["amount_decimal"] == sent.amount_decimal and row["amount"] is None, row
            assert row["event_time"] == sent.event_time and row["ts"] == sent.ts, row
        assert all(rows[b.order_id]["amount"] == V1_AMOUNT and rows[b.order_id]["amount_decimal"] is None for b in v1)

        letters = {m.key(): dict(m.headers()) for m in dead_letters(stack.kafka.bootstrap_servers, layout.dlq_topic.name, 2)}
        assert set(letters) == {b"rounded", b"too-big"}
        assert b"more than 2 digits after the point; the sink would round it" in letters[b"rounded"][MESSAGE]
        assert b"does not fit precision 18 with scale 2" in letters[b"too-big"][MESSAGE]

        hour_key = f"{DAY}-{HOUR:02d}:00"
        hourly = defs.resolve_job_def("dws_hourly_job").execute_in_process(resources=resources, partition_key=hour_key)
        assert hourly.success
        assert all(e.passed for e in hourly.get_asset_check_evaluations())
        tables = LakehouseTables.from_routes(layout.routes)
        dws = f"{tables.catalog}.{tables.dws_namespace}.dws_biz_bet_hour"
        built = spark.sql(f"SELECT amount, bet_count FROM {dws} WHERE log_date = DATE '{DAY}' AND hour = {HOUR}").collect()
        assert len(built) == 1
        assert built[0]["bet_count"] == len(v2) + len(v1)
        assert built[0]["amount"] == sum(AMOUNTS) + V1_BETS * Decimal("2.50")  # exact: Decimal, not a double
        column = dict(spark.sql(f"DESCRIBE TABLE {dws}").select("col_name", "data_type").collect())
        assert column["amount"] == "decimal(38,2)"
