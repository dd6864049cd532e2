"""A compacted topic as a small key/value store: read every record once, append one record.

Three stores live in compacted topics: the declared connector target states, the offset ledger's
state (``<bus>.ledger``) and the DLQ replay ledger (``<dlq>.replayed``). They all need the same two
operations — "every record currently in the topic, in one bounded pass" and "append this key and
value, acknowledged or an error" — so they share this class instead of three read loops and three
delivery checks. Reads are group-neutral (``assign()`` at the low watermark, nothing committed)
and bounded by one deadline for metadata, offsets and records together, because a sensor calls
them on every tick and must never hang on an unreachable broker. Every error names the topic
(and partition where one is involved); a missing topic is :class:`TopicMissing`, which callers
read as "nothing stored yet" or as their own clear error.
"""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, KafkaException, Message, Producer, TopicPartition

from lakebus_dagster.kafka.reading import ConsumerFactory, TopicMissing

#: the read's consumer overrides: start where the retained log starts, end by offsets (not EOF events)
READ_OVERRIDES = {"auto.offset.reset": "earliest", "enable.partition.eof": False}


class CompactedTopicError(RuntimeError):
    """The topic could not be read or written in time; the message names the topic and the cause."""


class CompactedTopic:
    """One compacted topic. ``label`` names it in errors ("state topic", "ledger state topic"),
    ``servers`` (optional) says which Kafka could not be reached."""

    def __init__(self, make_consumer: ConsumerFactory, topic: str, *, group_id: str, label: str = "topic",
                 servers: str = "") -> None:
        self._make_consumer, self.topic, self.group_id = make_consumer, topic, group_id
        self.label, self.servers = label, servers

    def _where(self, partition: int | None = None) -> str:
        return f"{self.label} {self.topic!r}" + ("" if partition is None else f"[{partition}]")

    def _remaining(self, deadline: float, what: str, timeout_s: float) -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise CompactedTopicError(f"{self._where()}: {what} did not finish within {timeout_s:.0f}s (is Kafka reachable?)")
        return left

    def records(self, timeout_s: float) -> list[Message]:
        """Every record of every partition from its low to its high watermark (as seen at the start),
        in offset order per partition. Raises :class:`TopicMissing` when the topic does not exist and
        :class:`CompactedTopicError` when Kafka does not answer within ``timeout_s`` or reports an error."""
        deadline = time.monotonic() + timeout_s
        consumer = self._make_consumer(self.group_id, **READ_OVERRIDES)
        try:
            starts, ends = self._bounds(consumer, deadline, timeout_s)
            if not starts:
                return []
            consumer.assign(starts)
            out: list[Message] = []
            while ends:
                msg = consumer.poll(min(1.0, self._remaining(deadline, "read", timeout_s)))
                if msg is None:
                    continue
                if msg.error() is not None:
                    raise CompactedTopicError(f"{self._where()}: read failed: {msg.error()}")
                out.append(msg)
                if msg.offset() + 1 >= ends.get(msg.partition(), 0):
                    ends.pop(msg.partition(), None)
            return out
        finally:
            consumer.close()

    def _bounds(self, consumer, deadline: float, timeout_s: float) -> tuple[list[TopicPartition], dict[int, int]]:
        """(where to start each non-empty partition, where it ends)."""
        try:
            metadata = consumer.list_topics(self.topic, timeout=self._remaining(deadline, "metadata", timeout_s))
        except KafkaException as exc:
            at = f" at {self.servers}" if self.servers else ""
            raise CompactedTopicError(f"{self._where()}: cannot reach Kafka{at}: {exc.args[0]}") from exc
        info = metadata.topics.get(self.topic)
        if info is None or (info.error is not None and info.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            raise TopicMissing(f"topic {self.topic!r} does not exist")
        if info.error is not None:
            raise CompactedTopicError(f"{self._where()}: metadata error {info.error}")
        starts, ends = [], {}
        for partition in sorted(info.partitions):
            try:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(self.topic, partition), timeout=self._remaining(deadline, "end offsets", timeout_s)
                )
            except KafkaException as exc:
                raise CompactedTopicError(f"{self._where(partition)}: end offsets unavailable: {exc.args[0]}") from exc
            if high > low:
                ends[partition] = high
                starts.append(TopicPartition(self.topic, partition, low))
        return starts, ends

    def put(self, producer: Producer, key: bytes, value: bytes | None, *, what: str, timeout_s: float) -> None:
        """Append one record and wait for the broker's acknowledgement. ``what`` says what the record
        is in the error ("declaring connector 'x' PAUSED"). A record not acknowledged in time is
        purged from the producer, so it cannot land after the caller was told it failed."""
        failures: list[str] = []

        def on_delivery(err, _msg) -> None:
            if err is not None:
                failures.append(str(err))

        producer.produce(self.topic, key=key, value=value, on_delivery=on_delivery)
        pending = producer.flush(timeout_s)
        if pending:
            producer.purge()
            producer.flush(0)
            at = f" at {self.servers}" if self.servers else ""
            raise CompactedTopicError(
                f"{self._where()}: {what} was not acknowledged within {timeout_s:.0f}s (is Kafka reachable{at}?)"
            )
        if failures:
            raise CompactedTopicError(f"{self._where()}: {what} failed: {failures[0]}")
