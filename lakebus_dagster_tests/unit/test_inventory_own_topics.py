"""lakebus's own bookkeeping topics are never subjects of topic-inventory alerts.

On the cluster profile topic_inventory_sensor raised "schema of topic events.ledger changed" when the
offset ledger wrote new keys to its own state topic. The sensor is evaluated here as the daemon does
(``evaluate_tick``, cursors chained) over an inventory read stubbed at its one entry point
(``read_inventory``), the topics named by the shipped bus layout."""

from __future__ import annotations


import pytest

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster.inventory.own_topics import CONNECT_INTERNAL_TOPICS, own_topics

from .inventory_fakes import SENT, TOPICS, stub_inventory, tick


@pytest.fixture(autouse=True)
def _stub_inventory(monkeypatch):
    stub_inventory(monkeypatch)


def test_bookkeeping_topics_are_the_layouts_own_state_topics():
    bus = BusLayout.default()
    assert own_topics(bus).bookkeeping == {"iceberg-control-events", "lakebus-connector-states", "dlq-events.replayed",
                                           "events.ledger", *CONNECT_INTERNAL_TOPICS}
    suffixed = bus.with_suffix("t1")
    assert own_topics(suffixed).bookkeeping == {suffixed.control_topic.name, suffixed.state_topic.name,
                                                suffixed.replay_ledger_topic.name, suffixed.offset_ledger_topic.name,
                                                *CONNECT_INTERNAL_TOPICS}


def test_the_ledger_writing_new_keys_to_its_topic_is_no_schema_change():
    bus = BusLayoutResource().layout()
    ledger, control, state, dlq = (bus.offset_ledger_topic.name, bus.control_topic.name, bus.state_topic.name,
                                   bus.dlq_topic.name)
    TOPICS.update({bus.bus_topic.name: [{"event": "bet", "amount": 1.0}], ledger: [{"verified": {"0": 10}}],
                   control: [{"type": "commit"}], state: [{"state": "RUNNING"}], dlq: [{"amount": "x"}],
                   "orders": [{"id": 1}]})
    cursor = tick(None)  # baseline
    assert SENT == []
    # the offset ledger writes a new key shape to its own topic, the sink and the state store theirs,
    # a new kind of rejected record lands in the DLQ; a stranger's topic and the bus change schema
    TOPICS.update({ledger: [{"verified": {"0": 10}, "retired": {"0": [[0, 5]]}, "note": "run x"}],
                   control: [{"type": "commit", "group": "g", "offsets": [1]}], state: [{"state": "PAUSED", "by": "r"}],
                   dlq: [{"amount": None, "oops": True}], "orders": [{"id": "1"}],
                   bus.bus_topic.name: [{"event": "bet", "amount": "1.0"}]})
    cursor = tick(cursor)
    assert sorted(a["title"].split(" (")[0] for a in SENT) == [f"schema of event bet on topic {bus.bus_topic.name} changed",
                                                                "schema of topic orders changed"]
    # the bookkeeping topics disappearing (deleted by hand, recreated by provisioning) is no topic news either
    SENT.clear()
    for name in (ledger, control, state):
        del TOPICS[name]
    cursor = tick(cursor)
    assert SENT == []
    del TOPICS[dlq]  # the DLQ stays a subject of disappearance (dlq_sensor only waits for it)
    tick(cursor)
    assert [a["title"] for a in SENT] == [f"topic {dlq} disappeared"]
