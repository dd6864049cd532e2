"""connector_status_sensor and dlq_sensor: cursor-based, alert once per incident, never crash a tick."""

import json
import time
from collections import defaultdict

import dagster as dg
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from lakebus_dagster.connect import ConnectError
from lakebus_dagster.defs.monitoring.constants import (
    DLQ_ASSET_KEY,
    DLQ_MAX_RECORDS_PER_TICK,
    DLQ_SAMPLES_PER_CLASS,
    DLQ_SENSOR_INTERVAL_S,
    STATUS_SENSOR_INTERVAL_S,
)
from lakebus_dagster.defs.monitoring.resources import AlertResource, MonitoringPolicyResource, deliver_pending
from lakebus_dagster.defs.resources import BusLayoutResource, ConnectResource, KafkaResource
from lakebus_dagster.monitor.dlq import decode, group_by_class
from lakebus_dagster.monitor.incidents import UNREACHABLE_KEY, Incident, IncidentBook, detect_incidents


def _alert(kind: str, title: str, text: str = "", key: str | None = None) -> dict:
    return {"kind": kind, "title": title, "text": text, "key": key}


def _restart_request(connector: str, key: str, attempt: int, reason: str) -> dg.RunRequest:
    return dg.RunRequest(
        run_key=f"{key}:restart:{attempt}",
        job_name="restart_connector",
        run_config={"ops": {"restart_connector_op": {"config": {"connector": connector, "only_failed": True, "include_tasks": True}}}},
        tags={"lakebus/reason": reason[:250], "lakebus/incident": key, "lakebus/attempt": str(attempt)},
    )


@dg.sensor(
    name="connector_status_sensor",
    minimum_interval_seconds=STATUS_SENSOR_INTERVAL_S,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Connector/task states every tick: one alert per incident, one recovery notice, auto-restart with backoff.",
)
def connector_status_sensor(
    context: dg.SensorEvaluationContext,
    connect: ConnectResource,
    layout: BusLayoutResource,
    alerts: AlertResource,
    monitoring_policy: MonitoringPolicyResource,
):
    book = IncidentBook.from_cursor(context.cursor)
    now = time.time()
    bus = layout.layout()
    try:
        with connect.client() as client:
            overview = client.list_connectors(expand_status=True, expand_info=True)
        incidents = detect_incidents(
            overview, {bus.connector_name: "RUNNING"}, book, now, monitoring_policy.unassigned_threshold_s
        )
    except ConnectError as exc:
        # Connect itself being down is an incident like any other (alerted once), not a crashed tick.
        incidents = [Incident(UNREACHABLE_KEY, None, f"Kafka Connect at {connect.url} is unavailable: {exc}")]

    opened, cleared = book.update(incidents, now, monitoring_policy.recovery_stable_s)
    for inc in opened:
        book.pending_alerts.append(_alert("incident", inc.summary, f"incident {inc.key}", inc.key))
    for key, inc in cleared:
        book.pending_alerts.append(_alert("recovery", f"resolved: {inc.summary}", f"open for {now - inc.opened_at:.0f}s", key))

    policy = monitoring_policy.restart_policy()
    run_requests, restarted = [], set()
    for key, inc in sorted(book.open.items()):
        if not inc.restartable or not inc.active or inc.connector is None:
            continue
        if inc.connector not in restarted and policy.due(inc.restart_attempts, inc.last_restart_at, now):
            restarted.add(inc.connector)
            run_requests.append(_restart_request(inc.connector, key, inc.restart_attempts + 1, inc.summary))
        if inc.connector in restarted:
            inc.restart_attempts += 1
            inc.last_restart_at = now
        elif policy.exhausted(inc.restart_attempts) and not inc.escalated:
            inc.escalated = True
            book.pending_alerts.append(
                _alert("escalation", f"giving up auto-restart after {inc.restart_attempts} attempts: {inc.summary}",
                       "restarting does not fix it; see the task trace (poison record? run remediate_poison_record)", key)
            )

    book.pending_alerts = deliver_pending(book.pending_alerts, alerts, context.log)
    cursor = book.to_cursor()
    if not run_requests and not opened and not cleared:
        open_now = ", ".join(sorted(book.open)) or "none"
        return dg.SensorResult(skip_reason=dg.SkipReason(f"no change; open incidents: {open_now}"), cursor=cursor)
    return dg.SensorResult(run_requests=run_requests, cursor=cursor)


dlq_asset = dg.AssetSpec(
    DLQ_ASSET_KEY,
    description="The connector's dead-letter topic: records the converter could not read, with Connect's error headers. "
    "Observed by dlq_sensor.",
    group_name="bus",
    kinds={"kafka"},
)


@dg.sensor(
    name="dlq_sensor",
    minimum_interval_seconds=DLQ_SENSOR_INTERVAL_S,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Reads the DLQ from its stored position, groups by error class, alerts with counts and samples.",
)
def dlq_sensor(context: dg.SensorEvaluationContext, kafka: KafkaResource, layout: BusLayoutResource, alerts: AlertResource):
    state = json.loads(context.cursor) if context.cursor else {}
    offsets: dict[str, int] = state.get("offsets", {})
    known: set[str] = set(state.get("known_classes", []))
    pending: list[dict] = state.get("pending_alerts", [])
    total = int(state.get("total", 0))
    topic = layout.layout().dlq_topic.name

    consumer = kafka.consumer("lakebus-dlq-sensor", **{"enable.partition.eof": True})
    letters = []
    try:
        md = consumer.list_topics(topic, timeout=10)
        if topic not in md.topics or md.topics[topic].error is not None:
            return dg.SensorResult(skip_reason=dg.SkipReason(f"DLQ topic {topic} does not exist yet"), cursor=context.cursor)
        partitions = sorted(md.topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
        todo = {p for p in partitions if offsets.get(str(p), 0) < ends[p]}
        if todo:
            consumer.assign([TopicPartition(topic, p, offsets.get(str(p), OFFSET_BEGINNING)) for p in sorted(todo)])
        deadline = time.monotonic() + 20
        while todo and len(letters) < DLQ_MAX_RECORDS_PER_TICK and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=1.0):
                if msg.error():
                    if msg.error().code() == -191:  # _PARTITION_EOF
                        todo.discard(msg.partition())
                        continue
                    raise RuntimeError(f"reading DLQ topic {topic}: {msg.error()}")
                letters.append(decode(msg.partition(), msg.offset(), msg.headers(), msg.value(), msg.key()))
                offsets[str(msg.partition())] = msg.offset() + 1
                if offsets[str(msg.partition())] >= ends[msg.partition()]:
                    todo.discard(msg.partition())
    finally:
        consumer.close()

    by_class = group_by_class(letters)
    new_classes = sorted(set(by_class) - known)
    total += len(letters)
    asset_events = []
    if letters:
        samples = defaultdict(list)
        for dl in letters:
            if len(samples[dl.error_class]) < DLQ_SAMPLES_PER_CLASS:
                samples[dl.error_class].append(dl.sample())
        lines = [f"- {cls}: {n}{' (NEW error class)' if cls in new_classes else ''}" for cls, n in by_class.most_common()]
        sample_lines = [f"  - {s}" for cls in by_class for s in samples[cls]]
        pending.append(_alert("dlq", f"{len(letters)} new record(s) in {topic}" + (f"; new error class: {', '.join(new_classes)}" if new_classes else ""),
                              "\n".join(lines + ["samples:"] + sample_lines)))
        table = "\n".join(["| error class | records | new |", "|---|---|---|"] + [f"| `{c}` | {n} | {'yes' if c in new_classes else ''} |" for c, n in by_class.most_common()])
        asset_events.append(
            dg.AssetObservation(
                asset_key=DLQ_ASSET_KEY,
                metadata={
                    "new_records": len(letters),
                    "total_records_seen": total,
                    "by_error_class": dg.MetadataValue.md(table),
                    "new_error_classes": dg.MetadataValue.json(new_classes),
                    "samples": dg.MetadataValue.md("\n".join(f"- {s}" for cls in by_class for s in samples[cls])),
                    "next_offsets": dg.MetadataValue.json(offsets),
                },
            )
        )
    pending = deliver_pending(pending, alerts, context.log)
    cursor = json.dumps({"offsets": offsets, "known_classes": sorted(known | set(by_class)), "pending_alerts": pending, "total": total})
    if not letters:
        return dg.SensorResult(skip_reason=dg.SkipReason(f"no new records in {topic} (seen {total})"), cursor=cursor)
    return dg.SensorResult(asset_events=asset_events, cursor=cursor)
