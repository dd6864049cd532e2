"""The ledger's incremental state: how far each bus partition has been verified, and what must be
carried across runs so that a run reads only what is new.

Kept as one JSON record per bus topic in a small compacted Kafka topic ``<bus>.ledger`` (see
:mod:`lakebus_dagster.ledger.store`) rather than in the Dagster instance: the state describes the
bus, lives and dies with it, survives a new Dagster instance (and ``execute_in_process``'s
ephemeral one), and is the same pattern as the DLQ replay's ``<dlq>.replayed`` topic.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from lakebus_dagster.ledger.model import DlqRecord, Position
from lakebus_dagster.ledger.verify import LedgerVerdict


@dataclass
class LedgerState:
    topic: str
    #: partition -> every offset below it is accounted for exactly once
    verified_to: dict[int, int] = field(default_factory=dict)
    #: partition -> the first offset the ledger covers, and why it starts there
    baseline: dict[int, int] = field(default_factory=dict)
    baseline_reason: str = ""
    #: DLQ partition -> next DLQ offset to read
    dlq_next: dict[int, int] = field(default_factory=dict)
    #: DLQ records already read whose original offset is not verified yet
    dlq_carried: list[DlqRecord] = field(default_factory=list)
    #: copy claims: origin position -> copy position (replays and re-queues)
    claims: dict[str, str] = field(default_factory=dict)
    #: ODS table -> commit time (ms) of the newest snapshot already judged for row deletions
    table_marks: dict[str, int] = field(default_factory=dict)
    #: the problem summary last alerted (one alert per distinct problem, not one per run)
    alerted: str = ""
    #: partition -> the highest verified point ever reached (a re-verification from the baseline
    #: does not lower it): a gap below it was in a place once and was removed since (a hand-made
    #: delete; the retention's deletes are retired, :mod:`lakebus_dagster.ledger.retired`), a gap at or
    #: past it never landed (see :mod:`lakebus_dagster.ledger.requeue`)
    ever_verified: dict[int, int] = field(default_factory=dict)

    def to_json(self) -> bytes:
        data = asdict(self)
        data["dlq_carried"] = [[str(d.at), str(d.original)] for d in self.dlq_carried]
        return json.dumps(data, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> LedgerState:
        data = json.loads(raw)
        ints = lambda m: {int(k): int(v) for k, v in m.items()}  # noqa: E731 - JSON keys are strings
        return cls(
            topic=data["topic"],
            verified_to=ints(data.get("verified_to", {})),
            baseline=ints(data.get("baseline", {})),
            baseline_reason=data.get("baseline_reason", ""),
            dlq_next=ints(data.get("dlq_next", {})),
            dlq_carried=[DlqRecord(Position.parse(a), Position.parse(o)) for a, o in data.get("dlq_carried", [])],
            claims=dict(data.get("claims", {})),
            table_marks={k: int(v) for k, v in data.get("table_marks", {}).items()},
            alerted=data.get("alerted", ""),
            # a state written before this field: its verified point is the best lower bound
            ever_verified=ints(data.get("ever_verified", data.get("verified_to", {}))),
        )


def advance(state: LedgerState, verdict: LedgerVerdict, dlq_seen: list[DlqRecord], dlq_next: dict[int, int],
            table_marks: dict[str, int]) -> LedgerState:
    """The state after ``verdict``: verified points moved, DLQ records of unverified offsets carried."""
    verified = {**state.verified_to, **{p: v.verified_to for p, v in verdict.partitions.items()}}
    carried = [
        d for d in dlq_seen
        if d.original.topic == state.topic and d.original.offset >= verified.get(d.original.partition, 0)
    ]
    return LedgerState(
        topic=state.topic,
        verified_to=verified,
        baseline=dict(state.baseline),
        baseline_reason=state.baseline_reason,
        dlq_next={**state.dlq_next, **dlq_next},
        dlq_carried=sorted(set(carried), key=lambda d: d.at),
        claims=dict(verdict.claims),
        table_marks={**state.table_marks, **table_marks},
        alerted=state.alerted,
        ever_verified={p: max(state.ever_verified.get(p, 0), v) for p, v in verified.items()},
    )


@dataclass(frozen=True)
class SnapshotInfo:
    """One Iceberg snapshot, reduced to what tells whether rows were removed."""

    timestamp_ms: int
    operation: str
    deleted_records: int


def rows_removed_since(snapshots: dict[str, list[SnapshotInfo]], marks: dict[str, int]) -> list[str]:
    """Tables with a snapshot newer than their mark that removed rows (``delete``/``overwrite``).

    Rows below the verified point were proven once; a later delete could remove one unseen by an
    incremental run, so such a snapshot makes the ledger re-verify from its baseline. Compaction
    (``replace``) rewrites files without changing rows and does not count. A table whose history no
    longer reaches back to its mark (every snapshot newer: the ones between expired while the ledger
    did not run) counts too: a delete may have expired with them.
    """
    found = []
    for table, snaps in sorted(snapshots.items()):
        mark = marks.get(table)
        if mark is None:
            continue
        if mark > 0 and snaps and min(s.timestamp_ms for s in snaps) > mark:
            found.append(f"{table}: its snapshots since {mark} expired before this run read them")
            continue
        for s in snaps:
            if s.timestamp_ms > mark and s.operation in ("delete", "overwrite") and s.deleted_records > 0:
                found.append(f"{table}: {s.operation} removed {s.deleted_records} row(s) at {s.timestamp_ms}")
    return found
