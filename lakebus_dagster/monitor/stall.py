"""A sink that is RUNNING but lands nothing: the stall watch.

Connect reports RUNNING for an Iceberg sink whose commits never happen — the catalog refuses them
(changed grants), coordination is stuck, a control topic was lost, an idle task holds every commit
until ``commit.timeout-ms`` (apache/iceberg#17811). Status alone cannot see it, and neither can the
sink's Connect offsets: the 1.11 sink's workers commit their consumer offsets when they hand their
data files to the coordinator (measured: with every Iceberg commit refused, Connect's offsets still
reach the end of the bus). What stops is the *coordinator*: it commits its control-topic offsets
(group ``connect-<connector>-coord``) only after an Iceberg commit succeeds, and it does so every
commit cycle, even an idle one (measured: it advances every cycle with no traffic).

So a stall is *the coordinator's committed control offset has not moved for ``stall_after_s`` while
coordination is pending* (control events past it; or, before its first commit, bus records not yet
consumed). The clock starts when pending work appears or the coordinator last moved, never at the
last snapshot — an idle bus followed by a burst is not a stall. The records not yet in Iceberg are
those stamped after the sink's own watermark (``kafka.connect.valid-through-ts`` in its snapshots).

State is plain JSON in the status sensor's cursor, so the watch survives daemon restarts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

from lakebus_dagster.monitor.control_events import CYCLE_EVENTS


@dataclass(frozen=True)
class SinkProgress:
    """What one tick sees of a sink."""

    #: partition -> next offset the sink's workers will consume (Connect's offsets)
    consumed: Mapping[int, int]
    #: partition -> the bus topic's end offset
    end: Mapping[int, int]
    #: the coordinator's committed offset on the control topic; None before its first commit
    coordinator: int | None = None
    #: the control topic's end offset
    control_end: int = 0
    #: newest Iceberg commit on any of the connector's tables (epoch ms), None if none yet
    last_commit_ms: int | None = None
    #: why ``last_commit_ms`` could not be read (e.g. the catalog is down), "" if it could
    last_commit_problem: str = ""
    #: bus records stamped after the sink's valid-through watermark (not in the tables yet); None: unknown
    uncommitted: int | None = None
    #: the connector's control events past the coordinator's committed offset (all of them before its
    #: first commit), by payload type, oldest first (transaction markers are not events); None: unread
    control_events: tuple[str, ...] | None = None
    #: finished commit cycles that ran at the same time among the control topic's latest events
    #: (:func:`lakebus_dagster.monitor.coordinators.overlapping_cycles`: two coordinators), as the
    #: start times (epoch ms) of each pair; None: unread
    overlapping_cycles: tuple[tuple[int, int], ...] | None = None
    #: the membership of the sink tasks' consumer group and of its coordinators' group, as digests
    #: (:func:`lakebus_dagster.observe.sink_progress.group_memberships`), and the live brokers: they change
    #: when a coordinator dies (its control session ends), starts, or is elected (the tasks' group
    #: settles), and when a broker leaves or joins (its groups move); None: unread
    sink_members: str | None = None
    #: members of the coordinators' group (``connect-<connector>-coord``): 1 while one coordinator
    #: runs, 2 or more while two do (only one holds the control partition: the other's cycles never
    #: finish, so no overlap shows on the control topic), 2 for a moment after a failover (until the
    #: dead one's control session ends); None: unread
    coordinator_members: int | None = None

    @property
    def cycle_under_way(self) -> bool | None:
        """A commit cycle started and not finished: a StartCommit, DataWritten or DataComplete past the
        coordinator's committed offset. What a *finished* cycle leaves there (measured on the 1.11
        sink: the marker of the last worker transaction, then per committed table a CommitToTable and
        its marker, then CommitComplete and its marker — 5 offsets for one table, 7 for two, consumed
        only by the next cycle, which a lost coordinator never runs) is not. None: not read."""
        if self.control_events is None:
            return None
        return any(kind in CYCLE_EVENTS for kind in self.control_events)

    @property
    def lag(self) -> int:
        """Bus records the sink's workers have not consumed yet."""
        return sum(max(0, end - self.consumed.get(p, 0)) for p, end in self.end.items())

    @property
    def total_consumed(self) -> int:
        return sum(self.consumed.values())

    @property
    def total_end(self) -> int:
        return sum(self.end.values())

    @property
    def pending(self) -> int:
        """Coordination not yet committed: control events past the coordinator (before its first
        commit, every control event; before the first commit cycle, bus records not consumed yet)."""
        if self.coordinator is None:
            return self.control_end or self.lag
        return max(0, self.control_end - self.coordinator)

    def coordinators_text(self) -> str:
        """How many commit coordinators the control topic shows (two when finished cycles overlap)."""
        members = ("" if self.coordinator_members is None
                   else f"; {self.coordinator_members} member(s) in the coordinators' consumer group")
        if self.overlapping_cycles is None:
            return "unknown (control topic not read)" + members
        if not self.overlapping_cycles:
            return ("two or more" if (self.coordinator_members or 0) > 1 else "one") + " (no overlapping commit cycles" + members + ")"
        return f"two: {len(self.overlapping_cycles)} pair(s) of overlapping commit cycles among the latest control events" + members

    def last_commit_text(self) -> str:
        if self.last_commit_problem:
            return f"unknown ({self.last_commit_problem})"
        if self.last_commit_ms is None:
            return "no commit yet"
        return datetime.fromtimestamp(self.last_commit_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass(frozen=True)
class Stall:
    seconds: float
    #: bus records not in Iceberg yet (stamped after the sink's watermark); None: unknown
    uncommitted: int | None


def stall_after_seconds(commit_interval_ms: int, commit_timeout_ms: int, intervals: int) -> float:
    """How long the coordinator may stand still with work pending: ``intervals`` commit intervals,
    but never less than two commit timeouts (a commit may legitimately wait one timeout)."""
    return max(intervals * commit_interval_ms / 1000, 2 * commit_timeout_ms / 1000)


def watch(state: dict | None, seen: SinkProgress, now: float, stall_after_s: float,
          assignment: str = "") -> tuple[dict, Stall | None]:
    """Fold one observation into ``state``; return ``(new state, the stall or None)``.

    ``assignment`` names which worker runs which task and the tasks' consumer group membership
    (``SinkProgress.sink_members``): when it changes (a worker left or joined, the tasks were
    rebalanced, the group's assignment settled and elected a coordinator), the commit coordinator
    started over on its new worker and its first cycle starts then — the clock restarts (seen on the cluster profile: a coordinator killed with
    its worker commits again ~60-90 s later under load; that is a failover, not a stall).
    """
    marker = seen.coordinator
    moved = state is None or state.get("coordinator") != marker
    idle = seen.pending == 0 or not state or int(state.get("pending", 0)) == 0
    rebalanced = state is not None and state.get("assignment", "") != assignment
    if moved or idle or rebalanced:
        # the coordinator committed, nothing is pending, pending work just appeared, or the tasks
        # moved: the clock restarts
        return {"coordinator": marker, "pending": seen.pending, "since": now, "assignment": assignment}, None
    stalled_for = now - float(state["since"])
    kept = {**state, "pending": seen.pending}
    if stalled_for < stall_after_s:
        return kept, None
    return kept, Stall(stalled_for, seen.uncommitted)


# -- the second rule: work owed with no Iceberg commit, whatever the control topic shows ------------
#
# The rule above keys on the coordinator's control offset *while coordination is pending*. The 1.11
# sink can also lose its coordinator altogether after a rebalance (apache/iceberg#12372, #14395,
# #15955, #16016, #17637): every task stays RUNNING and consumes, nobody sends a StartCommit, so
# nothing moves on the control topic, nothing is pending there, and the rule above sees an idle
# sink. The tables see it: records stamped after the sink's own watermark (``SinkProgress.uncommitted``)
# are work owed, and a healthy sink pays it within a commit interval or two.


@dataclass(frozen=True)
class Uncommitted:
    """Work owed past the watermark and no Iceberg commit for ``seconds``."""

    seconds: float
    uncommitted: int
    #: True: the coordinator(s) kept finishing commit cycles (its committed control offset moved) and
    #: none of them committed to Iceberg — duplicate coordinators; False: no cycle under way at all
    cycles_without_commits: bool = False


def uncommitted_after_seconds(commit_interval_ms: int, intervals: int) -> float:
    """How long records may wait past the sink's watermark with no new Iceberg commit and no commit
    cycle under way: ``intervals`` commit intervals. Unlike :func:`stall_after_seconds` there is no
    commit-timeout floor: with no cycle under way on the control topic
    (:attr:`SinkProgress.cycle_under_way`) nothing can legitimately be waiting for a slow worker."""
    return intervals * commit_interval_ms / 1000


def settled_after_seconds(commit_interval_ms: int, commit_timeout_ms: int) -> float:
    """How old a record below the sink's committed Kafka offset must be before its absence from the
    tables means lost, once commits flow again (the offset ledger's grace after a stall).

    The sink commits a record's Kafka offset with its DataWritten event, a commit cycle before the
    Iceberg commit makes the row visible; a healthy coordinator closes that cycle within one commit
    interval plus one commit timeout. Twice that is the margin: a copy sent too early would land
    beside its original (a duplicate), too late keeps a lost record out of the lake for longer. The
    scheduled ledger keeps its 300 s (it may run in the middle of a stall)."""
    return 2 * (commit_interval_ms + commit_timeout_ms) / 1000


def _clocks(prev: dict, seen: SinkProgress, now: float, assignment: str) -> tuple[float, float, int | None]:
    """``(since, busy_since, coordinator offset at busy_since)``.

    ``since`` runs from the later of the newest Iceberg commit (its own timestamp: when the sink last
    paid what it owed) and the tick that first saw work owed (a burst after an idle hour gets its full
    window, not "an hour without a commit"). ``busy_since`` is the same clock restarted when the tasks
    move (a failover's new coordinator starts over), for the duplicate-coordinator finding."""
    commit_s = None if seen.last_commit_ms is None else min(now, seen.last_commit_ms / 1000)
    if prev.get("since") is None:
        since = now  # work owed just appeared (or the watch just started): it gets a full window
    elif prev.get("commit") != seen.last_commit_ms and commit_s is not None:
        since = max(float(prev["since"]), commit_s)  # a commit landed: the clock restarts at it
    else:
        since = float(prev["since"])
    if prev.get("since") != since or prev.get("busy_since") is None:
        return since, since, seen.coordinator
    if prev.get("assignment", "") != assignment:
        return since, now, seen.coordinator
    return since, float(prev["busy_since"]), prev.get("busy_coordinator")


def watch_uncommitted(state: dict | None, seen: SinkProgress, now: float, after_s: float,
                      busy_after_s: float | None = None, assignment: str = "") -> tuple[dict | None, Uncommitted | None]:
    """Fold one observation into ``state``; return ``(new state, the finding or None)``.

    Two findings, both "work owed and no Iceberg commit", told apart by the control topic:

    - **no coordinator**: no commit cycle under way (``seen.cycle_under_way`` is False: past the
      coordinator's committed offset only what a finished cycle leaves, whatever its length) for
      ``after_s`` since the clock or the task assignment last changed (a failover's new coordinator
      is elected ~25 s after the kill and needs its first interval: seen on the cluster profile, a
      window counted from the last commit before the kill restarted a sink that was about to heal;
      and one counted from Connect's placement of the tasks, with the coordinators' group session at
      10 s, restarted 2 of 10 sinks elected a consumer session later — so the assignment includes
      the tasks' consumer group, whose settling is the election).
      With a cycle under way the coordinator exists; whether it is stuck (a failover mid-cycle,
      commits refused by the catalog: its offset stands still) is the first rule's call.
    - **cycles without commits** (``busy_after_s``; None: not judged): the coordinator's committed
      control offset kept moving — commit cycles finished — yet no Iceberg commit landed for
      ``busy_after_s`` since the clock or the task assignment last changed. Seen on the cluster profile
      after a worker rejoined: two tasks each ran a coordinator (apache/iceberg#17637), both finishing
      cycles that "committed to 0 table(s)" every interval while the owed records piled up. A
      coordinator commits its offsets on an idle cycle too, so its moving offset proves nothing.

    No work owed — an idle bus — is never a finding and stops both clocks. Unknown is never a
    finding either: with no watermark (tables not created yet) or an unreadable catalog the state is
    kept as it is; unread control events (None) are no "no coordinator" finding.
    """
    if seen.uncommitted is None or seen.last_commit_problem:
        return state, None
    if seen.uncommitted == 0:
        return {"commit": seen.last_commit_ms, "since": None,
                "assignment": assignment}, None
    since, busy_since, busy_coordinator = _clocks(state or {}, seen, now, assignment)
    kept = {"commit": seen.last_commit_ms, "since": since,
            "busy_since": busy_since, "busy_coordinator": busy_coordinator, "assignment": assignment}
    if seen.cycle_under_way is False and now - busy_since >= after_s:
        return kept, Uncommitted(now - busy_since, seen.uncommitted)
    cycles_finished = None not in (busy_coordinator, seen.coordinator) and seen.coordinator != busy_coordinator
    if busy_after_s is not None and cycles_finished and now - busy_since >= busy_after_s:
        return kept, Uncommitted(now - busy_since, seen.uncommitted, cycles_without_commits=True)
    return kept, None


# -- nothing owed: records missing past the watermark that no commit will ever bring ------------------
#
# Both rules above count records past the sink's watermark as work owed. Records lost upstream (their
# Kafka offsets committed with DataWritten answers no coordinator ever committed) stay past it for
# good once the bus goes quiet: the tasks have consumed everything, the coordinator keeps finishing
# cycles that commit "0 table(s)", and no snapshot moves the watermark. Such a stall never resolved
# without new traffic, and its ledger (which finds and re-queues the lost records) waited with it.


def watch_drained(state: dict | None, seen: SinkProgress) -> tuple[dict | None, bool]:
    """Fold one observation in; return ``(new state or None, whether the sink owes nothing)``.

    The sink owes nothing when its tasks have consumed every record on the bus (lag 0), no record
    arrived since, exactly one coordinator is in the coordinators' group, and that coordinator has
    since finished a commit cycle (its committed control offset moved) that read every control event
    there was one tick after the lag reached 0: every DataWritten answer for those records went to
    the control topic in the same transaction as their offsets. What is still past the watermark
    then was lost upstream, not delayed; the offset ledger finds it. The second tick is the margin
    for a transaction that committed between the tick's reads of the control topic and of the
    offsets. Two coordinators (both finishing cycles, one holding the answers) are never "nothing
    owed", and neither is a coordinator that stands still (a lost one: no cycle reads anything).
    """
    if seen.lag > 0 or seen.coordinator is None or seen.coordinator_members != 1:
        return None, False
    if state is None or state.get("bus_end") != seen.total_end:
        return {"bus_end": seen.total_end, "control_end": None}, False
    if state.get("control_end") is None:
        return {"bus_end": seen.total_end, "control_end": seen.control_end, "coordinator": seen.coordinator}, False
    return state, seen.coordinator > int(state["coordinator"]) and seen.coordinator >= int(state["control_end"])
