"""``replay_dlq``'s reason filter on the real stack: two classes of broken records in one DLQ, and
a replay of one class replays exactly that class — the records that landed, the replay ledger and
what stays in the DLQ counted exactly.

The bus is the test's own (``BusLayoutResource(name_suffix=run_id)``, provisioned by
``provision_lakebus``). A producer that forgot the envelope sends bare payloads (class A: the
converter's "not an envelope"); another sends ``amount`` as a string (class B: a type error on one
field). Both reach the DLQ through the sink's strict converter, as in ``test_strict_door.py``.
"""

from __future__ import annotations

import json

import pytest

from lakebus_dagster.definitions import defs
from lakebus_dagster.events import Bet, EnvelopeEncoder
from lakebus_dagster.kafka import read_range, watermarks
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.monitor.dlq import decode, group_by_reason
from lakebus_dagster_tests.integration.helpers import provisioned_bus, wait_for

pytestmark = pytest.mark.integration

ENCODER = EnvelopeEncoder()


def bet(i: int) -> Bet:
    return Bet(category="biz", event="bet", log_date="2025-11-27", hour="10", plat_id=1, app_id=2, ts=1764237600000 + i,
               schema_version=1, user_id=100 + i % 7, order_id=f"o{i}", amount=float(i), currency="BRL", game_id=1)


def bare(i: int) -> bytes:
    """Class A: the payload without its Schema+JSON envelope (fixable: ``wrap_bare_payloads``)."""
    return json.dumps(json.loads(ENCODER.encode(bet(i)))["payload"]).encode()


def amount_as_string(i: int) -> bytes:
    """Class B: an envelope whose ``amount`` value is a string (not fixable by a replay)."""
    env = json.loads(ENCODER.encode(bet(i)))
    env["payload"]["amount"] = f"{i}.50"
    return json.dumps(env).encode()


@pytest.fixture
def bus(stack, run_id):
    with provisioned_bus(stack, run_id) as (resources, layout, _):
        yield resources, layout


def dlq_records(resources: dict, topic: str) -> list:
    consumer = resources["kafka"].consumer("lakebus-test-dlq-reader")
    try:
        low, high = watermarks(consumer, topic, 0)
    finally:
        consumer.close()
    return [decode(m.partition(), m.offset(), m.headers(), m.value(), m.key())
            for m in read_range(resources["kafka"].consumer, topic, 0, low, high, 30)]


def replay(resources: dict, **config) -> dict:
    result = defs.resolve_job_def("replay_dlq").execute_in_process(
        resources=resources,
        run_config={"ops": {"replay_dlq_op": {"config": {"confirm": resources["layout"].layout().dlq_topic.name, **config}}}})
    assert result.success
    event = next(e for e in result.all_node_events if e.is_successful_output)
    return {k: v.value for k, v in event.event_specific_data.metadata.items()}


def test_reason_filter_replays_exactly_one_class_once(bus, stack, wait_for_rows):
    resources, layout = bus
    topic, dlq, table = layout.bus_topic.name, layout.dlq_topic.name, layout.routes["bet"]
    producer = resources["kafka"].producer(acks="all")
    records = [(b"good-1", ENCODER.encode(bet(1))), (b"bare-2", bare(2)), (b"amount-3", amount_as_string(3)),
               (b"good-4", ENCODER.encode(bet(4))), (b"bare-5", bare(5)), (b"amount-6", amount_as_string(6)),
               (b"amount-7", amount_as_string(7)), (b"good-8", ENCODER.encode(bet(8)))]
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0

    catalog = load_catalog(stack)
    assert wait_for_rows(catalog, table, 3, connector=layout.connector_name) == 3
    letters = wait_for(lambda: len(found := dlq_records(resources, dlq)) >= 5 and found, "5 records in the DLQ", timeout=120)
    assert sorted(dl.key for dl in letters) == [b"amount-3", b"amount-6", b"amount-7", b"bare-2", b"bare-5"]
    classes = group_by_reason(letters)
    reason_a = next(dl.reason for dl in letters if dl.key == b"bare-2")
    reason_b = next(dl.reason for dl in letters if dl.key == b"amount-3")
    assert classes == {reason_a: 2, reason_b: 3}, classes  # two classes: the records' own values are masked
    assert reason_a not in reason_b, "the filter must select class A alone"
    positions_a = sorted(f"0:{dl.offset}" for dl in letters if dl.key.startswith(b"bare-"))

    first = replay(resources, reason=reason_a, wrap_bare_payloads=True)
    assert {k: first[k] for k in ("replayed", "already_replayed", "filtered_out", "not_replayed_invalid")} == {
        "replayed": 2, "already_replayed": 0, "filtered_out": 3, "not_replayed_invalid": []}
    assert sorted(first["replayed_offsets"]) == positions_a
    assert first["range"] == f"{dlq}[0] 0..4"

    # the two bare payloads land, wrapped; nothing of class B does
    assert wait_for_rows(catalog, table, 5, connector=layout.connector_name) == 5
    rows = catalog.load_table(table).scan(selected_fields=("order_id",)).to_arrow().column("order_id").to_pylist()
    assert sorted(rows) == ["o1", "o2", "o4", "o5", "o8"]
    # the replayed records landed rather than failing again: the DLQ holds exactly the 5 it held, and
    # the ledger marks exactly class A's positions replayed: class B's 3 stay in the DLQ, unreplayed
    after = dlq_records(resources, dlq)
    assert [(dl.offset, dl.key) for dl in after] == [(dl.offset, dl.key) for dl in letters]
    ledger = resources["kafka"].consumer("lakebus-test-ledger-reader")
    try:
        low, high = watermarks(ledger, layout.replay_ledger_topic.name, 0)
    finally:
        ledger.close()
    keys = sorted(m.key().decode() for m in read_range(resources["kafka"].consumer, layout.replay_ledger_topic.name, 0, low, high, 30))
    assert keys == positions_a

    # a second replay of the class replays nothing
    second = replay(resources, reason=reason_a, wrap_bare_payloads=True)
    assert (second["replayed"], second["already_replayed"], second["filtered_out"]) == (0, 2, 3)
    assert catalog.load_table(table).scan().to_arrow().num_rows == 5
