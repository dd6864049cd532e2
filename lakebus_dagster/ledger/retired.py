"""Offsets retired on purpose: ODS rows the retention deleted.

``lakehouse_maintenance`` deletes ODS days past the retention. Those records were in a table and are
now in none, while the bus (7 days by default, the ODS 3) may still hold them: without a record of
the deletion the offset ledger would re-verify from its baseline (a delete snapshot forces that) and
call every one of them lost — an alert for a decision, and a gap that never closes.

So before it deletes, the maintenance run writes the provenance of the rows it is about to delete
as offset ranges per bus partition (computed in Spark, islands of consecutive offsets) under a key
of its own in the ledger's state topic; the ledger counts an offset in no other place but inside a
retired range as **retired**. A row still present wins (a delete that failed after the ranges were
written leaves rows that are simply in the ODS), so a retired range never makes a duplicate. Kept
apart from :class:`~lakebus_dagster.ledger.state.LedgerState` because a different job writes it: a
ledger run saving its state never overwrites what a maintenance run recorded meanwhile.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from lakebus_dagster.ledger.ranges import OffsetRange

#: how many maintenance runs' notes are kept (what retired which days, for the metadata)
KEEP_NOTES = 20


def merge_ranges(ranges: Iterable[OffsetRange]) -> list[OffsetRange]:
    """Sorted inclusive ranges with overlapping and adjacent ones joined."""
    out: list[list[int]] = []
    for first, last in sorted(ranges):
        if out and first <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], last)
        else:
            out.append([first, last])
    return [(a, b) for a, b in out]


@dataclass(frozen=True)
class RetiredOffsets:
    """Bus partition -> sorted, disjoint inclusive offset ranges whose rows were deleted on purpose."""

    ranges: dict[int, list[OffsetRange]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def merged(self, new: Mapping[int, Iterable[OffsetRange]], note: str) -> RetiredOffsets:
        partitions = set(self.ranges) | set(new)
        ranges = {p: merge_ranges([*self.ranges.get(p, []), *new.get(p, [])]) for p in sorted(partitions)}
        return RetiredOffsets({p: r for p, r in ranges.items() if r}, (*self.notes, note)[-KEEP_NOTES:])

    def contains(self, partition: int, offset: int) -> bool:
        ranges = self.ranges.get(partition)
        if not ranges:
            return False
        i = bisect.bisect_right(ranges, (offset, float("inf"))) - 1
        return i >= 0 and ranges[i][0] <= offset <= ranges[i][1]

    def count(self) -> int:
        return sum(b - a + 1 for r in self.ranges.values() for a, b in r)

    def to_json(self) -> bytes:
        return json.dumps({"ranges": {str(p): r for p, r in self.ranges.items()}, "notes": list(self.notes)}).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> RetiredOffsets:
        data = json.loads(raw)
        return cls({int(p): [(int(a), int(b)) for a, b in r] for p, r in data.get("ranges", {}).items()},
                   tuple(data.get("notes", [])))
