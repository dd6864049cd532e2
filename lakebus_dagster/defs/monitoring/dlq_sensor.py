"""dlq_sensor: the dead-letter topics — the events sink's and, with ``LAKEBUS_POSTGRES=on``, change
capture's sink's (``dlq-<capture>``: a change its sink could not write, with Connect's error
headers) — read from their stored positions, grouped by reason (field + rule), one alert per new
reason of a topic with counts and samples, and every batch recorded on the ``kafka/dlq_events``
asset (its ``topic`` in the metadata).

The cursor keeps the events DLQ's positions under ``offsets`` (as before there were others) and
every other topic's under ``topic_offsets``; a reason is known per topic.
"""

import json
import time
from collections import defaultdict

import dagster as dg
from confluent_kafka import KafkaException, OFFSET_BEGINNING

from lakebus_dagster.defs.alerts import AlertResource, alert_observations, deliver_pending, make_alert
from lakebus_dagster.defs.asset_keys import DLQ_ASSET_KEY
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.clock import ClockResource
from lakebus_dagster.defs.monitoring.constants import (
    DLQ_MAX_RECORDS_PER_TICK,
    DLQ_REASON_QUIET_S,
    DLQ_SAMPLES_PER_CLASS,
    DLQ_SENSOR_INTERVAL_S,
)
from lakebus_dagster.defs.resources import BusLayoutResource, KafkaResource
from lakebus_dagster.kafka import TopicMissing, consume_ranges, end_offsets
from lakebus_dagster.markdown import markdown_table
from lakebus_dagster.monitor.dlq import DeadLetter, decode, group_by_reason

dlq_asset = dg.AssetSpec(
    DLQ_ASSET_KEY,
    description="The sinks' dead-letter topics (the events sink's; change capture's with LAKEBUS_POSTGRES=on): records "
    "a sink could not read or write, with Connect's error headers. Observed by dlq_sensor.",
    group_name="bus",
    kinds={"kafka"},
)


def _capture_dlq(capture: ChangeCaptureResource) -> list[str]:
    if not capture.connector_names():  # off, or declared wrong (the status sensor says why)
        return []
    return [spec.dlq_topic.name for spec in capture.specs()]


@dg.sensor(
    name="dlq_sensor",
    minimum_interval_seconds=DLQ_SENSOR_INTERVAL_S,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Reads the dead-letter topics (the events sink's, and change capture's with LAKEBUS_POSTGRES=on) from "
    "their stored positions, groups records by reason (field + rule), alerts once per new reason with counts and "
    "samples, and records every batch on the kafka/dlq_events asset.",
)
def dlq_sensor(context: dg.SensorEvaluationContext, kafka: KafkaResource, layout: BusLayoutResource, alerts: AlertResource,
               capture: ChangeCaptureResource, clock: ClockResource):
    state = json.loads(context.cursor) if context.cursor else {}
    events_topic = layout.layout().dlq_topic.name
    positions: dict[str, dict[str, int]] = {events_topic: state.get("offsets", {}), **state.get("topic_offsets", {})}
    known: dict[str, float] = dict(state.get("known_reasons", {}))
    pending: list[dict] = state.get("pending_alerts", [])
    total, now, asset_events, missing = int(state.get("total", 0)), clock.now(), [], []
    for topic in [events_topic, *_capture_dlq(capture)]:
        offsets = positions.setdefault(topic, {})
        letters = _read_dead_letters(kafka, topic, offsets)
        if letters is None:
            missing.append(topic)
            continue
        offsets.update({str(dl.partition): dl.offset + 1 for dl in letters})
        by_reason = group_by_reason(letters)
        # a reason alerts when it is new, or back after a quiet day; known ones are counted, not re-alerted
        label = (lambda r: r) if topic == events_topic else (lambda r, t=topic: f"{t}: {r}")
        new_reasons = sorted(r for r in by_reason if now - known.get(label(r), float("-inf")) >= DLQ_REASON_QUIET_S)
        known.update({label(r): now for r in by_reason})
        total += len(letters)
        if letters:
            alert, observation = _dlq_batch(letters, new_reasons, topic, total, offsets, replay=topic == events_topic)
            pending.extend([alert] if alert is not None else [])
            asset_events.append(observation)
    delivered, pending = deliver_pending(pending, alerts, context.log)
    asset_events.extend(alert_observations(delivered))
    cursor = json.dumps({"offsets": positions.pop(events_topic), "topic_offsets": positions, "known_reasons": known,
                         "pending_alerts": pending, "total": total})
    if not asset_events:
        absent = f"; not created yet: {', '.join(missing)}" if missing else ""
        return dg.SensorResult(skip_reason=dg.SkipReason(f"no new dead letters (seen {total}){absent}"), cursor=cursor)
    return dg.SensorResult(asset_events=asset_events, cursor=cursor)


def _read_dead_letters(kafka: KafkaResource, topic: str, offsets: dict[str, int]) -> list[DeadLetter] | None:
    """The DLQ records after the stored ``offsets`` (None: the topic does not exist yet). A partial
    read (the record cap, the deadline) is fine: the cursor resumes where it ended."""
    consumer = kafka.consumer("lakebus-dlq-sensor", **{"enable.partition.eof": True})
    try:
        try:
            ends = end_offsets(consumer, topic)
        except TopicMissing:
            return None
        starts = {p: offsets.get(str(p), OFFSET_BEGINNING) for p in ends if offsets.get(str(p), 0) < ends[p]}
        try:
            msgs, _ = consume_ranges(consumer, topic, starts, ends, deadline=time.monotonic() + 20,
                                     max_records=DLQ_MAX_RECORDS_PER_TICK)
        except KafkaException as exc:
            raise RuntimeError(f"reading DLQ topic {topic}: {exc.args[0]}") from exc
    finally:
        consumer.close()
    return [decode(m.partition(), m.offset(), m.headers(), m.value(), m.key()) for m in msgs]


def _dlq_batch(letters: list[DeadLetter], new_reasons: list[str], topic: str, total: int,
               offsets: dict[str, int], replay: bool = True) -> tuple[dict | None, dg.AssetObservation]:
    """One batch of dead letters as the alert naming its new reasons (None: no new reason) and the
    ``kafka/dlq_events`` observation counting every reason, with a few samples of each. ``replay``:
    the topic is the events DLQ, which ``replay_dlq`` replays; a change capture's dead letters are
    brought back by re-reading their rows once the cause is fixed."""
    by_reason = group_by_reason(letters)
    classes = {dl.reason: dl.error_class for dl in letters}
    samples = defaultdict(list)
    for dl in letters:
        if len(samples[dl.reason]) < DLQ_SAMPLES_PER_CLASS:
            samples[dl.reason].append(dl.sample())
    rows = [{"reason": r, "error class": classes[r], "records": n, "new": "yes" if r in new_reasons else ""}
            for r, n in by_reason.most_common()]
    alert = None
    if new_reasons:
        lines = [f"- {r['reason']}: {r['records']}{' (NEW reason)' if r['new'] else ''}" for r in rows]
        sample_lines = [f"  - {s}" for r in new_reasons for s in samples[r]]
        remedy = ("fix the producer, then launch replay_dlq with reason=<reason> to replay that class" if replay else
                  "fix the cause (the change table's column types, the sink), then launch resync_captured_table for "
                  "the rows (or resnapshot_captured_table) and cdc_current_state")
        alert = make_alert(
            "dlq", f"{len(letters)} new record(s) in {topic}; new reason: {'; '.join(new_reasons)}"[:900],
            "\n".join(lines + ["samples:", *sample_lines, remedy]), f"dlq:{topic}")
    observation = dg.AssetObservation(
        asset_key=DLQ_ASSET_KEY,
        metadata={
            "topic": topic,
            "new_records": len(letters),
            "total_records_seen": total,
            "by_reason": dg.MetadataValue.md(markdown_table(rows)),
            "new_reasons": dg.MetadataValue.json(new_reasons),
            "samples": dg.MetadataValue.md("\n".join(f"- {s}" for r in by_reason for s in samples[r])),
            "next_offsets": dg.MetadataValue.json(offsets),
        },
    )
    return alert, observation
