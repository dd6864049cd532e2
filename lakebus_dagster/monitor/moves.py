"""Where the sink's tasks run, and the offset ledger once after every move.

Why: the 1.11/1.12 sink can lose records upstream whenever its tasks move (a worker killed, frozen
or rejoining, a restart, a rebalance), not only when the move ends in a stall. A second commit
coordinator elected beside the first can commit Connect's offsets past records whose data files the
other never committed, while its own commits keep the sink's watermark moving: nothing is owed past
the watermark, no stall rule fires, and only the offset ledger sees the loss (measured: 12,000 of
40,800 acked events in the protocol benchmark's two-kill smoke run, no incident). So after each
move, once the placement has held still for the settle window, the status sensor runs the ledger
once, and the re-queue follows when it finds losses — minutes, not the scheduled ledger's quarter
of an hour.

A placement is ``task@worker`` of every task while all of them are RUNNING; anything else (a task
not RUNNING, no task, the connector not listed) is :data:`UNSETTLED`. A *move* is a change away
from a settled placement, including through unsettled back to the same one (a task restarted on its
own worker elects a coordinator again). A connector's first placement is not a move, so provisioning
a sink runs no ledger. State is plain JSON in the status sensor's cursor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lakebus_dagster.connect import ConnectorOverview

UNSETTLED = "-"


@dataclass(frozen=True)
class Move:
    """A move whose ledger run is due: what the placement was before it and is now."""

    before: str
    after: str
    #: how long the new placement has held still
    settled_s: float


def placement(sink: ConnectorOverview | None) -> str:
    """``0@host:port,1@host:port`` while every task of ``sink`` runs; :data:`UNSETTLED` otherwise."""
    status = sink.status if sink is not None else None
    tasks: Sequence = status.tasks if status is not None else ()
    if status is None or status.state != "RUNNING" or not tasks or any(t.state != "RUNNING" for t in tasks):
        return UNSETTLED
    return ",".join(sorted(f"{t.id}@{t.worker_id}" for t in tasks))


def watch_placement(state: dict | None, seen: str, now: float, settle_s: float,
                    hold: bool = False) -> tuple[dict, Move | None]:
    """Fold one tick's placement into ``state``; return ``(new state, the move whose ledger is due)``.

    ``hold``: an incident of the connector is open — its own remedy (a stall's ledger) covers the
    move, so none is due while it lasts; the move stays recorded for after it, unless the caller
    clears it with :func:`ledger_ran`."""
    if state is None:
        return {"placement": seen, "since": now, "moved_from": None}, None
    moved_from = state.get("moved_from")
    since = float(state.get("since", now))
    if seen != state.get("placement"):
        since = now
        if moved_from is None and state.get("placement") != UNSETTLED:
            moved_from = state.get("placement")
    new = {"placement": seen, "since": since, "moved_from": moved_from}
    if moved_from is None or seen == UNSETTLED or hold or now - since < settle_s:
        return new, None
    return {**new, "moved_from": None}, Move(moved_from, seen, now - since)


def ledger_ran(state: dict | None) -> dict | None:
    """The move is accounted for (a stall's ledger run covered it): forget it."""
    return None if state is None else {**state, "moved_from": None}
