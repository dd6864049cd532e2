"""topic_inventory_sensor: one alert when a topic appears or disappears, or a schema changes
(the decisions: :mod:`.changes`).

The cursor holds each known topic's schema hash and shape (per event type too, on a topic whose
records name their type), plus alerts not yet delivered. The first tick only records a baseline
(no alert storm for the topics that already exist). lakebus's own topics
(:func:`lakebus_dagster.inventory.own_topics.own_topics`: everything the events bus and, when on,
the change capture provision) are known, not news, when they appear; its bookkeeping topics are
never subjects of an alert, and the DLQs' schemas are ``dlq_sensor``'s business. A topic whose
sample is empty keeps its last known schema: a topic emptied by retention has not changed shape,
and a new topic's first records are its first schema, not a change of it.
"""


import json

import dagster as dg

from lakebus_dagster.cdc.capture import CaptureError, CaptureSpec
from lakebus_dagster.defs.alerts import AlertResource, alert_observations, deliver_pending
from lakebus_dagster.defs.asset_keys import TOPIC_INVENTORY_KEY
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.inventory.assets import inventory_metadata, read_inventory
from lakebus_dagster.defs.inventory.changes import inventory_changes, schema_entry
from lakebus_dagster.defs.inventory.constants import INVENTORY_SENSOR_INTERVAL_S
from lakebus_dagster.defs.inventory.resources import TopicInventoryResource
from lakebus_dagster.defs.resources import BusLayoutResource, KafkaResource
from lakebus_dagster.inventory.own_topics import own_topics

__all__ = ["inventory_changes", "topic_inventory_sensor"]


def declared_capture(capture: ChangeCaptureResource, log=None) -> CaptureSpec | None:
    """The change capture this deployment provisions (None when off or declared wrong)."""
    if not capture.enabled:
        return None
    try:
        return capture.spec()
    except CaptureError as exc:
        if log is not None:
            log.warning(f"change capture declared wrong, its topics are not known as lakebus's own: {exc}")
        return None


@dg.sensor(
    name="topic_inventory_sensor",
    minimum_interval_seconds=INVENTORY_SENSOR_INTERVAL_S,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Every minute: inventories the Kafka topics (bounded sample), alerts once when a topic that is not "
    "lakebus's own appears, a topic disappears, or a schema changes (per event type on a topic whose records name one; "
    "with the field-level difference), and records the inventory on kafka/topic_inventory when anything changed.",
)
def topic_inventory_sensor(context: dg.SensorEvaluationContext, kafka: KafkaResource,
                           topic_inventory: TopicInventoryResource, alerts: AlertResource, layout: BusLayoutResource,
                           capture: ChangeCaptureResource):
    state = json.loads(context.cursor) if context.cursor else {}
    known: dict[str, dict] | None = state.get("topics")
    pending: list[dict] = state.get("pending_alerts", [])
    try:
        inventory = read_inventory(kafka, topic_inventory)
    except dg.Failure as exc:
        # an unreachable cluster is the status sensor's business; nothing is known to have changed
        return dg.SensorResult(skip_reason=dg.SkipReason(f"inventory not read: {exc.description}"), cursor=context.cursor)
    seen = {n: schema_entry(i.schema) for n, i in inventory.items()}
    if known is None:
        alerts_now, after = [], seen
    else:
        alerts_now, after = inventory_changes(known, seen, own_topics(layout.layout(), declared_capture(capture, context.log)))
    pending += alerts_now
    delivered, pending = deliver_pending(pending, alerts, context.log)
    events = alert_observations(delivered)
    if known is None or alerts_now:
        events.append(dg.AssetObservation(asset_key=TOPIC_INVENTORY_KEY,
                                          metadata=inventory_metadata(inventory, topic_inventory.bounds().__dict__)))
    cursor = json.dumps({"topics": after, "pending_alerts": pending}, sort_keys=True)
    if known is None:
        reason = f"baseline: {len(seen)} topic(s) recorded"
    elif delivered:
        reason = f"sent {len(delivered)} alert(s): " + "; ".join(a["title"][:100] for a in delivered)
    else:
        reason = f"no change in {len(seen)} topic(s)"
    return dg.SensorResult(skip_reason=dg.SkipReason(reason), asset_events=events, cursor=cursor)
