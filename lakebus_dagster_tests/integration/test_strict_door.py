"""The sink's door on the real stack: hostile and careless records between good events.

Each bad record below would, without lakebus's strict converter and registry guard, land coerced,
vanish in the sink's routing, or fail the sink task (issue 10's table). Here every one of them must
reach the DLQ with its original key and bytes and a readable ``__connect.errors.exception.message``;
every good event must land exactly once; the tombstone lands nowhere; the connector stays RUNNING;
and the offset ledger accounts for every offset of the mix in exact numbers: good events in the
tables, bad records in the DLQ (each traced to its offset), the tombstone as a tombstone.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.events import Bet, EnvelopeEncoder, Recharge
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.ledger import Ledger, ledger_complete
from lakebus_dagster.settings import Settings
from lakebus_dagster_tests.cleanup import remove_suffixed

from .helpers import isolated_layout, scan_or_none, sink_connector, wait_for, wait_for_rows

pytestmark = pytest.mark.integration

ENCODER = EnvelopeEncoder()
MESSAGE = "__connect.errors.exception.message"
STAGE = "__connect.errors.stage"


def bet(i: int) -> Bet:
    return Bet(category="biz", event="bet", log_date="2025-11-27", hour=f"{i % 24:02d}", plat_id=1, app_id=10406,
               ts=1764201600000 + i, schema_version=1, user_id=1000 + i % 17, order_id=f"door-bet-{i}",
               amount=float(i) + 0.25, currency="BRL", game_id=777)


def recharge(i: int) -> Recharge:
    return Recharge(category="biz", event="recharge", log_date="2025-11-27", hour=f"{i % 24:02d}", plat_id=2,
                    app_id=10406, ts=1764201600000 + i, schema_version=1, status="success", user_id=2000 + i,
                    order_id=f"door-rch-{i}", amount=5.0, currency="USD", reason=None)


def envelope(i: int = 0) -> dict:
    """A good bet envelope as plain JSON, for the hostile variants to mutate."""
    return json.loads(ENCODER.encode(bet(10_000 + i)))


def with_payload(**changes) -> bytes:
    env = envelope()
    env["payload"].update(changes)
    return json.dumps(env).encode()


def with_field_type(field: str, connect_type: str, value, **flags) -> bytes:
    """A bet envelope whose schema declares ``field`` as ``connect_type`` and whose payload agrees."""
    env = envelope()
    for f in env["schema"]["fields"]:
        if f["field"] == field:
            f["type"] = connect_type
            f.update(flags)
    env["payload"][field] = value
    return json.dumps(env).encode()


def without(field: str, *, in_schema: bool) -> bytes:
    env = envelope()
    env["payload"].pop(field)
    if in_schema:
        env["schema"]["fields"] = [f for f in env["schema"]["fields"] if f["field"] != field]
    return json.dumps(env).encode()


def with_extra_field(spec: dict, value) -> bytes:
    env = envelope()
    env["schema"]["fields"].append(spec)
    env["payload"][spec["field"]] = value
    return json.dumps(env).encode()


def mutate(fn: Callable[[dict], object]) -> bytes:
    env = envelope()
    fn(env)
    return json.dumps(env).encode()


@dataclass(frozen=True)
class Bad:
    name: str
    value: bytes
    #: substrings the DLQ's exception message must contain
    reason: tuple[str, ...]
    stage: str = "VALUE_CONVERTER"


GUARD = "TRANSFORMATION"
ROUTES = "known routes: bet, recharge"

BAD: list[Bad] = [
    # -- issue 10's table ---------------------------------------------------------------------
    Bad("int32-as-string", with_payload(plat_id="abc"), ("field 'plat_id': expected int32, got string \"abc\"",)),
    Bad("int32-overflow", with_payload(plat_id=3_000_000_000),
        ("field 'plat_id': expected int32, got number 3000000000 (out of range",)),
    Bad("int64-fraction", with_payload(ts=1.5), ("field 'ts': expected int64, got number 1.5 (not an integer)",)),
    Bad("unknown-route", with_payload(event="withdraw"), ("value \"withdraw\" matches no route", ROUTES), GUARD),
    Bad("null-route", with_field_type("event", "string", None, optional=True), ("route field 'event' is null", ROUTES), GUARD),
    Bad("amount-declared-string", with_field_type("amount", "string", "12.50"),
        ("field 'amount' is declared string, registered double",), GUARD),
    # -- careless producers ----------------------------------------------------------------------
    Bad("null-required-route", with_payload(event=None), ("field 'event': expected string, got null (field is required)",)),
    Bad("missing-required", without("plat_id", in_schema=False), ("field 'plat_id': expected int32, got no value",)),
    Bad("dropped-required-from-schema", without("ts", in_schema=True), ("required field 'ts' (int64) is not declared",), GUARD),
    Bad("amount-string-value", with_payload(amount="12.50"), ("field 'amount': expected double, got string \"12.50\"",)),
    Bad("nan-string", with_payload(amount="NaN"), ("field 'amount': expected double, got string \"NaN\"",)),
    Bad("infinity-string", with_payload(amount="Infinity"), ("expected double, got string \"Infinity\"",)),
    Bad("object-for-string", with_payload(currency={"code": "BRL"}), ("field 'currency': expected string, got object",)),
    Bad("array-for-int", with_payload(game_id=[777]), ("field 'game_id': expected int32, got array [777]",)),
    Bad("bool-for-int", with_payload(user_id=True), ("field 'user_id': expected int32, got boolean true",)),
    Bad("int64-huge", with_payload(ts=10**20), ("field 'ts': expected int64, got number 100000000000000000000",)),
    Bad("undeclared-field", with_payload(vip=True), ("field 'vip': not declared in the envelope schema",)),
    Bad("unknown-schema-version", with_payload(schema_version=7), ("schema_version 7", "registered versions: [1, 2]"), GUARD),
    Bad("plat-id-declared-string", with_field_type("plat_id", "string", "not-a-number"),
        ("field 'plat_id' is declared string, registered int32",), GUARD),
    Bad("new-required-field", with_extra_field({"field": "vip", "type": "boolean"}, True),
        ("field 'vip' is not in version 1 and is required",), GUARD),
    Bad("unknown-type-name", with_extra_field({"field": "x", "type": "int33", "optional": True}, 1),
        ("envelope schema: ", "int33")),
    # -- not an envelope at all --------------------------------------------------------------------
    Bad("no-schema-key", json.dumps({"payload": envelope()["payload"]}).encode(), ("\"schema\" is missing",)),
    Bad("no-payload-key", json.dumps({"schema": envelope()["schema"]}).encode(), ("\"payload\" is missing",)),
    Bad("null-schema", json.dumps({"schema": None, "payload": envelope()["payload"]}).encode(),
        ("\"schema\" must be a Connect schema object, got null",)),
    Bad("bare-payload", json.dumps(envelope()["payload"]).encode(), ("unexpected top-level key",)),
    Bad("empty-object", b"{}", ("\"schema\" is missing, \"payload\" is missing",)),
    Bad("json-array", b"[1, 2]", ("expected a JSON object", "got array [1,2]")),
    Bad("not-json", b'{"schema": not json at all', ("envelope: not valid JSON",)),
    Bad("empty-bytes", b"", ("envelope: empty value",)),
    Bad("duplicate-route-key", ENCODER.encode(bet(99)).replace(b'"event":"bet",', b'"event":"bet","event":"recharge",'),
        ("Duplicate field 'event'",)),
    # -- attacker-ish routes: matched exactly, never as patterns -----------------------------------
    Bad("route-alternation", with_payload(event="bet|recharge"), ("value \"bet|recharge\" matches no route", ROUTES), GUARD),
    Bad("route-dot-star", with_payload(event=".*"), ("value \".*\" matches no route",), GUARD),
    Bad("route-anchored", with_payload(event="^bet$"), ("value \"^bet$\" matches no route",), GUARD),
    Bad("route-unicode", with_payload(event="bét"), ("value \"bét\" matches no route",), GUARD),
    Bad("route-rtl-override", with_payload(event="\u202ebet"), ("matches no route",), GUARD),
    Bad("route-newline", with_payload(event="bet\n"), ("value \"bet\\n\" matches no route",), GUARD),
    Bad("route-case", with_payload(event="Bet"), ("value \"Bet\" matches no route",), GUARD),
]


def produce_mix(settings: Settings, topic: str) -> tuple[dict[str, int], list[Bad]]:
    """Good events with one bad record after every few, and a tombstone; returns the good counts."""
    producer = Producer({"bootstrap.servers": settings.kafka.bootstrap_servers, "acks": "all", "enable.idempotence": True})
    failures: list[object] = []

    def report(err, _msg):
        if err is not None:
            failures.append(err)

    good = {"bet": 0, "recharge": 0}
    i = 0
    for bad in [None, *BAD, None]:
        for _ in range(3):
            event = recharge(i) if i % 3 == 0 else bet(i)
            producer.produce(topic, key=str(event.user_id).encode(), value=ENCODER.encode(event), on_delivery=report)
            good[event.event] += 1
            i += 1
        if bad is not None:
            producer.produce(topic, key=f"bad-{bad.name}".encode(), value=bad.value, on_delivery=report)
    producer.produce(topic, key=b"tombstone", value=None, on_delivery=report)
    assert producer.flush(30) == 0 and not failures, failures
    return good, BAD


def read_dlq(settings: Settings, topic: str, expected: int) -> list:
    """Every record of the DLQ once it holds ``expected`` (polled; a surplus is returned, not hidden)."""
    consumer = Consumer({"bootstrap.servers": settings.kafka.bootstrap_servers, "group.id": f"door-test-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        tp = TopicPartition(topic, 0)
        wait_for(lambda: consumer.get_watermark_offsets(tp, timeout=5)[1] >= expected, f"{expected} records in {topic}")
        low, high = consumer.get_watermark_offsets(tp, timeout=5)
        consumer.assign([TopicPartition(topic, 0, low)])
        records: list = []

        def read_to_end() -> bool:
            for msg in consumer.consume(num_messages=500, timeout=1.0):
                assert msg.error() is None, msg.error()
                records.append(msg)
            return len(records) >= high - low

        wait_for(read_to_end, f"reading {topic}", interval=0)
        return records
    finally:
        consumer.close()


@pytest.fixture
def door_layout(stack: Settings, run_id: str) -> Iterator[BusLayout]:
    """An isolated layout whose topics, tables and namespace are deleted after the test."""
    layout = isolated_layout(run_id)
    yield layout
    remove_suffixed(stack, {run_id})


def test_hostile_records_go_to_the_dlq_with_reasons_good_ones_land_once(stack, door_layout):
    layout = door_layout
    catalog = load_catalog(stack)
    with sink_connector(stack, layout) as sink:
        stored = sink.stored_config()
        assert stored["value.converter"] == "io.lakebus.connect.StrictJsonConverter"
        assert stored["transforms"].split(",")[0] == "guard"
        sink.wait_running()

        good, bad = produce_mix(stack, layout.bus_topic.name)

        dlq = read_dlq(stack, layout.dlq_topic.name, len(bad))
        for event, table_name in layout.routes.items():
            wait_for_rows(sink, catalog, table_name, good[event])
        assert sink.running(), "connector left RUNNING state"

        # every bad record once in the DLQ, with its original key and bytes and a readable reason
        by_key = {}
        for msg in dlq:
            key = msg.key().decode()
            assert key not in by_key, f"{key} is in the DLQ twice"
            by_key[key] = msg
        assert sorted(by_key) == sorted(f"bad-{b.name}" for b in bad), "the DLQ holds exactly the bad records"
        problems = []
        for b in bad:
            msg = by_key[f"bad-{b.name}"]
            headers = {k: v.decode() for k, v in (msg.headers() or [])}
            reason = headers.get(MESSAGE, "")
            if msg.value() != b.value and not (b.value == b"" and msg.value() in (b"", None)):
                problems.append(f"{b.name}: DLQ value differs from the original bytes")
            if headers.get(STAGE) != b.stage:
                problems.append(f"{b.name}: stage {headers.get(STAGE)!r}, expected {b.stage!r} ({reason})")
            missing = [r for r in b.reason if r not in reason]
            if missing:
                problems.append(f"{b.name}: reason {reason!r} lacks {missing}")
        assert not problems, "\n".join(problems)

        # every good event exactly once (no duplicates, nothing coerced in), the tombstone nowhere
        for event, table_name in layout.routes.items():
            rows = scan_or_none(catalog, table_name)
            assert rows is not None and rows.num_rows == good[event], f"{table_name}: {rows and rows.num_rows} rows, expected {good[event]}"
            order_ids = rows.column("order_id").to_pylist()
            assert len(set(order_ids)) == good[event], f"{table_name}: duplicate rows"
            prefix = {"bet": "door-bet-", "recharge": "door-rch-"}[event]
            assert all(o.startswith(prefix) for o in order_ids), f"a bad record landed in {table_name}"
            assert set(rows.column("event").to_pylist()) == {event}
        assert sink.running(), "connector left RUNNING state"

        # the offset ledger over the whole mix (grace 0: nothing may still be pending): every offset
        # accounted for exactly once, in exact numbers per class, every DLQ record traced to its offset
        with ConnectClient(stack.connect.urls[0]) as connect:
            run = ledger_complete(Ledger.from_kafka_config(layout, stack.kafka.client_config(), catalog, connect))
        assert run.complete, run.verdict.problem_summary()
        places = Counter()
        for verdict in run.verdict.partitions.values():
            places.update({getattr(place, "value", place): n for place, n in verdict.by_place.items()})
        assert dict(places) == {"ods": sum(good.values()), "dlq": len(bad), "tombstone": 1}, places
        assert (run.dlq_records_read, run.dlq_unattributed) == (len(bad), 0)
        assert run.bus_records_read == sum(good.values()) + len(bad) + 1
