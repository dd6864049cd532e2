"""Time-travel tags: the top of every hour of the last day and every midnight of the last week stay
reachable while the snapshots between them expire within the hour.

Why: the sink commits every commit interval (10 s as shipped), and a table's ``metadata.json`` lists
every snapshot it keeps; that file is rewritten on every commit and read on every ``loadTable``.
Kept for 6 h, the snapshots made it ~2.6 MiB and ~860 MiB of metadata writes per table-hour. lakebus
now expires snapshots within the hour and keeps the points a user travels to as Iceberg *tags*
(``SELECT … FROM t VERSION AS OF 'lakebus-hour-2026-11-28T09'``), each with a maximum reference age:
Iceberg's snapshot expiry drops a tag past its age, and its snapshot with it.

A tag names the table's state at its instant: the newest snapshot of the main branch's ancestry
committed at or before it, found only while that ancestry is unbroken from the current snapshot down
to it. An instant whose state is no longer known (its snapshots expired before a maintenance run
tagged them, e.g. while the daemon was down) is skipped, never tagged with a wrong snapshot.

Pure: plain data in, plain data out; the Spark calls are in :mod:`lakebus_dagster.lake.maintenance`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

HOUR_TAG_PREFIX = "lakebus-hour-"
DAY_TAG_PREFIX = "lakebus-day-"
#: how far back each kind of tag reaches (a tag lives this long after its instant, plus one hour)
HOURS_KEPT = 24
DAYS_KEPT = 7
_MARGIN = timedelta(hours=1)


@dataclass(frozen=True)
class SnapshotRef:
    """One snapshot as the table's ``snapshots`` metadata table lists it."""

    snapshot_id: int
    parent_id: int | None
    committed_ms: int


@dataclass(frozen=True)
class Tag:
    """A tag to create: ``name`` on ``snapshot_id``, kept ``retain_minutes`` from the snapshot's commit."""

    name: str
    snapshot_id: int
    retain_minutes: int


def ancestry(snapshots: Iterable[SnapshotRef], head_id: int | None) -> list[SnapshotRef]:
    """The main branch from its head back to the first expired (or absent) parent, newest first."""
    by_id = {s.snapshot_id: s for s in snapshots}
    chain: list[SnapshotRef] = []
    current = by_id.get(head_id) if head_id is not None else None
    while current is not None:
        chain.append(current)
        current = by_id.get(current.parent_id) if current.parent_id is not None else None
    return chain


def state_at(chain: Sequence[SnapshotRef], instant_ms: int) -> SnapshotRef | None:
    """The snapshot that was current at ``instant_ms``: the newest of the unbroken ``chain`` committed
    at or before it; None when the chain does not reach back that far (expired, or the table was younger)."""
    for snapshot in chain:
        if snapshot.committed_ms <= instant_ms:
            return snapshot
    return None


def instants(now: datetime, hours: int = HOURS_KEPT, days: int = DAYS_KEPT) -> list[tuple[str, datetime]]:
    """(tag name, instant) for the top of each of the last ``hours`` hours and each of the last ``days`` midnights."""
    now = now.astimezone(timezone.utc)
    top = now.replace(minute=0, second=0, microsecond=0)
    midnight = top.replace(hour=0)
    out = [(f"{HOUR_TAG_PREFIX}{(top - timedelta(hours=i)).strftime('%Y-%m-%dT%H')}", top - timedelta(hours=i)) for i in range(hours)]
    out += [(f"{DAY_TAG_PREFIX}{(midnight - timedelta(days=i)).strftime('%Y-%m-%d')}", midnight - timedelta(days=i))
            for i in range(days)]
    return out


def _kept_for(name: str) -> timedelta:
    return timedelta(days=DAYS_KEPT) if name.startswith(DAY_TAG_PREFIX) else timedelta(hours=HOURS_KEPT)


def tags_to_create(snapshots: Iterable[SnapshotRef], head_id: int | None, existing: Iterable[str], now: datetime) -> list[Tag]:
    """The hour and day tags the table lacks and whose state is still known, oldest instant first.

    Each is kept until its instant's reach ends (24 h for an hour, 7 days for a day, plus an hour),
    counted from its snapshot's commit as Iceberg counts a reference's age."""
    chain = ancestry(snapshots, head_id)
    have = set(existing)
    out = []
    for name, instant in sorted(instants(now), key=lambda item: item[1]):
        if name in have:
            continue
        snapshot = state_at(chain, int(instant.timestamp() * 1000))
        if snapshot is None:
            continue
        keep_until = instant + _kept_for(name) + _MARGIN
        minutes = math.ceil((keep_until.timestamp() * 1000 - snapshot.committed_ms) / 60_000)
        if minutes > 0:
            out.append(Tag(name, snapshot.snapshot_id, minutes))
    return out
