"""The topic inventory alerts on news only: lakebus's own topics (events bus and change capture) are
not news, and on the one-topic bus a change in the mix of event types is not a schema change.

Pure decisions (:func:`inventory_changes` over :func:`schema_entry` of real inferred schemas) and
the sensor itself, evaluated as the daemon does with a stubbed inventory read, for the cursor."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.cdc.capture import capture_from_mapping
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.inventory.changes import inventory_changes, schema_entry
from lakebus_dagster.inventory.own_topics import CONNECT_INTERNAL_TOPICS, own_topics
from lakebus_dagster.inventory.schema import infer_schema

from .inventory_fakes import SENT, TOPICS, stub_inventory, tick

REPO = Path(__file__).resolve().parents[2]


def _capture(**overrides):
    return capture_from_mapping({"name": "shop", "host": "db", "port": 5432, "database": "shop", "user": "u",
                                 "schema": "app", "tables": ["users", "orders"], "heartbeat_table": "heartbeat",
                                 "namespace": "demo_cdc", "signal_bootstrap": "kafka:9092", **overrides})


def _entry(*records) -> dict:
    return schema_entry(infer_schema(None if r is None else json.dumps(r).encode() for r in records))


def _env(event: str, **fields) -> dict:
    """A Kafka Connect Schema+JSON envelope of one bus event."""
    types = {bool: "boolean", int: "int64", float: "double", str: "string"}
    schema = {"type": "struct", "name": event, "fields": [{"field": "event", "type": "string", "optional": False}] + [
        {"field": k, "type": types[type(v)], "optional": True} for k, v in fields.items()]}
    return {"schema": schema, "payload": {"event": event, **fields}}


# -- part 1: own topics -------------------------------------------------------------------------

def test_a_provisioned_capture_s_topics_appearing_raise_no_alert_a_stranger_s_exactly_one():
    bus, capture = BusLayout.default(), _capture()
    own = own_topics(bus, capture)
    provisioned = {t.name for t in (*capture.source_topics(), *capture.sink_topics())}
    # the seven topics that raised "appeared" when change capture was provisioned
    assert {"dlq-shop", "iceberg-control-shop", "shop.app.users", "shop.app.orders", "shop.app.users.ledger",
            "shop.app.orders.ledger", "shop.signals"} <= provisioned <= own.expected
    entry = _entry({"id": 1})
    known = {"events": entry}
    seen = {**known, **{name: entry for name in provisioned}, "stranger": entry}
    alerts, after = inventory_changes(known, seen, own)
    assert [a["title"] for a in alerts] == ["topic stranger appeared"]
    assert set(after) == set(seen)
    assert inventory_changes(after, seen, own)[0] == []
    # the change topics stay data topics: their disappearance and schema changes still alert
    gone = {k: v for k, v in seen.items() if k != "shop.app.users"}
    assert [a["title"] for a in inventory_changes(after, gone, own)[0]] == ["topic shop.app.users disappeared"]
    changed = {**seen, "shop.app.orders": _entry({"id": "1"}), "shop.app.orders.ledger": _entry({"v": 1}),
               "dlq-shop": _entry({"x": True})}
    assert [a["title"].split(" (")[0] for a in inventory_changes(after, changed, own)[0]] == [
        "schema of topic shop.app.orders changed"]


def test_without_capture_its_topics_are_strangers_and_a_capture_without_signals_still_owns_its_signal_topic():
    bus = BusLayout.default()
    assert "shop.app.users" not in own_topics(bus).all
    quiet = own_topics(bus, _capture(signal_bootstrap=""))
    assert "shop.signals" in quiet.bookkeeping and "__debezium-heartbeat.shop" in quiet.bookkeeping


def test_connect_internal_topics_are_the_ones_the_workers_are_configured_with():
    props = (REPO / "deploy/connect/connect-distributed.properties").read_text()
    configured = re.findall(r"^(?:config|offset|status)\.storage\.topic=(\S+)$", props, re.M)
    assert sorted(configured) == sorted(CONNECT_INTERNAL_TOPICS)


# -- part 2: per event type ---------------------------------------------------------------------

BET = {"event": "bet", "amount": 1.5, "user": "u1"}
RECHARGE = {"event": "recharge", "reason": "promo", "user": "u2"}


@pytest.mark.parametrize("wrap", [lambda r: r, lambda r: _env(**r)], ids=["bare", "envelope"])
def test_a_change_in_the_mix_of_event_types_is_no_alert(wrap):
    known = {"events": _entry(*(wrap(r) for r in (BET, RECHARGE, BET)))}
    only_bets = {"events": _entry(wrap(BET), wrap(BET))}
    assert only_bets["events"]["hash"] != known["events"]["hash"]  # the whole topic's shape moved ...
    alerts, after = inventory_changes(known, only_bets)
    assert alerts == []  # ... but no type changed
    assert set(after["events"]["events"]) == {"bet", "recharge"}  # a type absent from the sample is kept
    assert inventory_changes(after, known)[0] == []  # recharges are back, unchanged


def test_a_new_event_type_is_one_info_alert_once():
    known = {"events": _entry(BET, RECHARGE)}
    seen = {"events": _entry(BET, {"event": "withdraw", "amount": 2.0})}
    alerts, after = inventory_changes(known, seen)
    assert [(a["title"], a.get("level")) for a in alerts] == [("topic events: new event type withdraw", "info")]
    assert "+ amount: number" in alerts[0]["text"]
    assert inventory_changes(after, seen)[0] == []


def test_a_changed_event_type_is_one_alert_naming_the_topic_and_the_type_once_per_change():
    known = {"events": _entry(BET, RECHARGE)}
    seen = {"events": _entry({**BET, "amount": "1.5"}, RECHARGE)}
    alerts, after = inventory_changes(known, seen)
    assert [a["title"].split(" (")[0] for a in alerts] == ["schema of event bet on topic events changed"]
    assert alerts[0]["text"].splitlines()[0] == "~ amount: number → string"
    assert alerts[0].get("level") is None
    assert inventory_changes(after, seen)[0] == []
    assert inventory_changes(after, {"events": _entry({**BET, "amount": "1.5"})})[0] == []  # only bets: no news
    again = {"events": _entry(BET)}  # changed back: a change too, once
    alerts, after = inventory_changes(after, again)
    assert [a["title"].split(" (")[0] for a in alerts] == ["schema of event bet on topic events changed"]
    assert inventory_changes(after, again)[0] == []


def test_records_without_an_event_field_keep_the_whole_topic_rule():
    assert "events" not in _entry({"id": 1}, {"event": "bet"})  # one record names no type
    alerts, _ = inventory_changes({"orders": _entry({"id": 1})}, {"orders": _entry({"id": "1"})})
    assert [a["title"].split(" (")[0] for a in alerts] == ["schema of topic orders changed"]
    assert set(dict(infer_schema([json.dumps(BET).encode(), None]).events)) == {"bet"}  # a tombstone is no type


# -- the sensor's cursor ---------------------------------------------------------------------------

@pytest.fixture
def stub(monkeypatch):
    stub_inventory(monkeypatch)


def test_the_sensor_knows_the_deployed_capture_s_topics(stub):
    TOPICS.update({"events": [BET]})
    cursor = tick(None)
    capture = ChangeCaptureResource(enabled=True, signal_bootstrap="kafka:9092")
    spec = capture.spec()
    TOPICS.update({t.name: [{"id": 1}] for t in (*spec.source_topics(), *spec.sink_topics())})
    TOPICS["stranger"] = [{"id": 1}]
    tick(cursor, capture)
    assert [a["title"] for a in SENT] == ["topic stranger appeared"]


def test_an_old_shape_cursor_neither_crashes_nor_bursts_and_becomes_the_new_shape(stub):
    """A cursor written before per-type schemas holds the bus topic's whole-topic entry only. The
    first tick takes this sample's types as their baseline, silently; a type the old whole-topic
    schema already held is recorded silently when it shows up later; a type with new fields is news."""
    whole = schema_entry(infer_schema(json.dumps(r).encode() for r in (BET, RECHARGE)))
    old = {"events": {k: whole[k] for k in ("source", "hash", "shape")}, "orders": _entry({"id": 1})}
    cursor = json.dumps({"topics": old, "pending_alerts": []}, sort_keys=True)
    TOPICS.update({"events": [BET, BET], "orders": [{"id": 1}]})  # only bets now: the mix changed
    cursor = tick(cursor)
    assert SENT == []
    assert set(json.loads(cursor)["topics"]["events"]["events"]) == {"bet"}
    TOPICS["events"] = [BET, RECHARGE]  # recharges were there before the upgrade: no news
    cursor = tick(cursor)
    assert SENT == []
    TOPICS["events"] = [BET, {"event": "withdraw", "iban": "x"}]  # a type with a field never seen: one info alert
    cursor = tick(cursor)
    assert [(a["title"], a.get("level")) for a in SENT] == [("topic events: new event type withdraw", "info")]
    SENT.clear()
    assert tick(cursor) is not None and SENT == []
    TOPICS["events"] = [{**BET, "amount": "1.5"}]
    tick(cursor)
    assert [a["title"].split(" (")[0] for a in SENT] == ["schema of event bet on topic events changed"]
