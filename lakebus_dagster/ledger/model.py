"""What the ledger reads, as plain values: bus records, ODS provenance rows, DLQ records.

The readers (:mod:`lakebus_dagster.ledger.sources`) build these from Kafka and Iceberg; the pure
verification (:mod:`lakebus_dagster.ledger.verify`) only ever sees these types, so every rule is
unit-testable without a broker.
"""

from __future__ import annotations

from dataclasses import dataclass

#: header the ``replay_dlq`` job puts on a replayed record: ``<dlq topic>:<partition>:<offset>``
REPLAY_HEADER = "lakebus.replay.of"
#: header ``remediate_poison_record`` puts on a re-queued record: ``<bus topic>:<partition>:<offset>``
REQUEUE_HEADER = "lakebus.requeued.from"


@dataclass(frozen=True, order=True)
class Position:
    """One record's place in Kafka. Topic names cannot contain ``:``, so ``t:p:o`` is unambiguous."""

    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.topic}:{self.partition}:{self.offset}"

    @classmethod
    def parse(cls, text: str) -> Position:
        """``"events:0:42"`` -> Position; ValueError naming the text if it is not that shape."""
        topic, sep1, rest = text.rpartition(":")
        head, sep2, partition = topic.rpartition(":")
        if not (sep1 and sep2 and head):
            raise ValueError(f"not a <topic>:<partition>:<offset> position: {text!r}")
        try:
            return cls(head, int(partition), int(rest))
        except ValueError:
            raise ValueError(f"not a <topic>:<partition>:<offset> position: {text!r}") from None


@dataclass(frozen=True)
class BusRecord:
    """A record of the bus topic, reduced to what the ledger needs.

    ``replay_of`` names the DLQ record this one is a replay of; ``requeued_from`` names the bus
    record this one is a re-queued copy of (see :mod:`lakebus_dagster.ledger.verify`).
    """

    partition: int
    offset: int
    timestamp_ms: int
    tombstone: bool
    replay_of: Position | None = None
    requeued_from: Position | None = None

    @property
    def origin(self) -> Position | None:
        return self.replay_of or self.requeued_from


@dataclass(frozen=True)
class OdsRow:
    """One ODS row's provenance: the table it is in and the bus position it was written from."""

    table: str
    partition: int
    offset: int


@dataclass(frozen=True)
class DlqRecord:
    """A DLQ record: where it is (``at``) and the bus record it stands for (``original``), from
    its ``__connect.errors.topic/partition/offset`` headers."""

    at: Position
    original: Position
