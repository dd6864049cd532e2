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
