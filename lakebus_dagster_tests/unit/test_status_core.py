"""The status sensor's decision core, fed recorded observations tick by tick: plain data in, the new
book, the alerts it owes and the healing intents out. No service, no Dagster instance, no patched
module: what the core decides from what a tick saw is all there is to test here."""

from __future__ import annotations

from dataclasses import replace

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.connect import ConnectorOverview, ConnectorStatus, ConnectUnavailable
from lakebus_dagster.connect.models import TaskStatus
from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource
from lakebus_dagster.monitor.healing_rules import QuarantineIntent, RestartIntent, restart_attempt
from lakebus_dagster.monitor.incidents import UNREACHABLE_KEY, IncidentBook
from lakebus_dagster.monitor.stall import SinkProgress
from lakebus_dagster.monitor.status_tick import SlotObservation, StatusObservation, decide

BUS = BusLayout.default("demo")
SINK = BUS.connector_name
POLICY = MonitoringPolicyResource(recovery_stable_s=30.0).status_policy()
POISON = ("org.apache.kafka.connect.errors.ConnectException: Exiting WorkerSinkTask due to unrecoverable exception.\n"
          "Caused by: org.apache.kafka.connect.errors.DataException: An error occurred converting record, "
          "topic: events, partition, 0, offset: 20\n")
T0 = 1_000_000.0


def sink(*task_states: str, trace: str | None = None) -> dict[str, ConnectorOverview]:
    tasks = [TaskStatus(id=i, state=s, worker_id="w1:8083", trace=trace if s == "FAILED" else None)
             for i, s in enumerate(task_states)]
    return {SINK: ConnectorOverview(status=ConnectorStatus(name=SINK, state="RUNNING", worker_id="w1:8083", tasks=tasks))}


def seen(at: float, overview=None, **more) -> StatusObservation:
    """A tick with the sink declared RUNNING and no progress read (the progress rules have tests of their own)."""
    return StatusObservation(now=at, declared={SINK: "RUNNING"}, overview=overview, **more)


def replay(*ticks: StatusObservation, book: IncidentBook | None = None, policy=POLICY):
    """Each tick's decision, the book carried from one to the next as the cursor carries it."""
    book, decisions = book or IncidentBook(), []
    for tick in ticks:
        decision = decide(tick, book, policy, BUS)
        decisions.append(decision)
        book = replace(decision.book, pending_alerts=[])  # delivered
    return decisions


def test_a_failed_task_alerts_once_is_restarted_then_quarantined_on_the_same_record():
    """Tick 1: the task FAILED on offset 20: one incident alert, restart attempt 1. Tick 2: still
    FAILED, the restart run has not ended: nothing new. Tick 3: the restart ended and the task
    failed again on the same record: quarantine, no second alert."""
    failed = sink("FAILED", trace=POISON)
    first, second, third = replay(
        seen(T0, failed), seen(T0 + 10, failed),
        seen(T0 + 20, failed, finished_restarts=frozenset({restart_attempt(f"connector:{SINK}:task:0:FAILED@{T0:.0f}", 1)})))
    assert [a["kind"] for a in first.book.pending_alerts] == ["incident"]
    assert first.intents == [RestartIntent(SINK, f"connector:{SINK}:task:0:FAILED@{T0:.0f}", 1, first.intents[0].reason, True)]
    assert second.intents == [] and second.book.pending_alerts == []
    assert third.intents == [QuarantineIntent(SINK, f"connector:{SINK}:task:0:FAILED@{T0:.0f}", "events[0]@20")]
    assert third.book.pending_alerts == [] and "quarantining it" in third.notes[0]


def test_recovery_is_announced_once_after_the_stable_window():
    failed, healthy = sink("FAILED", trace="boom"), sink("RUNNING")
    ticks = replay(seen(T0, failed), seen(T0 + 10, healthy), seen(T0 + 30, healthy), seen(T0 + 45, healthy),
                   seen(T0 + 60, healthy))
    kinds = [[a["kind"] for a in d.book.pending_alerts] for d in ticks]
    assert kinds == [["incident"], [], [], ["recovery"], []]
    assert ticks[-1].book.open == {}


def test_connect_unreachable_is_one_incident_and_the_previous_book_is_not_touched():
    down = seen(T0, connect_error=ConnectUnavailable("refused", urls=["http://127.0.0.1:8083"], method="GET", path="/connectors"))
    previous = IncidentBook()
    decision = decide(down, previous, POLICY, BUS)
    assert list(decision.book.open) == [UNREACHABLE_KEY] and previous.open == {}
    assert decision.book.pending_alerts[0]["title"].startswith("Kafka Connect is unreachable")


def test_an_unreadable_state_topic_waits_for_its_threshold():
    unreadable = "state topic timed out"
    ticks = replay(*(seen(T0 + s, sink("RUNNING"), declared_unreadable=unreadable) for s in (0, 30, 61)))
    assert [len(d.book.open) for d in ticks] == [0, 0, 1]
    assert all(unreadable in d.warnings[0] for d in ticks)


def test_the_slot_is_judged_from_its_reading_and_recorded_on_change():
    reading = {"slot": "lakebus_shop", "active": False, "wal_status": "reserved", "confirmed_flush_lsn": "0/1",
               "retained_bytes": 10, "unconfirmed_bytes": 0, "safe_wal_size": None}
    slot = SlotObservation("lakebus_shop", "shop-source", reading)
    ticks = replay(*(seen(T0 + s, sink("RUNNING"), slot=slot) for s in (0, 10, 301)))
    assert ticks[0].slot_seen is not None and ticks[1].slot_seen is None  # recorded when it changes, not every tick
    assert [list(d.book.open) for d in ticks][-1] == ["connector:shop-source:slot:inactive"]


# -- a failover timeline: the commit coordinator's worker dies (the shipped 10 s commit interval) ---
def progress(at: float, *, end: int, committed_at: float, uncommitted: int, coordinator: int, members: int,
             events: tuple[str, ...] = ("CommitToTable", "CommitComplete")) -> SinkProgress:
    """What the sensor reads of the sink at ``at``: the tasks keep up with the bus (lag 0), the newest
    Iceberg commit was at ``committed_at``, ``uncommitted`` records are past the watermark, the
    coordinator's committed control offset and the coordinators' group size."""
    return SinkProgress(consumed={0: end}, end={0: end}, coordinator=coordinator, control_end=coordinator + 5,
                        last_commit_ms=int(committed_at * 1000), uncommitted=uncommitted, control_events=events,
                        overlapping_cycles=(), sink_members="tasks:1", coordinator_members=members)


def test_a_lost_coordinator_is_restarted_once_then_resolves_with_the_ledger_after_it():
    """As ``integration/test_lost_coordinator.py`` saw it: records keep arriving and the tasks consume
    them, but nothing commits and no commit cycle starts (the coordinator's worker died and the
    coordinators' group is empty). Two commit intervals later the sensor restarts every task (scope
    all), once; commits resume, and after the recovery window the recovery alert and the offset
    ledger (grace: two commit cycles) follow."""
    policy = MonitoringPolicyResource().status_policy()  # shipped: 90 s recovery window
    healthy, died = T0, T0 + 15
    ticks, book, decisions = [T0 + 10 * i for i in range(16)], IncidentBook(), []
    for at in ticks:
        if at < died:
            seen_ = progress(at, end=int(at - T0) * 10, committed_at=at - 2, uncommitted=0, coordinator=100 + int(at - T0), members=1)
        elif at < T0 + 50:  # no coordinator: the watermark and the control topic stand still, records pile up
            seen_ = progress(at, end=int(at - T0) * 10, committed_at=T0 + 8, uncommitted=int(at - died) * 10, coordinator=110,
                             members=0)
        else:  # restarted at T0 + 40: a new coordinator commits every interval
            seen_ = progress(at, end=int(at - T0) * 10, committed_at=at - 2, uncommitted=0, coordinator=120 + int(at - T0), members=1)
        decision = decide(seen(at, sink("RUNNING"), progress=seen_), book, policy, BUS)
        decisions.append((at - healthy, decision))
        book = replace(decision.book, pending_alerts=[])
    alerts = [(t, a["kind"]) for t, d in decisions for a in d.book.pending_alerts]
    intents = [(t, type(i).__name__) for t, d in decisions for i in d.intents]
    assert alerts == [(40.0, "incident"), (140.0, "recovery")]
    assert intents == [(40.0, "RestartIntent"), (140.0, "LedgerIntent")]
    restart = decisions[4][1].intents[0]
    assert restart.only_failed is False and "no commit cycle under way" in restart.reason
    ledger = decisions[14][1].intents[0]
    assert (ledger.after, ledger.grace_s) == ("stall", 80.0)


def test_a_failover_whose_new_coordinator_commits_within_the_window_is_no_incident():
    """The README's failover: a worker dies, the survivor's task is elected ~25 s later and its first
    commit cycle starts; no alert, no restart."""
    policy = MonitoringPolicyResource().status_policy()
    book, seen_alerts, seen_intents = IncidentBook(), [], []
    for at in [T0 + 10 * i for i in range(12)]:
        if at < T0 + 15:
            p = progress(at, end=int(at - T0) * 10, committed_at=at - 2, uncommitted=0, coordinator=100 + int(at - T0), members=1)
        elif at < T0 + 40:  # owed records; from T0 + 30 the new coordinator's first cycle is under way
            p = progress(at, end=int(at - T0) * 10, committed_at=T0 + 8, uncommitted=int(at - T0 - 15) * 10, coordinator=110,
                         members=0 if at < T0 + 30 else 1, events=("StartCommit",) if at >= T0 + 30 else ("CommitComplete",))
        else:
            p = progress(at, end=int(at - T0) * 10, committed_at=at - 2, uncommitted=0, coordinator=120 + int(at - T0), members=1)
        decision = decide(seen(at, sink("RUNNING"), progress=p), book, policy, BUS)
        seen_alerts += decision.book.pending_alerts
        seen_intents += decision.intents
        book = replace(decision.book, pending_alerts=[])
    assert seen_alerts == [] and seen_intents == [] and book.open == {}
