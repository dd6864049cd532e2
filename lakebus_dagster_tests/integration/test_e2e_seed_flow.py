"""Seed 000/001 by hand, against the real stack: topics, the sink connector, seed envelopes in,
Iceberg rows out — checked through pyiceberg and Spark SQL — and a malformed record in the DLQ."""

from __future__ import annotations

import json
import random
from functools import partial

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, Producer
from pyiceberg.types import DoubleType, IntegerType, LongType, StringType

from lakebus_dagster.bus.provenance import PROVENANCE_COLUMNS
from lakebus_dagster.lake.catalog import load_catalog

from .helpers import isolated_layout, scan_or_none, sink_connector, wait_for

pytestmark = pytest.mark.integration

# Seed 001 §4, byte for byte (the pretty-printed sample).
SEED_BET_ENVELOPE = b"""{
  "schema": {
    "type": "struct",
    "name": "bet_record",
    "fields": [
      {
        "field": "category",
        "type": "string"
      },
      {
        "field": "event",
        "type": "string"
      },
      {
        "field": "log_date",
        "type": "string"
      },
      {
        "field": "hour",
        "type": "string"
      },
      {
        "field": "plat_id",
        "type": "int32"
      },
      {
        "field": "app_id",
        "type": "int32"
      },
      {
        "field": "ts",
        "type": "int64"
      },
      {
        "field": "schema_version",
        "type": "int32"
      },
      {
        "field": "user_id",
        "type": "int32",
        "optional": true
      },
      {
        "field": "order_id",
        "type": "string",
        "optional": true
      },
      {
        "field": "amount",
        "type": "double",
        "optional": true
      },
      {
        "field": "currency",
        "type": "string",
        "optional": true
      },
      {
        "field": "game_id",
        "type": "int32",
        "optional": true
      }
    ]
  },
  "payload": {
    "category": "biz",
    "event": "bet",
    "log_date": "2025-11-25",
    "hour": "18",
    "plat_id": 1,
    "app_id": 10406,
    "ts": 1732527602000,
    "schema_version": 1,
    "user_id": 2001,
    "order_id": "10001",
    "amount": 10,
    "currency": "BRL",
    "game_id": 777
  }
}"""

BASE_FIELDS = [("category", "string"), ("event", "string"), ("log_date", "string"), ("hour", "string"),
               ("plat_id", "int32"), ("app_id", "int32"), ("ts", "int64"), ("schema_version", "int32")]
EVENT_FIELDS = {
    "bet": [("user_id", "int32"), ("order_id", "string"), ("amount", "double"), ("currency", "string"), ("game_id", "int32")],
    "recharge": [("status", "string"), ("user_id", "int32"), ("order_id", "string"), ("amount", "double"),
                 ("currency", "string"), ("reason", "string")],
}
ICEBERG_TYPES = {"string": StringType(), "int32": IntegerType(), "int64": LongType(), "double": DoubleType()}


def seed_envelope(event: str, payload: dict) -> bytes:
    """An envelope the way seed 001's Go code builds it: schema by reflection order, optional extras."""
    fields = [{"field": f, "type": t} for f, t in BASE_FIELDS]
    fields += [{"field": f, "type": t, "optional": True} for f, t in EVENT_FIELDS[event]]
    return json.dumps({"schema": {"type": "struct", "name": f"{event}_record", "fields": fields},
                       "payload": payload}).encode()


def generated_events(rng: random.Random, n: int, start_order: int) -> list[tuple[str, dict]]:
    out = []
    for i in range(n):
        event = "recharge" if i % 3 == 0 else "bet"
        hour = rng.randrange(24)
        payload = {"category": "biz", "event": event, "log_date": "2025-11-26", "hour": f"{hour:02d}",
                   "plat_id": rng.randrange(1, 4), "app_id": 10406, "ts": 1764115200000 + hour * 3_600_000 + i,
                   "schema_version": 1, "user_id": rng.randrange(1000, 1100), "order_id": str(start_order + i),
                   "amount": round(rng.uniform(1, 500), 2), "currency": rng.choice(["BRL", "USD"])}
        if event == "bet":
            payload["game_id"] = rng.choice([777, 888])
        else:
            payload["status"] = rng.choice(["success", "failed"])
            payload["reason"] = None if payload["status"] == "success" else "card_declined"
        out.append((event, payload))
    return out


def test_seed_envelopes_land_in_iceberg(stack, spark, run_id):
    layout = isolated_layout(run_id, namespace="demo")

    # 1. topics, created by hand as in seed 000 §3 (auto-creation is off on the broker), and
    # 2. the connector, PUT as in seed 000 §2 (with lakebus's secret placeholders); deleted after
    with sink_connector(stack, layout) as sink:
        stored = sink.stored_config()
        assert stored["iceberg.catalog.s3.secret-access-key"] == "${env:LAKEBUS_S3_SECRET_ACCESS_KEY}"
        _produce_and_check(stack, spark, run_id, layout, sink.running)


def _produce_and_check(stack, spark, run_id, layout, running):
    wait_for(running, "connector and task RUNNING", timeout=60)

    # 3. produce: the seed sample verbatim, generated events, a malformed record, more events
    rng = random.Random(20251125)
    first, second = generated_events(rng, 60, 20000), generated_events(rng, 30, 30000)
    malformed = b'{"schema": not json at all'
    producer = Producer({"bootstrap.servers": stack.kafka.bootstrap_servers, "acks": "all", "enable.idempotence": True})
    failures = []
    def report(err, msg):
        if err is not None:
            failures.append(err)
    producer.produce(layout.bus_topic.name, key=b"2001", value=SEED_BET_ENVELOPE, on_delivery=report)
    for event, payload in first:
        producer.produce(layout.bus_topic.name, key=str(payload["user_id"]).encode(), value=seed_envelope(event, payload), on_delivery=report)
    producer.produce(layout.bus_topic.name, key=b"bad", value=malformed, on_delivery=report)
    for event, payload in second:
        producer.produce(layout.bus_topic.name, key=str(payload["user_id"]).encode(), value=seed_envelope(event, payload), on_delivery=report)
    assert producer.flush(30) == 0 and not failures

    events = first + second
    expected = {"bet": 1 + sum(e == "bet" for e, _ in events), "recharge": sum(e == "recharge" for e, _ in events)}
    catalog = load_catalog(stack)
    rows = partial(scan_or_none, catalog)

    # 4. exact row counts per table through pyiceberg, polled against a deadline
    for event, table_name in layout.routes.items():
        arrow = wait_for(lambda: running() and (t := rows(table_name)) is not None and t.num_rows >= expected[event] and t,
                         f"{expected[event]} rows in {table_name}")
        assert arrow.num_rows == expected[event], f"{table_name}: {arrow.num_rows} rows, expected {expected[event]}"
        assert len(set(arrow.column("order_id").to_pylist())) == expected[event], "duplicate rows"

    # the seed sample row, exactly
    bet = rows(layout.routes["bet"]).to_pylist()
    seed_row = next(r for r in bet if r["order_id"] == "10001")
    provenance = {k: seed_row.pop(k) for k in PROVENANCE_COLUMNS}
    assert seed_row == {**json.loads(SEED_BET_ENVELOPE)["payload"], "amount": 10.0}
    assert (provenance["_kafka_topic"], provenance["_kafka_partition"], provenance["_kafka_offset"]) == (layout.bus_topic.name, 0, 0)

    # 5. column types as the envelope schema says; optional fields nullable, base fields required
    for event, table_name in layout.routes.items():
        table = catalog.load_table(table_name)
        for name, ctype in BASE_FIELDS + EVENT_FIELDS[event]:
            col = table.schema().find_field(name)
            assert col.field_type == ICEBERG_TYPES[ctype], f"{table_name}.{name}: {col.field_type}"
            assert col.required == (name in dict(BASE_FIELDS)), f"{table_name}.{name} required={col.required}"

        # auto-created partitioned by log_date (an invalid spec would only be logged by the sink)
        assert [(f.name, str(f.transform)) for f in table.spec().fields] == [("log_date", "identity")], table.spec()

        # 6. data files are Parquet, ZSTD-compressed
        files = list(table.scan().plan_files())
        assert files
        for task in files:
            assert task.file.file_format.name == "PARQUET"
            with table.io.new_input(task.file.file_path).open() as fh:
                meta = pq.ParquetFile(fh).metadata
            codecs = {meta.row_group(g).column(c).compression for g in range(meta.num_row_groups) for c in range(meta.num_columns)}
            assert codecs == {"ZSTD"}, f"{task.file.file_path}: {codecs}"

    # 7. the same counts and types through Spark SQL
    for event, table_name in layout.routes.items():
        assert spark.sql(f"SELECT count(*) AS n FROM {table_name}").collect()[0]["n"] == expected[event]
        types = {r["col_name"]: r["data_type"] for r in spark.sql(f"DESCRIBE TABLE {table_name}").collect()}
        assert types["plat_id"] == "int" and types["ts"] == "bigint" and types["amount"] == "double" and types["log_date"] == "string"
    revenue = spark.sql(f"SELECT round(sum(amount), 2) AS s FROM {layout.routes['bet']}").collect()[0]["s"]
    assert revenue == round(10 + sum(p["amount"] for e, p in events if e == "bet"), 2)

    # 8. the malformed record is in the DLQ with Connect's error context headers
    consumer = Consumer({"bootstrap.servers": stack.kafka.bootstrap_servers, "group.id": f"e2e-dlq-{run_id}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([layout.dlq_topic.name])
    try:
        msg = wait_for(lambda: (m := consumer.poll(1.0)) is not None and m.error() is None and m, "a DLQ record", timeout=60, interval=0)
    finally:
        consumer.close()
    assert msg.value() == malformed
    headers = {k: (v or b"").decode() for k, v in (msg.headers() or [])}
    assert headers["__connect.errors.topic"] == layout.bus_topic.name
    assert headers["__connect.errors.offset"] == str(1 + len(first))
    assert headers["__connect.errors.stage"] == "VALUE_CONVERTER"
    assert "DataException" in headers["__connect.errors.exception.class.name"]

    # 9. ... and the connector is still RUNNING
    assert running(), "connector left RUNNING state after the malformed record"
