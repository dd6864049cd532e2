"""The rolling restart's state machine (connect/rolling.py) with a fake cluster and restarter, on a fake
clock: refuse on an unhealthy cluster or a silent worker, workers in order one at a time, stop when a
worker does not come back (the next never restarted), the plugin checked on the restarted worker;
the command restarter's placeholders and failures; the Connect view listing idle and silent workers."""

from __future__ import annotations

import sys

import pytest

from lakebus_dagster.connect.models import ConnectorStatus, TaskStatus
from lakebus_dagster.connect.restarters import PLATFORM_ADVICE, CommandRestarter, WorkerRestartFailed
from lakebus_dagster.connect.rolling import Roll, RollPlan, RollRefused, RollStopped, moved, placement, problems
from lakebus_dagster.connect.worker_probe import WorkerProbe
from lakebus_dagster.inventory.connect_view import worker_rows
from lakebus_dagster_tests.clocks import ManualTime

W1, W2 = "http://127.0.0.1:8083", "http://127.0.0.1:8093"
ID1, ID2 = "127.0.0.1:8083", "127.0.0.1:8093"
PLUGIN = "io.example.NewConnector"


def _sink(*tasks: tuple[str, str], state: str = "RUNNING", worker: str = ID1) -> ConnectorStatus:
    return ConnectorStatus("sink", state, worker, tasks=[TaskStatus(i, s, w) for i, (s, w) in enumerate(tasks)])


class FakeCluster:
    """Two workers, one sink with a task on each. A restarted worker is down for ``down_s``, then
    answers with ``new_plugins``; its task runs on the other worker meanwhile and comes back once it is up."""

    def __init__(self, clock: ManualTime, *, down_s: float = 5, comes_back: bool = True, new_plugins=frozenset({PLUGIN})) -> None:
        self.clock, self.down_s, self.comes_back, self.new_plugins = clock, down_s, comes_back, set(new_plugins)
        self.plugins_of = {W1: {"a.Sink"}, W2: {"a.Sink"}}
        self.down_until: dict[str, float] = {}
        self.task_states = ["RUNNING", "RUNNING"]

    def _up(self, url: str) -> bool:
        return self.clock() >= self.down_until.get(url, 0)

    def restart(self, url: str) -> None:
        self.down_until[url] = self.clock() + self.down_s if self.comes_back else float("inf")
        self.plugins_of[url] = {"a.Sink", *self.new_plugins}

    def statuses(self):
        w1 = ID1 if self._up(W1) else ID2
        w2 = ID2 if self._up(W2) else ID1
        return {"sink": _sink((self.task_states[0], w1), (self.task_states[1], w2), worker=w1)}

    def answers(self, url: str):
        return {"version": "3.9.2"} if self._up(url) else None

    def plugins(self, url: str):
        return set(self.plugins_of[url]) if self._up(url) else None


class FakeRestarter:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster, self.restarted = cluster, []

    def describe(self) -> str:
        return "the fake"

    def restart(self, url: str, number: int) -> None:
        self.restarted.append((number, url))
        self.cluster.restart(url)


def _roll(cluster: FakeCluster, clock: ManualTime, **plan):
    restarter = FakeRestarter(cluster)
    lines: list[str] = []
    roll = Roll(RollPlan(urls=(W1, W2), plugins=(PLUGIN,), settle_s=10, worker_deadline_s=60, settle_deadline_s=120,
                         **plan), cluster, restarter, log=lines.append, clock=clock, sleep=clock.sleep)
    return roll, restarter, lines


def test_workers_roll_in_order_one_at_a_time_with_seconds_down_moves_and_plugins():
    clock = ManualTime()
    cluster = FakeCluster(clock, down_s=5)
    roll, restarter, lines = _roll(cluster, clock)
    report = roll.run()
    assert restarter.restarted == [(1, W1), (2, W2)]
    assert [w.worker for w in report.workers] == [ID1, ID2]
    first = report.workers[0]
    assert first.added == (PLUGIN,) and first.removed == () and first.plugins_before == 1 and first.plugins_after == 2
    assert 5 <= first.down_s <= 6 and first.settle_s >= 10
    # task 0 ran on W2 while W1 was down and came back: two moves seen
    assert first.tasks_moved == 2 and report.skipped is None
    assert any("back after" in line for line in lines)


def test_a_cluster_without_connectors_rolls_too():
    """Seen through the UI on the cluster profile: an empty placement was taken for "not settled" and
    the roll waited 300 s for the tasks of no connector."""
    clock = ManualTime()
    cluster = FakeCluster(clock)
    cluster.statuses = lambda: {}
    roll, restarter, _ = _roll(cluster, clock)
    assert [w.tasks_moved for w in roll.run().workers] == [0, 0] and len(restarter.restarted) == 2


def test_an_unhealthy_cluster_is_refused_naming_the_task_and_nothing_is_restarted():
    clock = ManualTime()
    cluster = FakeCluster(clock)
    cluster.task_states[1] = "FAILED"
    roll, restarter, _ = _roll(cluster, clock)
    with pytest.raises(RollRefused, match=r"task sink/1 is FAILED on worker 127\.0\.0\.1:8093"):
        roll.run()
    assert restarter.restarted == []


def test_a_silent_worker_is_refused_naming_it():
    clock = ManualTime()
    cluster = FakeCluster(clock)
    cluster.down_until[W2] = float("inf")
    roll, restarter, _ = _roll(cluster, clock)
    with pytest.raises(RollRefused, match=r"127\.0\.0\.1:8093 do not answer"):
        roll.run()
    assert restarter.restarted == []


def test_a_worker_that_does_not_come_back_stops_the_roll_and_the_next_is_never_restarted():
    clock = ManualTime()
    cluster = FakeCluster(clock, comes_back=False)
    roll, restarter, _ = _roll(cluster, clock)
    with pytest.raises(RollStopped, match=r"worker 127\.0\.0\.1:8083 did not answer GET / within 60 s.*not restarted: 127\.0\.0\.1:8093") as stopped:
        roll.run()
    assert restarter.restarted == [(1, W1)] and stopped.value.done == []


def test_a_worker_back_without_the_plugin_stops_the_roll_naming_the_plugin():
    clock = ManualTime()
    cluster = FakeCluster(clock, new_plugins=())
    roll, restarter, _ = _roll(cluster, clock)
    with pytest.raises(RollStopped, match=r"worker 127\.0\.0\.1:8083 answers again but does not list io\.example\.NewConnector"):
        roll.run()
    assert restarter.restarted == [(1, W1)]


def test_tasks_that_do_not_settle_stop_the_roll_before_the_next_worker():
    clock = ManualTime()
    cluster = FakeCluster(clock)
    roll, restarter, _ = _roll(cluster, clock)
    original = cluster.restart

    def restart_and_fail(url):
        original(url)
        cluster.task_states[0] = "UNASSIGNED"

    cluster.restart = restart_and_fail
    with pytest.raises(RollStopped, match=r"did not settle within 120 s \(task sink/0 is UNASSIGNED"):
        roll.run()
    assert restarter.restarted == [(1, W1)]


def test_only_if_missing_skips_a_cluster_that_has_the_plugin_everywhere_and_a_rerun_rolls_otherwise():
    clock = ManualTime()
    cluster = FakeCluster(clock)
    cluster.plugins_of = {W1: {"a.Sink", PLUGIN}, W2: {"a.Sink", PLUGIN}}
    roll, restarter, _ = _roll(cluster, clock, only_if_missing=True)
    assert "already lists io.example.NewConnector" in roll.run().skipped and restarter.restarted == []
    again, restarter, _ = _roll(cluster, clock)  # without the option the rerun rolls, safely
    assert [w.added for w in again.run().workers] == [(), ()] and len(restarter.restarted) == 2


def test_problems_placement_and_moves():
    paused = ConnectorStatus("p", "PAUSED", ID1, tasks=[TaskStatus(0, "PAUSED", ID2)])
    assert problems({"p": paused}) == []
    assert problems({"s": _sink(("RUNNING", ID1), state="FAILED")}) == [f"connector s is FAILED on worker {ID1}"]
    assert problems({"s": _sink()}) == ["connector s is RUNNING with no task assigned yet"]
    before = placement({"s": _sink(("RUNNING", ID1), ("RUNNING", ID2))})
    assert before == {"s": ID1, "s/0": ID1, "s/1": ID2}
    assert moved(before, {"s": ID2, "s/0": ID2, "s/1": ID2}) == 1


def test_the_command_restarter_fills_the_worker_in_and_names_it_when_it_fails():
    restarter = CommandRestarter([sys.executable, "-c", "import sys; print('x', sys.argv[1:]); sys.exit(3)", "{url}", "{host}",
                                  "{port}", "{number}"])
    assert restarter.command("http://u:secret@10.0.0.5:8083", 2)[-4:] == ["http://10.0.0.5:8083", "10.0.0.5", "8083", "2"]
    with pytest.raises(WorkerRestartFailed, match=r"worker http://10\.0\.0\.5:8083: .* exited 3"):
        restarter.restart("http://10.0.0.5:8083", 1)
    with pytest.raises(ValueError, match="Strimzi"):
        CommandRestarter([])
    assert "rolls the Connect pods one at a time" in PLATFORM_ADVICE


def test_the_view_lists_every_configured_worker_idle_and_silent_ones_included():
    probes = [WorkerProbe(W1, ID1, True, "3.9.2"), WorkerProbe(W2, ID2, True, "3.9.2"),
              WorkerProbe("http://127.0.0.1:8103", "127.0.0.1:8103", False, error="ConnectUnavailable: refused")]
    rows = worker_rows({ID1: {"connectors": 1, "tasks": 1}, "10.9.9.9:8083": {"connectors": 0, "tasks": 1}}, probes)
    assert [(r["worker"], r["answering"], r["idle"]) for r in rows] == [
        (ID1, "yes", "no"), (ID2, "yes", "yes"), ("127.0.0.1:8103", "no", "no"), ("10.9.9.9:8083", "yes (runs tasks)", "no")]
    assert rows[3]["note"] == "not among the configured URLs" and "refused" in rows[2]["note"]
