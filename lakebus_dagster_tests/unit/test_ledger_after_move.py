"""The offset ledger once after every move of the sink's tasks (issue 29: a loss no stall announces).

The status sensor is evaluated the way the daemon does (``evaluate_tick`` on the shipped
definitions, with test_monitoring's fakes for Connect, Kafka and the catalog); the pure placement
watch is tested alone first.
"""

from __future__ import annotations

import pytest

from lakebus_dagster.connect import ConnectUnavailable
from lakebus_dagster.monitor.moves import UNSETTLED, ledger_ran, watch_placement
from lakebus_dagster_tests.unit import test_monitoring as mon
from lakebus_dagster_tests.unit.test_monitoring import NOW, SCRIPT, Policy, RecordingAlerts, overview, tick

_reset_fakes = mon._reset_fakes  # the fakes' autouse reset, for this module too

SETTLE_S = 80.0  # max(recovery_stable_s = 0 in unit tests, the ledger's 2-cycle grace of 80 s)


def _settle(state, seen, start, *, hold=False):
    """Ticks every 10 s from ``start`` over 100 s: the times at which a move was due."""
    due = []
    for k in range(11):
        state, move = watch_placement(state, seen, start + 10 * k, SETTLE_S, hold=hold)
        if move is not None:
            due.append((10 * k, move))
    return state, due


def test_a_first_placement_is_no_move():
    state, _ = watch_placement(None, UNSETTLED, 0.0, SETTLE_S)  # provisioned: tasks starting
    state, due = _settle(state, "0@w1", 10.0)
    assert due == []


def test_a_move_is_due_once_after_the_new_placement_held_still_for_the_settle_window():
    state, _ = watch_placement(None, "0@w1", 0.0, SETTLE_S)
    state, _ = watch_placement(state, UNSETTLED, 10.0, SETTLE_S)  # the worker died: task 0 unassigned
    state, due = _settle(state, "0@w2", 20.0)
    assert [(at, m.before, m.after) for at, m in due] == [(80, "0@w1", "0@w2")]
    state, due = _settle(state, "0@w2", 200.0)
    assert due == [], "one ledger run per move"


def test_a_restart_on_the_same_worker_is_a_move_and_a_change_while_settling_restarts_the_clock():
    state, _ = watch_placement(None, "0@w1,1@w1", 0.0, SETTLE_S)
    state, _ = watch_placement(state, UNSETTLED, 10.0, SETTLE_S)
    state, _ = watch_placement(state, "0@w1,1@w1", 20.0, SETTLE_S)
    state, _ = watch_placement(state, "0@w1,1@w2", 60.0, SETTLE_S)  # a worker rejoined: task 1 moved to it
    state, due = _settle(state, "0@w1,1@w2", 70.0)
    assert [(at, m.before, m.after) for at, m in due] == [(70, "0@w1,1@w1", "0@w1,1@w2")]  # due at 140 = 60 + 80


def test_an_open_incident_holds_the_move_and_a_stall_ledger_accounts_for_it():
    state, _ = watch_placement(None, "0@w1", 0.0, SETTLE_S)
    state, _ = watch_placement(state, "0@w2", 10.0, SETTLE_S)
    held, due = _settle(state, "0@w2", 20.0, hold=True)
    assert due == []
    _, due = _settle(held, "0@w2", 200.0)
    assert len(due) == 1, "due once the incident is gone"
    _, due = _settle(ledger_ran(held), "0@w2", 200.0)
    assert due == [], "a stall's ledger covered it"


def _ticks(policy, placements):
    """One status-sensor tick per (seconds after the last, task state, worker); the run requests."""
    alerts, cursor, requests = RecordingAlerts(), None, []
    for after_s, state, worker in placements:
        NOW[0] += after_s
        SCRIPT[:] = [overview(state, worker=worker) if state else ConnectUnavailable("refused", method="GET", path="/connectors")]
        result, cursor = tick(None, alerts, cursor, policy=policy)
        requests += [(NOW[0], r) for r in result.run_requests or []]
    return requests


#: the worker running task 0 dies: the task is UNASSIGNED for 40 s (below the 120 s incident
#: threshold), then runs on the survivor; the sensor ticks every 10 s for 3 minutes after that
FAILOVER = [(0, "RUNNING", "w1"), (10, "UNASSIGNED", "w1"), (40, "RUNNING", "w2"), *[(10, "RUNNING", "w2")] * 18]


def test_the_status_sensor_runs_the_offset_ledger_once_after_the_tasks_moved_and_settled():
    start = NOW[0]
    ((at, request),) = _ticks(Policy(), FAILOVER)
    assert request.job_name == "offset_ledger_job"
    assert request.run_config == {"ops": {"offset_ledger": {"config": {"grace_s": 80.0}}}}
    assert request.tags["lakebus/after_move"] == "0@w1 -> 0@w2"
    assert at - start == 50 + SETTLE_S  # settled on the survivor at +50 s


def test_the_ledger_after_a_move_can_be_switched_off():
    assert _ticks(Policy(ledger_after_move=False), FAILOVER) == []


def test_connect_unreadable_is_no_move_and_a_steady_sink_runs_no_ledger():
    steady = [(0, "RUNNING", "w1"), (10, None, "w1"), *[(10, "RUNNING", "w1")] * 15]
    assert _ticks(Policy(), steady) == []


@pytest.mark.parametrize("shipped_stable_s", [90.0])
def test_with_the_shipped_recovery_window_the_ledger_waits_for_it(shipped_stable_s):
    start = NOW[0]
    ((at, _),) = _ticks(Policy(recovery_stable_s=shipped_stable_s), FAILOVER)
    assert at - start == 50 + shipped_stable_s
