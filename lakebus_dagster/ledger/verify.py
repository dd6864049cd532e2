"""The offset ledger's rule: every bus offset is in exactly one place.

For each partition of the bus topic, every offset in the judged window ``[start, end)`` (``end`` =
the partition's high watermark) must be in exactly one of these places:

* **ods** — one ODS row whose provenance (``_kafka_topic/_partition/_offset``, stamped by
  ``KafkaMetadataTransform``) names it, in any ODS table;
* **dlq** — one DLQ record whose ``__connect.errors.topic/partition/offset`` headers name it;
* **requeued** — a later bus record carries ``lakebus.requeued.from = <topic>:<p>:<o>`` naming it
  (``remediate_poison_record`` re-queued it because the sink had consumed but never committed it);
* **tombstone** — its value is null, and nothing else claims it (a tombstone that a guard sent to
  the DLQ is in the DLQ, once);
* **retired** — in no other place, inside a range the ODS retention recorded before deleting those
  rows on purpose (:mod:`lakebus_dagster.ledger.retired`).

Zero places is a **gap** (loss) once the sink's committed offset has passed the offset, no answer
of the sink still in flight on its control topic covers it, and the record is older than the grace
period; before that it is **pending** (the sink commits Kafka offsets in the same transaction as
its answers, *before* a coordinator commits them to Iceberg and makes the rows visible: a second
normally, as long as the catalog refuses commits otherwise — :mod:`lakebus_dagster.ledger.answers`). Two or more places is a **duplicate**. An offset the broker never delivers
(transaction markers, compacted records) is not a record and needs no place.

**Copies: replays and re-queues.** The provenance of a row is always the offset of the record the
sink actually read. A copy is therefore a bus record of its own, at its own new offset, and needs
its own place like any other record — it is never a duplicate of its original, because the
original's row (if any) carries the original's offset, not the copy's. The original is counted
exactly once, in one place:

* a **replayed** DLQ record's original stays accounted for by that DLQ record (it *is* in the
  DLQ, with its reason); the copy (header ``lakebus.replay.of = <dlq>:<p>:<o>``) lands on its own;
* a **re-queued** original is accounted for by the copy's header (place ``requeued``); if the
  original *also* has a row or a DLQ record, it is in two places: a duplicate.

A position may be copied only once: two copies naming the same origin (a DLQ record replayed twice,
a record re-queued twice) are duplicate copies; both copy offsets are named. Claims are kept in the
ledger state, so a second copy is caught even when the first was verified long ago.

**Incremental.** ``start`` is the partition's verified point from the state: everything below it
was accounted for exactly once. The new verified point is the first offset of the window that is
not accounted for (gap, duplicate or pending), or ``end``. The verified point therefore never
passes an unresolved problem: a failing check keeps failing, naming the same offsets, until the
problem is fixed (e.g. a lost record re-produced with a ``lakebus.requeued.from`` header naming
it), and re-reads only from the first problem on.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from lakebus_dagster.ledger.model import BusRecord, DlqRecord, OdsRow, Position
from lakebus_dagster.ledger.ranges import describe
from lakebus_dagster.ledger.retired import RetiredOffsets


class Place(str, Enum):
    ODS = "ods"
    DLQ = "dlq"
    REQUEUED = "requeued"
    TOMBSTONE = "tombstone"
    RETIRED = "retired"


@dataclass(frozen=True)
class Window:
    """What to judge in one bus partition: ``[start, end)``, with the sink's committed offset and the
    offsets ``[first, end)`` the sink's answers in flight cover (:mod:`lakebus_dagster.ledger.answers`)."""

    partition: int
    start: int
    committed: int
    end: int
    in_flight: tuple[int, int] | None = None

    def answered_in_flight(self, offset: int) -> bool:
        return self.in_flight is not None and self.in_flight[0] <= offset < self.in_flight[1]


@dataclass(frozen=True)
class Duplicate:
    """An offset seen in more than one place (``places`` describes each), or a position copied twice."""

    partition: int
    offset: int
    places: tuple[str, ...]


@dataclass
class PartitionVerdict:
    window: Window
    verified_to: int
    gaps: list[int] = field(default_factory=list)
    duplicates: list[Duplicate] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    by_place: Counter[str] = field(default_factory=Counter)
    not_records: int = 0

    @property
    def complete(self) -> bool:
        """No gap, no duplicate, nothing pending: every offset up to the end is accounted for."""
        return not self.gaps and not self.duplicates and not self.pending and self.verified_to >= self.window.end


@dataclass
class LedgerVerdict:
    topic: str
    partitions: dict[int, PartitionVerdict]
    #: origin position (str) -> copy position (str), including the claims already known before
    claims: dict[str, str] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.gaps and not self.duplicates

    @property
    def complete(self) -> bool:
        return self.passed and all(v.complete for v in self.partitions.values())

    @property
    def gaps(self) -> dict[int, list[int]]:
        return {p: v.gaps for p, v in self.partitions.items() if v.gaps}

    @property
    def duplicates(self) -> list[Duplicate]:
        return [d for v in self.partitions.values() for d in v.duplicates]

    def problem_summary(self) -> str:
        """One line per partition with a problem: ``events[0]: lost 5, 7-9; duplicated 12``."""
        lines = []
        for p, v in sorted(self.partitions.items()):
            dup_offsets = [d.offset for d in v.duplicates]
            parts = ([f"lost {describe(v.gaps)}"] if v.gaps else []) + ([f"duplicated {describe(dup_offsets)}"] if dup_offsets else [])
            if parts:
                lines.append(f"{self.topic}[{p}]: " + "; ".join(parts))
        return "\n".join(lines)


def _places(topic: str, ods: Iterable[OdsRow], dlq: Iterable[DlqRecord]) -> dict[tuple[int, int], list[str]]:
    """(partition, offset) -> the places that name it: ODS rows and DLQ records."""
    places: dict[tuple[int, int], list[str]] = defaultdict(list)
    for row in ods:
        places[(row.partition, row.offset)].append(f"{Place.ODS.value}:{row.table}")
    for d in dlq:
        if d.original.topic == topic:
            places[(d.original.partition, d.original.offset)].append(f"{Place.DLQ.value}:{d.at}")
    return places


def _claim_copies(topic: str, records: dict[int, dict[int, BusRecord]], claims: dict[str, str]) -> dict[tuple[int, int], Duplicate]:
    """Record each copy's claim on its origin in ``claims``; return the copies of an origin already claimed."""
    duplicate_copies: dict[tuple[int, int], Duplicate] = {}
    for p in sorted(records):
        for r in (records[p][o] for o in sorted(records[p])):
            if r.origin is None:
                continue
            copy, origin = str(Position(topic, r.partition, r.offset)), str(r.origin)
            first = claims.setdefault(origin, copy)
            if first != copy:
                duplicate_copies[(r.partition, r.offset)] = Duplicate(r.partition, r.offset, (f"copy of {origin}", f"also copied as {first}"))
    return duplicate_copies


def _judge(w: Window, places: dict[tuple[int, int], list[str]], records: dict[int, BusRecord],
           duplicate_copies: dict[tuple[int, int], Duplicate], retired: RetiredOffsets | None, now_ms: int,
           grace_ms: int) -> PartitionVerdict:
    """One partition's window, offset by offset (the rules of the module docstring)."""
    p = w.partition
    verdict = PartitionVerdict(window=w, verified_to=w.end)
    first_open: int | None = None
    for o in range(w.start, w.end):
        seen = places.get((p, o), [])
        record = records.get(o)
        if (p, o) in duplicate_copies:
            verdict.duplicates.append(duplicate_copies[(p, o)])
        elif len(seen) == 1:
            verdict.by_place[seen[0].split(":", 1)[0]] += 1
            continue
        elif len(seen) > 1:
            verdict.duplicates.append(Duplicate(p, o, tuple(seen)))
        elif record is None:
            verdict.not_records += 1
            continue
        elif record.tombstone:
            verdict.by_place[Place.TOMBSTONE.value] += 1
            continue
        elif retired is not None and retired.contains(p, o):
            verdict.by_place[Place.RETIRED.value] += 1
            continue
        elif o >= w.committed or w.answered_in_flight(o) or now_ms - record.timestamp_ms < grace_ms:
            verdict.pending.append(o)
        else:
            verdict.gaps.append(o)
        if first_open is None:
            first_open = o
    if first_open is not None:
        verdict.verified_to = first_open
    return verdict


def verify(
    topic: str,
    windows: Iterable[Window],
    bus: Iterable[BusRecord],
    ods: Iterable[OdsRow],
    dlq: Iterable[DlqRecord],
    *,
    now_ms: int,
    grace_ms: int,
    known_claims: Mapping[str, str] | None = None,
    retired: RetiredOffsets | None = None,
) -> LedgerVerdict:
    """Judge every window (see the module docstring for the rules).

    ``bus`` holds the records of each window (``start`` up to ``end``); ``ods`` and ``dlq`` may hold
    more than the windows (rows outside a window are ignored). ``known_claims`` are the copy claims
    recorded by earlier runs (origin -> copy); ``retired`` the offsets the ODS retention deleted.
    """
    records: dict[int, dict[int, BusRecord]] = defaultdict(dict)
    for r in bus:
        records[r.partition][r.offset] = r
    places = _places(topic, ods, dlq)
    claims = dict(known_claims or {})
    duplicate_copies = _claim_copies(topic, records, claims)
    # every known re-queue claim forwards its origin (also a copy verified earlier, or in another partition)
    for origin, copy in claims.items():
        at = Position.parse(origin)
        if at.topic == topic:
            places[(at.partition, at.offset)].append(f"{Place.REQUEUED.value}:{copy}")
    verdicts = {w.partition: _judge(w, places, records[w.partition], duplicate_copies, retired, now_ms, grace_ms)
                for w in sorted(windows, key=lambda w: w.partition)}
    return LedgerVerdict(topic, verdicts, claims)
