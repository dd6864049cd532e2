"""Answers in flight: bus offsets the sink's tasks have answered for on the control topic that no
commit coordinator has committed to Iceberg yet.

Why the ledger needs them: a task commits its consumer offsets in the same Kafka transaction as its
answer (``DataWritten`` + ``DataComplete``), before any coordinator commits the answer's files to a
table. Between the two the records are past the sink's committed offset and in no table: exactly what
a lost record looks like. Normally that lasts a second. While the catalog refuses commits (an outage,
a change of grants) it lasts as long as the refusal, and a task restart in between does not end it:
the next coordinator reads the answer again from its group's committed control offset and commits it
once the catalog accepts. A ledger that judged those records by their age alone called them lost, and
the re-queue that followed put copies on the bus, which landed beside the originals: duplicates.

So a record covered by an answer past the coordinators' committed control offset is *pending*, never
a gap, however old. An answer is judged again only once a coordinator has committed past it: then its
records are in a table, or they were really lost (a coordinator that skipped the answer).
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka.admin import AdminClient

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.kafka.reading import ConsumerFactory, read_range, watermarks
from lakebus_dagster.monitor.control_events import Answered, decode_answered
from lakebus_dagster.observe.sink_progress import coordinator_group, sink_group

#: how far before the coordinators' committed control offset to look for each partition's previous
#: answer (where a pending answer's records begin): a commit cycle writes ~5-10 control records, so
#: this reaches a few hundred cycles back; an answer with no earlier one in reach covers its partition
#: from offset 0 (pending for longer than needed, never a false gap)
LOOKBACK = 2_000


class ControlUnreadable(RuntimeError):
    """The control topic or the coordinators' committed offset could not be read: which records are in
    flight is unknown, so nothing may be judged lost. The message names the topic or the group."""


def in_flight(answers: Iterable[tuple[int, Answered]], committed: int | None, group: str, topic: str,
              ) -> dict[int, tuple[int, int]]:
    """``{bus partition: [first, end) offsets in flight}`` from ``(control offset, answer)`` pairs in
    control-offset order; ``committed`` is the coordinators' committed control offset (None: none yet,
    every answer is pending). A pending answer's records begin where the same partition's previous
    answer ended; with none in reach, at 0. Other sinks' answers (``group``) and other topics are left
    out; a partition the task read nothing of (offset None) is not covered by that answer."""
    previous_end: dict[int, int] = {}
    pending: dict[int, tuple[int, int]] = {}
    for offset, answered in answers:
        if answered.group != group:
            continue
        for answered_topic, partition, end in answered.assignments:
            if answered_topic != topic or end is None:
                continue
            if committed is None or offset >= committed:
                first, reach = pending.get(partition, (previous_end.get(partition, 0), end))
                pending[partition] = (first, max(reach, end))
            previous_end[partition] = end
    return pending


def read_in_flight(make_consumer: ConsumerFactory, admin: AdminClient, layout: BusLayout) -> dict[int, tuple[int, int]]:
    """:func:`in_flight` for ``layout``'s sink, read from Kafka as its coordinators read the control
    topic (``read_committed``: an aborted answer never counts). Raises :class:`ControlUnreadable`."""
    control, group = layout.control_topic.name, coordinator_group(layout.connector_name)
    try:
        listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
        committed = next((tp.offset for tp in listed.topic_partitions if tp.topic == control and tp.offset >= 0), None)
        probe = make_consumer("lakebus-ledger", **{"isolation.level": "read_committed"})
        try:
            low, high = watermarks(probe, control, 0)
        finally:
            probe.close()
        start = max(low, (low if committed is None else committed) - LOOKBACK)

        def read_committed(group_id: str, **overrides):
            return make_consumer(group_id, **{**overrides, "isolation.level": "read_committed"})

        records = read_range(read_committed, control, 0, start, high, timeout_s=30)
    except (KafkaException, TimeoutError) as exc:
        raise ControlUnreadable(f"the offset ledger could not read which records are in flight on {control} "
                                f"(coordinators' group {group}): {exc}") from exc
    answers = [(r.offset(), a) for r in records if (a := decode_answered(r.value())) is not None]
    return in_flight(answers, committed, sink_group(layout.connector_name), layout.bus_topic.name)
