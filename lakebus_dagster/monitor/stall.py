"""A sink that is RUNNING but lands nothing: the stall watch.

Connect reports RUNNING for an Iceberg sink whose commits never happen — coordination stuck, an
idle task holding every commit until ``commit.timeout-ms`` (apache/iceberg#17811), a lost control
topic, a catalog that refuses the commit. Status alone cannot see it. What can: the sink's
committed offsets (the 1.11 sink commits them with each Iceberg commit) stop advancing while the
bus holds records past them. So a stall is *lag > 0 and no progress for ``stall_after_s``*; the
clock starts when lag appears or progress was last seen, never at the last snapshot — an idle bus
followed by a burst is not a stall.

Progress is kept as plain JSON (``{"committed": int, "lag": int, "since": float}``) in the status sensor's
cursor, so the watch survives daemon restarts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone


@dataclass(frozen=True)
class SinkProgress:
    """What one tick sees of a sink: records committed and records on the bus, per partition."""

    committed: Mapping[int, int]
    end: Mapping[int, int]
    #: newest Iceberg commit on any of the connector's tables (epoch ms), None if none yet
    last_commit_ms: int | None = None
    #: why ``last_commit_ms`` could not be read (e.g. the catalog is down), "" if it could
    last_commit_problem: str = ""

    @property
    def lag(self) -> int:
        return sum(max(0, end - self.committed.get(p, 0)) for p, end in self.end.items())

    @property
    def total_committed(self) -> int:
        return sum(self.committed.values())

    def last_commit_text(self) -> str:
        if self.last_commit_problem:
            return f"unknown ({self.last_commit_problem})"
        if self.last_commit_ms is None:
            return "no commit yet"
        return datetime.fromtimestamp(self.last_commit_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def stall_after_seconds(commit_interval_ms: int, commit_timeout_ms: int, intervals: int) -> float:
    """How long lag may persist without progress: ``intervals`` commit intervals, but never less
    than two commit timeouts (a commit may legitimately wait one timeout for an idle task)."""
    return max(intervals * commit_interval_ms / 1000, 2 * commit_timeout_ms / 1000)


def watch(state: dict | None, seen: SinkProgress, now: float, stall_after_s: float) -> tuple[dict, float | None]:
    """Fold one observation into ``state``; return ``(new state, seconds stalled or None)``."""
    committed, lag = seen.total_committed, seen.lag
    fresh = {"committed": committed, "lag": lag, "since": now}
    if state is None or lag == 0 or int(state.get("lag", 0)) == 0 or committed != int(state.get("committed", -1)):
        # no lag, lag that just appeared (the clock starts now), or progress: not stalled
        return fresh, None
    stalled_for = now - float(state["since"])
    return {**fresh, "since": float(state["since"])}, (stalled_for if stalled_for >= stall_after_s else None)
