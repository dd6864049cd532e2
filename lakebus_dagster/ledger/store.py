"""The ledger state's home: a compacted single-partition topic ``<bus topic>.ledger``, one record
per bus topic (key = the bus topic's name, value = :class:`LedgerState` as JSON)."""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from lakebus_dagster.kafka.reading import ConsumerFactory, TopicMissing, partitions_of, read_range, watermarks
from lakebus_dagster.ledger.state import LedgerState


def state_topic_name(bus_topic: str) -> str:
    return f"{bus_topic}.ledger"


class KafkaStateStore:
    def __init__(self, make_consumer: ConsumerFactory, admin: AdminClient, producer: Producer, bus_topic: str) -> None:
        self._make_consumer, self._admin, self._producer = make_consumer, admin, producer
        self.bus_topic = bus_topic
        self.topic = state_topic_name(bus_topic)

    def ensure_topic(self) -> None:
        """The topic is declared in the bus layout (``offset_ledger_topic``) and created by provisioning,
        like every other topic; a missing one is a clear error, never created here."""
        if self.topic not in self._admin.list_topics(timeout=10).topics:
            raise TopicMissing(f"topic {self.topic!r} (the offset ledger's state) does not exist: run provision_lakebus")

    def load(self) -> LedgerState | None:
        """The latest state of this bus topic, or None before the first run."""
        consumer = self._make_consumer("lakebus-ledger-state")
        try:
            try:
                partitions_of(consumer, self.topic)
                low, high = watermarks(consumer, self.topic, 0)
            except TopicMissing:
                return None
        finally:
            consumer.close()
        latest = None
        for msg in read_range(self._make_consumer, self.topic, 0, low, high):
            if msg.key() == self.bus_topic.encode() and msg.value() is not None:
                latest = msg.value()
        return LedgerState.from_json(latest) if latest is not None else None

    def save(self, state: LedgerState) -> None:
        """Write ``state``; raises unless the broker acknowledged it."""
        self.ensure_topic()
        errors: list[str] = []
        self._producer.produce(self.topic, key=self.bus_topic.encode(), value=state.to_json(),
                               on_delivery=lambda err, _msg: errors.append(str(err)) if err else None)
        remaining = self._producer.flush(30)
        if errors or remaining:
            raise RuntimeError(f"saving the ledger state to {self.topic}: {errors or f'{remaining} undelivered'}")
