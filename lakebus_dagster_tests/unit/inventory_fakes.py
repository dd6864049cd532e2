"""The topic inventory sensor with its Kafka reads replaced by records a test puts in :data:`TOPICS`,
evaluated through Dagster's own tick evaluation; the alerts it sends land in :data:`SENT`."""

from __future__ import annotations

import json

import dagster as dg

from lakebus_dagster.defs.alerts import AlertResource
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.inventory import sensors
from lakebus_dagster.defs.inventory.resources import TopicInventoryResource
from lakebus_dagster.defs.resources import BusLayoutResource, KafkaResource
from lakebus_dagster.inventory.schema import infer_schema
from lakebus_dagster.inventory.topics import TopicInventory

#: the alerts sent, in order
SENT: list[dict] = []
#: topic -> the records the inventory samples from it this tick
TOPICS: dict[str, list[dict]] = {}


class RecordingAlerts(AlertResource):
    def send(self, alert, log):
        SENT.append(alert)


def stub_inventory(monkeypatch) -> None:
    """Empty :data:`SENT` and :data:`TOPICS`; the sensor reads :data:`TOPICS` instead of Kafka."""
    SENT.clear(), TOPICS.clear()

    def read_inventory(kafka, topic_inventory):
        return {name: TopicInventory(name, 1, 1, {}, {0: 0}, {0: len(records)},
                                     schema=infer_schema(json.dumps(r).encode() for r in records))
                for name, records in TOPICS.items()}

    monkeypatch.setattr(sensors, "read_inventory", read_inventory)


def tick(cursor: str | None, capture: ChangeCaptureResource | None = None) -> str | None:
    """One evaluation of the shipped sensor from ``cursor``; the cursor it leaves."""
    defs = dg.Definitions(sensors=[sensors.topic_inventory_sensor], resources={
        "kafka": KafkaResource(bootstrap_servers="127.0.0.1:1"), "topic_inventory": TopicInventoryResource(),
        "alerts": RecordingAlerts(), "layout": BusLayoutResource(), "capture": capture or ChangeCaptureResource()})
    sensor = defs.resolve_sensor_def("topic_inventory_sensor")
    with dg.instance_for_test() as instance, dg.build_sensor_context(
            instance=instance, cursor=cursor, definitions=defs, sensor_name=sensor.name, resources=defs.resources) as ctx:
        return sensor.evaluate_tick(ctx).cursor
