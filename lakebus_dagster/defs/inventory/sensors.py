"""topic_inventory_sensor: one alert when a topic appears or disappears, or its schema hash changes.

The cursor holds each known topic's schema hash and shape, plus alerts not yet delivered. The first
tick only records a baseline (no alert storm for the topics that already exist), and the topics
lakebus's own bus layout declares (bus, control, DLQ, state and ledger topics: provisioning creates
them) are known, not news, when they appear — the bus topic's and the DLQ's disappearance still
alerts, and so do the bus topic's schema changes. lakebus's bookkeeping topics (the sink's control
topic, the declared-state topic, the DLQ replay ledger and the offset ledger: :func:`bookkeeping_topics`)
are never subjects of an alert: their records are lakebus's and the sink's own state, whose keys and
shapes change as they work (the offset ledger writing a new key raised "schema of topic events.ledger
changed" on the cluster profile), and their loss shows elsewhere (a FAILED sink, an unreadable
declared state, a failed ledger run). The DLQ's schema is whatever was rejected: ``dlq_sensor``
alerts once per new reason, so the inventory does not alert its schema changes. A topic whose
sample is empty keeps its last known schema: a topic emptied by retention has not changed shape,
and a new topic's first records are its first schema, not a change of it.
"""


import json

import dagster as dg

from lakebus_dagster.defs.alerts import AlertResource, alert_observations, deliver_pending, make_alert
from lakebus_dagster.defs.inventory.assets import inventory_metadata, read_inventory
from lakebus_dagster.defs.asset_keys import TOPIC_INVENTORY_KEY
from lakebus_dagster.defs.inventory.constants import INVENTORY_SENSOR_INTERVAL_S
from lakebus_dagster.defs.inventory.resources import TopicInventoryResource
from lakebus_dagster.bus.desired import topic_specs
from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.defs.resources import BusLayoutResource, KafkaResource
from lakebus_dagster.inventory.schema import EMPTY, diff_shapes


def bookkeeping_topics(bus: BusLayout) -> frozenset[str]:
    """lakebus's own bookkeeping topics in ``bus``: never subjects of an inventory alert."""
    return frozenset({bus.control_topic.name, bus.state_topic.name, bus.replay_ledger_topic.name,
                      bus.offset_ledger_topic.name})


def inventory_changes(known: dict[str, dict], seen: dict[str, dict], expected: frozenset[str] = frozenset(),
                      bookkeeping: frozenset[str] = frozenset(),
                      schema_watched_elsewhere: frozenset[str] = frozenset()) -> tuple[list[dict], dict[str, dict]]:
    """Alerts for the differences between the cursor's ``known`` topics and this tick's ``seen`` ones,
    and the new known state. ``seen`` maps topic → {"source", "hash", "shape"}; ``expected`` are the
    topics lakebus itself creates, recorded without an alert when they appear; ``bookkeeping``
    topics are recorded and never alerted; the schema changes of ``schema_watched_elsewhere`` (the
    DLQ) are recorded without an alert."""
    alerts, after = [], {}
    for name in sorted(set(seen) - set(known)):
        s = seen[name]
        if name not in expected and name not in bookkeeping:
            alerts.append(make_alert("topic", f"topic {name} appeared", f"schema: {s['source']}, hash {s['hash'][:16]}", f"topic:{name}"))
        after[name] = s
    for name in sorted(set(known) - set(seen) - bookkeeping):
        alerts.append(make_alert("topic", f"topic {name} disappeared", f"last schema hash {known[name]['hash'][:16]}", f"topic:{name}"))
    for name in sorted(set(known) & set(seen)):
        old, new = known[name], seen[name]
        if new["source"] == EMPTY or old["source"] == EMPTY or old["hash"] == new["hash"] \
                or name in bookkeeping or name in schema_watched_elsewhere:
            after[name] = old if new["source"] == EMPTY else new
            continue
        diff = diff_shapes(old["shape"], new["shape"])
        lines = diff.lines() or [f"source {old['source']} → {new['source']}"]
        alerts.append(make_alert("schema", f"schema of topic {name} changed ({old['hash'][:12]} → {new['hash'][:12]})",
                             "\n".join(lines), f"schema:{name}"))
        after[name] = new
    return alerts, after


@dg.sensor(
    name="topic_inventory_sensor",
    minimum_interval_seconds=INVENTORY_SENSOR_INTERVAL_S,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Every minute: inventories the Kafka topics (bounded sample), alerts once when a topic appears or "
    "disappears or a topic's schema hash changes (with the field-level difference), and records the inventory on "
    "kafka/topic_inventory when anything changed.",
)
def topic_inventory_sensor(context: dg.SensorEvaluationContext, kafka: KafkaResource,
                           topic_inventory: TopicInventoryResource, alerts: AlertResource, layout: BusLayoutResource):
    state = json.loads(context.cursor) if context.cursor else {}
    known: dict[str, dict] | None = state.get("topics")
    pending: list[dict] = state.get("pending_alerts", [])
    try:
        inventory = read_inventory(kafka, topic_inventory)
    except dg.Failure as exc:
        # an unreachable cluster is the status sensor's business; nothing is known to have changed
        return dg.SensorResult(skip_reason=dg.SkipReason(f"inventory not read: {exc.description}"), cursor=context.cursor)
    seen = {n: {"source": i.schema.source, "hash": i.schema.hash, "shape": i.schema.shape} for n, i in inventory.items()}
    if known is None:
        alerts_now, after = [], seen
    else:
        bus = layout.layout()
        own = frozenset(t.name for t in topic_specs(bus))
        alerts_now, after = inventory_changes(known, seen, own, bookkeeping_topics(bus), frozenset({bus.dlq_topic.name}))
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
