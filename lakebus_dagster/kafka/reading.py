"""Reading Kafka without touching any consumer group: watermarks and offset ranges.

Monitoring, remediation, DLQ replay, the DLQ sensor and the offset ledger all need the same two
things — "where does each partition end?" and "give me records [start, end) of these partitions"
(:func:`consume_ranges`, :func:`read_range` for one partition) — and none of them
may move a consumer group's committed offsets (the sink's group belongs to Connect). So every
read here uses ``assign()`` with explicit offsets and ``enable.auto.commit`` off (the
``KafkaResource`` default), and every wait is bounded.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from tenacity import retry, retry_if_exception, stop_after_delay, wait_exponential

#: librdkafka reports "no more records for now" as this pseudo-error when enable.partition.eof is on
PARTITION_EOF = KafkaError._PARTITION_EOF

#: what a broker answers for a few seconds after a partition's leader moved or a broker restarted
#: ("Leader epoch is newer than broker epoch" was seen from a just-restarted broker in the failover
#: benchmark); librdkafka does not mark these retriable when they end an offsets request
TRANSIENT_CODES = frozenset({KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.FENCED_LEADER_EPOCH,
                             KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE})
#: how long an offsets read keeps retrying such an answer before it raises it
TRANSIENT_RETRY_S = 15.0


def is_transient(exc: BaseException) -> bool:
    """A Kafka error worth one more try shortly: one of :data:`TRANSIENT_CODES`, which come back at
    once. Not a timeout or a broker that does not answer: each try already waits its whole timeout,
    and a sensor tick reading several offsets must not wait several of them."""
    if not isinstance(exc, KafkaException) or not exc.args or not isinstance(exc.args[0], KafkaError):
        return False
    return exc.args[0].code() in TRANSIENT_CODES


#: retries a read on a transient Kafka error for up to :data:`TRANSIENT_RETRY_S`, then raises it
retry_transient = retry(retry=retry_if_exception(is_transient), stop=stop_after_delay(TRANSIENT_RETRY_S),
                        wait=wait_exponential(multiplier=0.25, max=2.0), reraise=True)

ConsumerFactory = Callable[..., Consumer]


class TopicMissing(LookupError):
    """The topic does not exist (or its metadata carries an error); the message names it."""


def partitions_of(consumer: Consumer, topic: str, timeout_s: float = 10.0) -> list[int]:
    """The topic's partition ids; :class:`TopicMissing` if it does not exist."""
    md = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if md is None or md.error is not None:
        raise TopicMissing(f"topic {topic!r} does not exist" + (f" ({md.error})" if md is not None and md.error else ""))
    return sorted(md.partitions)


@retry_transient
def end_offsets(consumer: Consumer, topic: str, timeout_s: float = 10.0) -> dict[int, int]:
    """``{partition: high watermark}`` (the offset the next record will get) of every partition."""
    return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)[1] for p in partitions_of(consumer, topic, timeout_s)}


@retry_transient
def watermarks(consumer: Consumer, topic: str, partition: int, timeout_s: float = 10.0) -> tuple[int, int]:
    """``(low, high)`` of one partition: the first retained offset and the next offset to be written."""
    return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s)


@retry_transient
def offsets_for_times(consumer: Consumer, partitions: list[TopicPartition], timeout_s: float = 10.0) -> list[TopicPartition]:
    """The first offset at or after each partition's timestamp (``TopicPartition.offset`` holds the
    time in ms); offset -1 where none is."""
    return consumer.offsets_for_times(partitions, timeout=timeout_s)


def consume_ranges(consumer: Consumer, topic: str, starts: dict[int, int], ends: dict[int, int], *, deadline: float,
                   max_records: int | None = None) -> tuple[list[Message], set[int]]:
    """Records of ``topic`` from ``starts[p]`` up to ``ends[p]`` (exclusive) for every partition in
    ``starts``, on an already created consumer (``enable.partition.eof`` on, so an emptied tail ends a
    partition too). Stops when every partition is done, once ``max_records`` were read (checked
    between batches) or at ``deadline`` (``time.monotonic()``); returns the records and the partitions
    not finished — the caller decides whether a partial read is an error. Raises ``KafkaException``
    on any Kafka error other than the end of a partition.
    """
    todo = set(starts)
    out: list[Message] = []
    if not todo:
        return out, todo
    consumer.assign([TopicPartition(topic, p, starts[p]) for p in sorted(todo)])
    while todo and (max_records is None or len(out) < max_records) and time.monotonic() < deadline:
        for msg in consumer.consume(num_messages=500, timeout=1.0):
            if msg.error():
                if msg.error().code() == PARTITION_EOF:
                    todo.discard(msg.partition())
                    continue
                raise KafkaException(msg.error())
            partition = msg.partition()
            if partition not in todo or msg.offset() >= ends[partition]:
                todo.discard(partition)
                continue
            out.append(msg)
            if msg.offset() + 1 >= ends[partition]:
                todo.discard(partition)
    return out, todo


def read_range(make_consumer: ConsumerFactory, topic: str, partition: int, start: int, end_exclusive: int,
               timeout_s: float = 60.0) -> list[Message]:
    """Records ``[start, end_exclusive)`` of one partition (fewer if the log ends first).

    ``make_consumer(group_id, **overrides)`` builds the consumer (``KafkaResource.consumer``); the
    group id is only a label here, nothing is committed. Raises on a Kafka error or when the range
    cannot be read within ``timeout_s``.
    """
    if end_exclusive <= start:
        return []
    consumer = make_consumer("lakebus-reader", **{"enable.partition.eof": True})
    try:
        out, unfinished = consume_ranges(consumer, topic, {partition: start}, {partition: end_exclusive},
                                         deadline=time.monotonic() + timeout_s)
    finally:
        consumer.close()
    if unfinished:
        raise TimeoutError(f"reading {topic}[{partition}] {start}..{end_exclusive - 1}: not done after {timeout_s:.0f}s")
    return out
