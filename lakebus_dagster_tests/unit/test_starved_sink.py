"""The starved-sink rule (issue 29: a sink that never commits was silent): declared RUNNING, records
waiting and no new Iceberg commit for three stall windows, whatever its tasks do. The status sensor
is evaluated the way the daemon does, with test_monitoring's fakes."""

from __future__ import annotations

from lakebus_dagster.monitor.starved import watch_starved
from lakebus_dagster.monitor.stall import SinkProgress
from lakebus_dagster_tests.unit import test_monitoring as mon
from lakebus_dagster_tests.unit.test_monitoring import DECLARED, NAME, NOW, PROGRESS, SCRIPT, SENT, Policy, RecordingAlerts, overview, tick

_reset_fakes = mon._reset_fakes  # the fakes' autouse reset, for this module too

#: three stall windows of the shipped tuning: max(6 x 10 s interval, 2 x 30 s timeout) = 60 s each
STARVED_S = 180


def _storm(ticks: int, commits: bool = False, declared: str = "RUNNING") -> tuple[list, list]:
    """A rebalance storm: every 10 s the task is UNASSIGNED or RUNNING on the other worker, records
    keep arriving; ``commits``: a commit lands every tick anyway. Returns (alerts, run requests)."""
    DECLARED[NAME] = declared
    SENT.clear()
    PROGRESS.update(consumed=0, end=0, coordinator=None, control_end=0, first_after=-1)
    alerts, cursor, requests = RecordingAlerts(), None, []
    for k in range(ticks):
        NOW[0] += 10
        SCRIPT[:] = [overview("UNASSIGNED" if k % 2 else declared, connector_state=declared, worker=f"w{k % 3}")]
        PROGRESS["end"] += 50
        if commits:
            PROGRESS.update(consumed=PROGRESS["end"], valid_through=int(NOW[0] * 1000))
        _, cursor = tick(None, alerts, cursor, policy=Policy())
        requests += _.run_requests or []
    return list(SENT), requests


def test_a_sink_whose_tasks_never_settle_and_that_never_committed_is_one_incident_after_three_stall_windows():
    sent, requests = _storm(STARVED_S // 10 + 1)
    assert [a["kind"] for a in sent] == ["incident"], sent
    assert "declared RUNNING but committed nothing to Iceberg for 180s" in sent[0]["title"], sent[0]
    assert "no commit yet" in sent[0]["title"]
    assert [r.job_name for r in requests] == [], "a storm is not fixed by one more restart"


def test_not_before_three_stall_windows():
    sent, _ = _storm(STARVED_S // 10)
    assert sent == []


def test_a_storm_that_still_commits_is_no_incident_and_a_parked_sink_is_not_judged():
    assert _storm(30, commits=True)[0] == []
    assert _storm(30, declared="PAUSED")[0] == [], "a sink parked on purpose owes nothing"


def test_the_clock_restarts_on_a_new_commit_and_an_unreadable_catalog_changes_nothing():
    seen = SinkProgress({0: 10}, {0: 60}, last_commit_ms=1000, uncommitted=50)
    state, found = watch_starved(None, seen, 0.0, 100.0)
    state, found = watch_starved(state, seen, 90.0, 100.0)
    assert found is None
    unreadable = SinkProgress({0: 10}, {0: 60}, last_commit_ms=None, last_commit_problem="catalog down")
    state, found = watch_starved(state, unreadable, 95.0, 100.0)
    assert found is None and state["since"] == 0.0
    later = SinkProgress({0: 10}, {0: 70}, last_commit_ms=2000, uncommitted=60)
    state, found = watch_starved(state, later, 99.0, 100.0)
    assert found is None and state["since"] == 99.0
    state, found = watch_starved(state, later, 199.0, 100.0)
    assert found is not None and found.waiting == 60
    caught_up = SinkProgress({0: 70}, {0: 70}, last_commit_ms=2000, uncommitted=0)
    assert watch_starved(state, caught_up, 200.0, 100.0) == (None, None)
