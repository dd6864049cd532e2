"""Re-queue what the ledger found lost: put a copy of each lost bus record back on the bus.

A **gap** (:mod:`lakebus_dagster.ledger.verify`) is a record in no place although the sink's
committed offset has passed it and the grace period is over: the sink will never read it again.
The Iceberg sink 1.11 produces exactly that when two commit coordinators run (apache/iceberg#17637):
their cycles drop data files while the tasks' offsets move on. The records are still on the bus, so
the repair is a copy of each, with :data:`~lakebus_dagster.ledger.model.REQUEUE_HEADER` naming the
original: the copy lands like any record, and the ledger counts the original as ``requeued`` — each
event once, in the table, the original's offset accounted for.

Only gaps the ledger had **never verified** are re-queued (offsets at or past the highest verified
point it ever reached, ``LedgerState.ever_verified``). A gap *below* it was in a place once and was
removed afterwards by a hand-made ``DELETE`` (the ODS retention records what it deletes as retired,
:mod:`lakebus_dagster.ledger.retired`): a decision, not a sink loss; re-sending it would undo the
decision, so it is reported and left (``include_removed`` overrides).

Idempotent by the ledger's own rule: a copy is a claim on its original, so a second run finds no
gap for it; a position copied twice would be named a duplicate copy by the next ledger run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import Message

from lakebus_dagster.kafka.reading import ConsumerFactory, read_range
from lakebus_dagster.kafka.writing import ProduceItem
from lakebus_dagster.ledger.model import REQUEUE_HEADER
from lakebus_dagster.ledger.ranges import compress, describe


@dataclass(frozen=True)
class RequeuePlan:
    """Which lost offsets to copy back onto the bus, and which to leave (each by partition)."""

    topic: str
    #: never verified, so never landed: copied back
    requeue: dict[int, list[int]] = field(default_factory=dict)
    #: verified once and removed from the table since: left alone unless ``include_removed``
    removed: dict[int, list[int]] = field(default_factory=dict)

    @property
    def requeue_count(self) -> int:
        return sum(len(o) for o in self.requeue.values())

    @property
    def removed_count(self) -> int:
        return sum(len(o) for o in self.removed.values())

    def describe(self, which: Mapping[int, list[int]]) -> str:
        """``events[0]: 5, 7-9; events[1]: 12`` (or ``-``)."""
        return "; ".join(f"{self.topic}[{p}]: {describe(o)}" for p, o in sorted(which.items()) if o) or "-"


def plan_requeue(topic: str, gaps: Mapping[int, Iterable[int]], ever_verified: Mapping[int, int], *,
                 include_removed: bool = False) -> RequeuePlan:
    """Split the ledger's gaps: offsets at or past ``ever_verified[p]`` (the highest verified point
    the ledger reached; 0 when it never verified the partition) never landed, those below it did once."""
    requeue: dict[int, list[int]] = {}
    removed: dict[int, list[int]] = {}
    for p, offsets in sorted(gaps.items()):
        mark = ever_verified.get(p, 0)
        for o in sorted(offsets):
            (requeue if include_removed or o >= mark else removed).setdefault(p, []).append(o)
    return RequeuePlan(topic, requeue, {} if include_removed else removed)


def requeue_items(msgs: Iterable[Message]) -> list[ProduceItem]:
    """Each record as a produce item back onto its own topic, its headers kept and
    :data:`REQUEUE_HEADER` added naming the original (so the offset ledger accounts for both). No
    partition and no timestamp: the key picks the partition as it did for the original, and the
    copy's own timestamp starts its grace period in the ledger."""
    return [
        (m.topic(), m.key(), m.value(), [*(m.headers() or []), (REQUEUE_HEADER, f"{m.topic()}:{m.partition()}:{m.offset()}".encode())])
        for m in msgs
    ]


def read_offsets(make_consumer: ConsumerFactory, topic: str, partition: int, offsets: Iterable[int],
                 timeout_s: float = 60.0) -> tuple[list[Message], list[int]]:
    """The records at exactly ``offsets`` of one partition (read range by range), and the offsets
    no longer readable (deleted by the topic's retention, or not records)."""
    wanted = set(offsets)
    found: list[Message] = []
    for first, last in compress(wanted):
        found += [m for m in read_range(make_consumer, topic, partition, first, last + 1, timeout_s) if m.offset() in wanted]
    got = {m.offset() for m in found}
    return found, sorted(wanted - got)
