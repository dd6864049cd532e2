"""lakebus's own bookkeeping topics are never subjects of topic-inventory alerts.

On the cluster profile topic_inventory_sensor raised "schema of topic events.ledger changed" when the
offset ledger wrote new keys to its own state topic. The sensor is evaluated here as the daemon does
(``evaluate_tick``, cursors chained) over an inventory read stubbed at its one entry point
(``read_inventory``), the topics named by the shipped bus layout."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.defs.alerts import AlertResource
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.inventory import sensors
from lakebus_dagster.defs.inventory.resources import TopicInventoryResource
from lakebus_dagster.defs.resources import BusLayoutResource, KafkaResource
from lakebus_dagster.inventory.own_topics import CONNECT_INTERNAL_TOPICS, own_topics
from lakebus_dagster.inventory.schema import infer_schema
from lakebus_dagster.inventory.topics import TopicInventory

SENT: list[dict] = []
#: topic -> the records the inventory samples from it this tick
TOPICS: dict[str, list[dict]] = {}


class RecordingAlerts(AlertResource):
    def send(self, alert, log):
        SENT.append(alert)


@pytest.fixture(autouse=True)
def _stub_inventory(monkeypatch):
    SENT.clear(), TOPICS.clear()

    def read_inventory(kafka, topic_inventory):
        return {name: TopicInventory(name, 1, 1, {}, {0: 0}, {0: len(records)},
                                     schema=infer_schema(json.dumps(r).encode() for r in records))
                for name, records in TOPICS.items()}

    monkeypatch.setattr(sensors, "read_inventory", read_inventory)


def tick(cursor: str | None) -> str | None:
    defs = dg.Definitions(sensors=[sensors.topic_inventory_sensor], resources={
        "kafka": KafkaResource(bootstrap_servers="127.0.0.1:1"), "topic_inventory": TopicInventoryResource(),
        "alerts": RecordingAlerts(), "layout": BusLayoutResource(), "capture": ChangeCaptureResource()})
    sensor = defs.resolve_sensor_def("topic_inventory_sensor")
    with dg.instance_for_test() as instance, dg.build_sensor_context(
            instance=instance, cursor=cursor, definitions=defs, sensor_name=sensor.name, resources=defs.resources) as ctx:
        return sensor.evaluate_tick(ctx).cursor


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
