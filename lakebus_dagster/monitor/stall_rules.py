"""The status sensor's two stall rules as incidents (see :mod:`lakebus_dagster.monitor.stall`).

Both use one key, ``connector:<name>:stalled``: a sink that commits nothing is one episode whichever
rule sees it first, so it alerts once and sends one recovery notice when commits land again. The
rules rarely fire on the same tick (the lost-coordinator rule needs no commit cycle under way,
:attr:`~lakebus_dagster.monitor.stall.SinkProgress.cycle_under_way`, or cycles that finish without an
Iceberg commit; the coordinator watch, a coordinator offset standing still); when they do it is
still one incident.
"""

from __future__ import annotations

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.connect import ConnectorOverview
from lakebus_dagster.monitor.incidents import Incident, IncidentBook
from dataclasses import replace

from lakebus_dagster.monitor.stall import SinkProgress, watch, watch_drained, watch_uncommitted
from lakebus_dagster.monitor.starved import watch_starved


def running_as_declared(bus: BusLayout, declared: dict[str, str], sink: ConnectorOverview) -> bool:
    """The sink should run and does, every task included: only then is a lack of progress a stall
    (a paused or failing sink has its own incidents, and no progress is expected of it)."""
    return (
        declared.get(bus.connector_name) == "RUNNING"
        and sink.status is not None and sink.status.state == "RUNNING"
        and bool(sink.status.tasks) and all(t.state == "RUNNING" for t in sink.status.tasks)
    )


def _keep(states: dict[str, dict], connector: str, state: dict | None) -> None:
    """A rule's new state for ``connector`` in the book; None: the rule has nothing to remember."""
    if state is None:
        states.pop(connector, None)
    else:
        states[connector] = state


def owed_after_drain(bus: BusLayout, book: IncidentBook, seen: SinkProgress) -> SinkProgress:
    """``seen`` as the stall rules should judge it: with nothing owed (:func:`watch_drained`: the
    tasks consumed the quiet bus and one coordinator's finished cycle read every answer), the records
    still past the watermark are lost upstream, not late — no rule counts them, so a stall resolves
    and its ledger runs at once, without waiting for new traffic to move the watermark."""
    state, drained = watch_drained(book.drained.get(bus.connector_name), seen)
    _keep(book.drained, bus.connector_name, state)
    return replace(seen, uncommitted=0) if drained and seen.uncommitted else seen


def stall_key(connector: str) -> str:
    """The one incident key of a connector's commit-coordinator stall, whichever rule saw it."""
    return f"connector:{connector}:stalled"


def stall_incident(bus: BusLayout, book: IncidentBook, seen: SinkProgress, now: float, stall_after_s: float,
                   assignment: str) -> Incident | None:
    """The coordinator watch (:func:`watch`): the coordinator's control offset stands still while
    coordination is pending. Not restartable: its usual causes (commits refused by the catalog, a
    failover still settling) are not fixed by restarting tasks blindly."""
    state, stall = watch(book.progress.get(bus.connector_name), seen, now, stall_after_s, assignment)
    book.progress[bus.connector_name] = state
    if stall is None:
        return None
    return Incident(
        f"connector:{bus.connector_name}:stalled",  # stall_key(): a literal here for the runbook scan
        bus.connector_name,
        f"connector {bus.connector_name} is RUNNING but committed nothing to Iceberg for {stall.seconds:.0f}s: "
        + (f"{stall.uncommitted} record(s) of {bus.bus_topic.name} not in the tables yet"
           if stall.uncommitted is not None else f"records of {bus.bus_topic.name} not in the tables yet: unknown")
        + f" ({seen.pending} control event(s) pending), last ODS commit {seen.last_commit_text()}",
    )


def uncommitted_incident(bus: BusLayout, book: IncidentBook, seen: SinkProgress, now: float,
                         after_s: float, busy_after_s: float, assignment: str) -> Incident | None:
    """The lost-coordinator rule (:func:`watch_uncommitted`): records past the sink's watermark and no
    Iceberg commit, with no commit cycle under way on the control topic (no coordinator) or with
    cycles finishing that commit nothing (duplicate coordinators). Same key as the coordinator watch's
    stall — whichever rule sees an episode first, it is one incident and one recovery notice — but
    restartable, every task: a restart is the fix (the tasks rejoin, one of them is elected and
    starts a coordinator) and it is safe (the sink is exactly-once through its control topic and
    Connect's offsets, which never moved past what was committed)."""
    state, found = watch_uncommitted(book.uncommitted.get(bus.connector_name), seen, now, after_s, busy_after_s, assignment)
    _keep(book.uncommitted, bus.connector_name, state)
    if found is None:
        return None
    return Incident(
        f"connector:{bus.connector_name}:stalled",  # stall_key(): a literal here for the runbook scan
        bus.connector_name,
        f"connector {bus.connector_name} is RUNNING but committed nothing to Iceberg for {found.seconds:.0f}s: "
        f"{found.uncommitted} record(s) of {bus.bus_topic.name} not in the tables yet and "
        + (f"its commit cycles on {bus.control_topic.name} finish without committing (duplicate commit coordinators?)"
           if found.cycles_without_commits else f"no commit cycle under way on {bus.control_topic.name} (no commit coordinator?)")
        + f", last ODS commit {seen.last_commit_text()}; restarting it",
        restartable=True,
        restart_scope="all",
    )


#: overlapping pairs of commit cycles within the window that make two coordinators an incident (one
#: pair can be the hand-over of a move; two mean both coordinators keep running)
DUAL_MIN_OVERLAPS = 2


#: Kafka's default consumer session: how long a dead coordinator stays in the coordinators' group when
#: the sink's control clients' session is not set
KAFKA_DEFAULT_SESSION_S = 45.0


def dual_members_window_seconds(commit_interval_ms: int, control_session_ms: int | None) -> float:
    """How long the coordinators' group must keep two or more members to be two coordinators: three
    commit intervals, and always two intervals longer than a dead coordinator's control session (a
    failover's dead member lingers that long beside the new coordinator). Shipped: 30 s."""
    session_s = control_session_ms / 1000 if control_session_ms else KAFKA_DEFAULT_SESSION_S
    return max(3 * commit_interval_ms / 1000, session_s + 2 * commit_interval_ms / 1000)


def dual_coordinator_incident(bus: BusLayout, book: IncidentBook, seen: SinkProgress, now: float,
                              window_s: float, members_window_s: float) -> Incident | None:
    """Two commit coordinators, seen either way for ``window_s`` (apache/iceberg#17637; after a worker
    rejoins, the interim coordinator a rebalance started on another task is never stopped):

    - on the control topic (:mod:`lakebus_dagster.monitor.coordinators`): at least
      :data:`DUAL_MIN_OVERLAPS` pairs of finished commit cycles that overlapped, started within
      ``window_s`` and after the stall incident's last restart (what a restart healed is not counted
      again) — both coordinators hold a control partition;
    - in the coordinators' consumer group: two or more members all along ``members_window_s``
      (:func:`dual_members_window_seconds`) — one of them holds no partition, its
      cycles never finish, and the other's wait a commit timeout for answers it took (measured:
      commits every 30 s instead of 10, and a failover from that state 45-55 s). A failover's dead
      member leaves within the control session (10 s), inside the window.

    Same key as the other stall rules; restartable, every task: a restart stops both coordinators
    and one task is elected."""
    connector = bus.connector_name
    if (seen.coordinator_members or 0) >= 2:
        book.dual_members_since.setdefault(connector, now)
    else:
        book.dual_members_since.pop(connector, None)
    opened = book.open.get(stall_key(connector))
    if opened is not None and opened.last_restart_at is not None:  # remembered past the incident's recovery
        book.dual_counted_from_ms[connector] = max(book.dual_counted_from_ms.get(connector, 0),
                                                   int(opened.last_restart_at * 1000))
    counted_from_ms = book.dual_counted_from_ms.get(connector, 0)
    members_since = book.dual_members_since.get(connector)
    if members_since is not None:
        members_since = max(members_since, counted_from_ms / 1000)  # a restart starts the window over
    if members_since is not None and now - members_since >= members_window_s:
        seen_as = (f"its coordinators' consumer group on {bus.control_topic.name} has had {seen.coordinator_members} "
                   f"members for {now - members_since:.0f}s")
    elif seen.overlapping_cycles is not None:
        after_ms = max(1000 * (now - window_s), counted_from_ms)
        recent = [pair for pair in seen.overlapping_cycles if min(pair) >= after_ms]
        if len(recent) < DUAL_MIN_OVERLAPS:
            return None
        seen_as = f"{len(recent)} pair(s) of its commit cycles on {bus.control_topic.name} overlapped in the last {window_s:.0f}s"
    else:
        return None
    return Incident(
        f"connector:{bus.connector_name}:stalled",  # stall_key(): a literal here for the runbook scan
        bus.connector_name,
        f"connector {bus.connector_name} runs two commit coordinators: {seen_as} (apache/iceberg#17637); each "
        f"waits for answers the other took, so commits come a commit timeout late and acknowledged records can be "
        f"lost; last ODS commit {seen.last_commit_text()}; restarting it",
        restartable=True,
        restart_scope="all",
    )


def starved_incident(bus: BusLayout, book: IncidentBook, seen: SinkProgress, now: float, after_s: float,
                     tasks: str) -> Incident | None:
    """The starved-sink rule (:func:`watch_starved`): declared RUNNING, records waiting and no new
    Iceberg commit for ``after_s``, whatever the tasks did meanwhile (``tasks``: their states, for the
    text). Same key as the stall rules: one episode. Not restartable: a sink whose tasks never settle
    is not fixed by one more restart; the runbook says what to read."""
    state, found = watch_starved(book.starved.get(bus.connector_name), seen, now, after_s)
    _keep(book.starved, bus.connector_name, state)
    if found is None:
        return None
    return Incident(
        f"connector:{bus.connector_name}:stalled",  # stall_key(): a literal here for the runbook scan
        bus.connector_name,
        f"connector {bus.connector_name} is declared RUNNING but committed nothing to Iceberg for {found.seconds:.0f}s "
        f"while {found.waiting} record(s) of {bus.bus_topic.name} wait (tasks: {tasks}), last ODS commit "
        f"{seen.last_commit_text()}",
    )
