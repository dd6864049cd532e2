"""Two commit coordinators at once, read from the control topic.

The Iceberg sink (1.11, and 1.12's unchanged election) starts a coordinator in the task whose
``open()`` adds the group's smallest partition, and stops it only in a ``close()`` that can tell it
lost that partition. When a worker rejoins, Connect moves a task to it: for a few seconds the other
task holds every partition, is elected and starts a coordinator; when the moved task opens partition
0 it starts one too, and the first is not stopped (apache/iceberg#17637: its ``close()`` during the
rebalance finds no partition assigned anywhere and keeps it). Measured on the cluster profile
(BENCHMARKS.md, issue 29): after a killed worker came back, both coordinators ran until the next
fault, every commit cycle of one waited out the 30 s commit timeout for answers the other took, so
the next failover's first rows came at ~45 s whatever the election's speed; two coordinators also
once let the sink's offsets pass 12,000 records that never landed.

A single coordinator runs its cycles one after another: ``StartCommit`` of cycle *n*, the workers'
answers, ``CommitComplete`` of *n*, then ``StartCommit`` of *n+1*. Two *finished* cycles whose spans
overlap on the topic can only come from two coordinators — a cycle abandoned by a coordinator that
died never completes, so a failover alone never makes such a pair.
"""

from __future__ import annotations

from collections.abc import Sequence

from lakebus_dagster.monitor.control_events import ControlEvent

#: how many of the control topic's latest offsets are read for overlapping cycles (one cycle of a
#: two-task sink writing one table is ~12 offsets with the transaction markers: ~30 cycles)
RECENT_CONTROL_OFFSETS = 400


def overlapping_cycles(events: Sequence[ControlEvent]) -> tuple[tuple[int, int], ...]:
    """Every pair of finished commit cycles among ``events`` (oldest first, one sink's) that ran at
    the same time: ``(start ms of the earlier, start ms of the later)``."""
    starts: dict[str, tuple[int, int]] = {}  # commit id -> (position, start ms)
    completes: dict[str, int] = {}
    for i, event in enumerate(events):
        if not event.commit_id:
            continue
        if event.kind == "StartCommit":
            starts.setdefault(event.commit_id, (i, event.at_ms))
        elif event.kind == "CommitComplete":
            completes.setdefault(event.commit_id, i)
    finished = sorted((starts[c][0], end, starts[c][1]) for c, end in completes.items() if c in starts and end > starts[c][0])
    return tuple((a_ms, b_ms) for a_start, a_end, a_ms in finished for b_start, _, b_ms in finished if a_start < b_start < a_end)
