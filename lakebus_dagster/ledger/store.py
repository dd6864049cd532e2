"""The ledger state's home: a compacted single-partition topic ``<bus topic>.ledger``, one record
per bus topic (key = the bus topic's name, value = :class:`LedgerState` as JSON) and one for the
offsets the ODS retention retired (key ``retired:<bus topic>``, :class:`RetiredOffsets`, written by
``lakehouse_maintenance`` only), read and written through the shared compacted-topic store
(:class:`lakebus_dagster.kafka.CompactedTopic`)."""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from lakebus_dagster.kafka.compacted import CompactedTopic
from lakebus_dagster.kafka.reading import ConsumerFactory, TopicMissing
from lakebus_dagster.ledger.retired import RetiredOffsets
from lakebus_dagster.ledger.state import LedgerState


#: bounds of one state read (metadata, offsets and records together) and of one acknowledged write
READ_TIMEOUT_S = 60.0
WRITE_TIMEOUT_S = 30.0


def state_topic_name(bus_topic: str) -> str:
    return f"{bus_topic}.ledger"


class KafkaStateStore:
    def __init__(self, make_consumer: ConsumerFactory, admin: AdminClient, producer: Producer, bus_topic: str) -> None:
        self._make_consumer, self._admin, self._producer = make_consumer, admin, producer
        self.bus_topic = bus_topic
        self.topic = state_topic_name(bus_topic)
        self._store = CompactedTopic(make_consumer, self.topic, group_id="lakebus-ledger-state", label="ledger state topic")

    @classmethod
    def reader(cls, make_consumer: ConsumerFactory, bus_topic: str) -> KafkaStateStore:
        """A store that only reads (``load``): what a health endpoint needs, with no admin or producer."""
        return cls(make_consumer, None, None, bus_topic)  # type: ignore[arg-type]

    def ensure_topic(self) -> None:
        """The topic is declared in the bus layout (``offset_ledger_topic``) and created by provisioning,
        like every other topic; a missing one is a clear error, never created here."""
        if self.topic not in self._admin.list_topics(timeout=10).topics:
            raise TopicMissing(f"topic {self.topic!r} (the offset ledger's state) does not exist: run provision_lakebus")

    @property
    def retired_key(self) -> bytes:
        return f"retired:{self.bus_topic}".encode()

    def _latest(self, *keys: bytes) -> dict[bytes, bytes]:
        """The newest value of each of ``keys`` (absent when none), from one read of the topic."""
        try:
            messages = self._store.records(READ_TIMEOUT_S)
        except TopicMissing:
            return {}
        latest: dict[bytes, bytes] = {}
        for msg in messages:
            if msg.key() in keys and msg.value() is not None:
                latest[msg.key()] = msg.value()
        return latest

    def load(self) -> LedgerState | None:
        """The latest state of this bus topic, or None before the first run."""
        return self.load_with_retired()[0]

    def load_retired(self) -> RetiredOffsets:
        """The offsets the retention retired (none recorded: empty)."""
        raw = self._latest(self.retired_key).get(self.retired_key)
        return RetiredOffsets.from_json(raw) if raw is not None else RetiredOffsets()

    def load_with_retired(self) -> tuple[LedgerState | None, RetiredOffsets]:
        """:meth:`load` and :meth:`load_retired` from one read of the topic."""
        latest = self._latest(self.bus_topic.encode(), self.retired_key)
        state, retired = latest.get(self.bus_topic.encode()), latest.get(self.retired_key)
        return (LedgerState.from_json(state) if state is not None else None,
                RetiredOffsets.from_json(retired) if retired is not None else RetiredOffsets())

    def save_retired(self, retired: RetiredOffsets) -> None:
        self.ensure_topic()
        self._store.put(self._producer, self.retired_key, retired.to_json(),
                        what=f"recording the retired offsets of {self.bus_topic}", timeout_s=WRITE_TIMEOUT_S)

    def save(self, state: LedgerState) -> None:
        """Write ``state``; raises unless the broker acknowledged it."""
        self.ensure_topic()
        self._store.put(self._producer, self.bus_topic.encode(), state.to_json(), what=f"saving the state of {self.bus_topic}",
                        timeout_s=WRITE_TIMEOUT_S)
