"""A sink that is declared RUNNING and commits nothing for minutes, whatever its tasks do.

Why a third rule: the two stall rules (:mod:`lakebus_dagster.monitor.stall`) judge a sink only while
every task is RUNNING, and restart their clocks whenever the tasks move — right for a failover, which
settles within a minute. A sink whose tasks never settle (a rebalance storm: measured with the
``eager`` protocol, ~20 generations a minute, no coordinator, 0 rows for 7 minutes), or that
committed nothing since it was created (no table, so no watermark: "unknown" to the other rules),
was silent. This rule keeps one clock per sink that neither a move nor a task state resets: records
owed (past the watermark, or not yet consumed when the watermark is unknown) and no new
Iceberg commit for ``after_s`` is an incident. Its bound is a few stall windows, so a failover or a
restart, which the other rules judge, never reaches it.

State is plain JSON in the status sensor's cursor.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakebus_dagster.monitor.stall import SinkProgress

#: how many stall windows a sink may commit nothing while records wait, whatever its tasks do
STARVED_STALL_WINDOWS = 3


@dataclass(frozen=True)
class Starved:
    seconds: float
    #: records waiting: past the watermark, else (no watermark) not consumed yet
    waiting: int


def waiting(seen: SinkProgress) -> int:
    """Records the sink owes: past its watermark when that is known, else those not consumed yet (a
    sink that never committed, or whose newest commit carries no watermark). Not every record on the
    bus: a bus whose records all went to the DLQ has no table and owes nothing."""
    return seen.uncommitted if seen.uncommitted is not None else seen.lag


def watch_starved(state: dict | None, seen: SinkProgress, now: float, after_s: float) -> tuple[dict | None, Starved | None]:
    """Fold one observation in; return ``(new state or None, the starved sink or None)``. The clock
    starts when records are first seen waiting, and restarts when a new Iceberg commit lands; an
    unreadable catalog changes nothing (the commit time is unknown, not absent)."""
    if seen.last_commit_problem:
        return state, None
    owed = waiting(seen)
    if owed == 0:
        return None, None
    if state is None or state.get("last_commit_ms") != seen.last_commit_ms:
        return {"since": now, "last_commit_ms": seen.last_commit_ms}, None
    starved_for = now - float(state["since"])
    return state, (Starved(starved_for, owed) if starved_for >= after_s else None)
