"""The Iceberg sink's control events, decoded as far as lakebus reads them: their payload type, the
sink they belong to, when they were written and their commit cycle. The status sensor's stall rules
(:mod:`lakebus_dagster.monitor.stall`) and the two-coordinator finding
(:mod:`lakebus_dagster.monitor.coordinators`) read them."""

from __future__ import annotations

from dataclasses import dataclass

#: the 1.11 sink's control events (``org.apache.iceberg.connect.events.PayloadType`` ids) and which of
#: them belong to a commit cycle still under way: a StartCommit (the coordinator asked), a worker's
#: DataWritten / DataComplete (answered, not committed yet). CommitToTable and CommitComplete are the
#: coordinator's report of a cycle it *finished*.
EVENT_TYPES = {0: "StartCommit", 1: "DataWritten", 2: "DataComplete", 3: "CommitToTable", 4: "CommitComplete"}
CYCLE_EVENTS = frozenset({"StartCommit", "DataWritten", "DataComplete"})

#: ``org.apache.iceberg.avro.AvroEncoderUtil``'s magic bytes, before the writer's schema
_AVRO_MAGIC = b"\xc2\x01"


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """One Avro (zig-zag) int/long at ``pos``: (value, next position)."""
    shift = raw = 0
    while True:
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos


@dataclass(frozen=True)
class ControlEvent:
    """One control event of the Iceberg sink, as far as lakebus reads it."""

    kind: str
    #: the Connect consumer group of the sink that sent it (``connect-<connector>``)
    group: str
    #: when its sender wrote it (epoch ms; ``timestamp-micros`` on the wire)
    at_ms: int
    #: the commit cycle it belongs to (hex of the payload's ``commit_id``, the first field of every
    #: payload type; measured on 1.12.0); "" when the payload is shorter than a UUID
    commit_id: str


def decode_control(value: bytes | None) -> ControlEvent | None:
    """One control-topic record as the 1.11/1.12 sink writes it (``AvroEncoderUtil``: magic ``C2 01``,
    the writer schema as Java ``writeUTF`` — a 2-byte length and the JSON — then the Avro datum
    ``Event{id: fixed(16), type: int, timestamp: long (micros), group_id: string, payload}``); None
    if it is not such a record."""
    try:
        if not value or value[:2] != _AVRO_MAGIC:
            return None
        pos = 4 + int.from_bytes(value[2:4], "big") + 16  # past the schema and the event id
        kind, pos = _varint(value, pos)
        micros, pos = _varint(value, pos)
        size, pos = _varint(value, pos)
        if kind not in EVENT_TYPES or size < 0 or pos + size > len(value):
            return None
        group = value[pos:pos + size].decode("utf-8")
        commit_id = value[pos + size:pos + size + 16]
        return ControlEvent(EVENT_TYPES[kind], group, micros // 1000, commit_id.hex() if len(commit_id) == 16 else "")
    except (IndexError, UnicodeDecodeError):
        return None


@dataclass(frozen=True)
class Answered:
    """A task's ``DataComplete``: for each source partition it holds, the offset its answer to a commit
    cycle reaches (exclusive: the next offset the task will read), or None when it read nothing of that
    partition since its previous answer."""

    group: str
    #: ``(topic, partition, offset or None)`` per partition the task held
    assignments: tuple[tuple[str, int, int | None], ...]


class _Reader:
    """Avro binary values in order (the few types a ``DataComplete`` holds)."""

    def __init__(self, data: bytes, pos: int) -> None:
        self.data, self.pos = data, pos

    def long(self) -> int:
        value, self.pos = _varint(self.data, self.pos)
        return value

    def string(self) -> str:
        size = self.long()
        if size < 0 or self.pos + size > len(self.data):
            raise IndexError("string past the end")
        text = self.data[self.pos:self.pos + size].decode("utf-8")
        self.pos += size
        return text

    def skip(self, size: int) -> None:
        if self.pos + size > len(self.data):
            raise IndexError("fixed past the end")
        self.pos += size

    def optional_long(self) -> int | None:
        return None if self.long() == 0 else self.long()  # union ["null", "long"]: branch 0 is null


def decode_answered(value: bytes | None) -> Answered | None:
    """The source offsets of a ``DataComplete`` control event (payload ``{commit_id: fixed(16),
    assignments: ["null", array<{topic: string, partition: int, offset: ["null", long], timestamp:
    ["null", long]}>]}``, as 1.11/1.12 write it); None for any other event or a record not in that form.

    Why: a task sends its ``DataComplete`` in the same Kafka transaction as its data files and its
    consumer offsets. Until a coordinator commits that answer to Iceberg, the records it covers are in
    flight: consumed and acknowledged upstream, not in a table yet. The offset ledger must not call
    them lost (a catalog refusing commits keeps them in flight for as long as it refuses)."""
    event = decode_control(value)
    if event is None or event.kind != "DataComplete":
        return None
    try:
        reader = _Reader(value, 4 + int.from_bytes(value[2:4], "big") + 16)
        reader.long(), reader.long()  # type, timestamp
        reader.string()  # group id (decode_control has it)
        reader.skip(16)  # commit id
        out: list[tuple[str, int, int | None]] = []
        if reader.long() == 1:  # the assignments' union: branch 1 is the array
            while (count := reader.long()) != 0:
                if count < 0:  # a block with its byte size
                    count = -count
                    reader.long()
                for _ in range(count):
                    topic, partition, offset = reader.string(), reader.long(), reader.optional_long()
                    reader.optional_long()  # timestamp
                    out.append((topic, partition, offset))
        return Answered(event.group, tuple(out))
    except (IndexError, UnicodeDecodeError):
        return None
