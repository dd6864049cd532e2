"""A rolling restart of the Connect workers, one at a time: how a new plugin enters a running cluster.

Kafka Connect loads plugins only when a worker starts (it has no ``/plugin/reload``, unlike seed
003's gateway). So a plugin put into every worker's ``plugin.path`` (or its image) is brought in by
restarting the workers one after the other, never two at once, and only while the cluster is
healthy: with one worker down the others run its tasks; with two down nothing may be left to.

The flow per worker: the cluster healthy (every connector and task in its declared state, none
FAILED or UNASSIGNED) → restart that worker (:class:`WorkerRestarter`: the local stack's process
manager, a platform command, or a refusal that says what to do) → it answers ``GET /`` again and
lists the expected plugins (asked on that worker: each loads its own ``plugin.path``) → every task
RUNNING and the placement of connectors and tasks unchanged for ``settle_s`` → the next worker.
Refused before anything is restarted when the cluster is unhealthy or a worker does not answer
(:class:`RollRefused`, naming it); stopped when a worker does not come back or the tasks do not
settle (:class:`RollStopped`, naming the worker, with what was done so far): the next worker is
never restarted then. No record is lost or duplicated by the roll itself: a worker stopped with
SIGTERM stops its tasks (the sink's uncommitted work is re-read from its committed offsets) and
leaves the group, and the tasks restart elsewhere.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from lakebus_dagster.connect.errors import ConnectError
from lakebus_dagster.connect.models import ConnectorStatus
from lakebus_dagster.connect.worker_probe import worker_id_of

#: a connector in one of these is as declared; its tasks must then be in the same state
DECLARED_STATES = frozenset({"RUNNING", "PAUSED", "STOPPED"})


class RollRefused(Exception):
    """Nothing was restarted: the cluster was not fit for a roll (the message names why)."""


class RollStopped(Exception):
    """The roll stopped part-way (the message names the worker and why); ``done`` are the workers
    rolled before, and no worker after the failing one was restarted."""

    def __init__(self, message: str, done: Sequence[WorkerRoll]) -> None:
        super().__init__(message)
        self.done = list(done)


class Cluster(Protocol):
    """What the roll reads: the cluster's statuses (any worker) and each worker on its own."""

    def statuses(self) -> Mapping[str, ConnectorStatus]:
        """Every connector's status (``GET /connectors?expand=status``)."""
        ...

    def answers(self, url: str) -> dict[str, Any] | None:
        """That worker's ``GET /`` (version, commit), or None when it does not answer."""
        ...

    def plugins(self, url: str) -> set[str] | None:
        """The plugin classes that worker loaded, or None when it does not answer."""
        ...


class WorkerRestarter(Protocol):
    """How one worker is restarted: stop it, start it again (blocking, or returning at once; the roll
    waits for the worker either way). Raises with a message naming the worker when it cannot."""

    def describe(self) -> str:
        ...

    def restart(self, url: str, number: int) -> None:
        """Restart the worker at ``url``, the ``number``-th (1-based) of the configured workers."""
        ...


@dataclass(frozen=True)
class RollPlan:
    """What to roll and how long to wait: ``urls`` in order; ``plugins`` that must be listed afterwards."""

    urls: tuple[str, ...]
    plugins: tuple[str, ...] = ()
    worker_deadline_s: float = 300.0
    settle_s: float = 20.0
    settle_deadline_s: float = 300.0
    poll_s: float = 1.0
    #: skip the roll (with its reason) when every worker already lists every plugin of ``plugins``
    only_if_missing: bool = False


@dataclass(frozen=True)
class WorkerRoll:
    """One worker's restart, for the run's metadata."""

    worker: str
    down_s: float
    settle_s: float
    tasks_moved: int
    plugins_before: int
    plugins_after: int
    added: tuple[str, ...]
    removed: tuple[str, ...]
    version_after: str

    def row(self) -> dict[str, Any]:
        return {"worker": self.worker, "seconds down": round(self.down_s, 1), "seconds to settle": round(self.settle_s, 1),
                "tasks moved": self.tasks_moved, "plugins before": self.plugins_before, "plugins after": self.plugins_after,
                "added": ", ".join(self.added) or "—", "removed": ", ".join(self.removed) or "—",
                "version after": self.version_after}


@dataclass
class RollReport:
    workers: list[WorkerRoll] = field(default_factory=list)
    skipped: str | None = None


def problems(statuses: Mapping[str, ConnectorStatus]) -> list[str]:
    """Why the cluster is not settled, one line per connector or task not in its declared state."""
    out = []
    for name, status in sorted(statuses.items()):
        if status.state not in DECLARED_STATES:
            out.append(f"connector {name} is {status.state} on worker {status.worker_id}")
            continue
        if status.state == "RUNNING" and not status.tasks:
            out.append(f"connector {name} is RUNNING with no task assigned yet")
        expected = "RUNNING" if status.state == "RUNNING" else status.state
        out += [f"task {name}/{t.id} is {t.state} on worker {t.worker_id} (connector {status.state})"
                for t in status.tasks if t.state != expected]
    return out


def placement(statuses: Mapping[str, ConnectorStatus]) -> dict[str, str]:
    """Which worker runs each connector instance and each task: ``{"name": w, "name/0": w, ...}``."""
    out = {}
    for name, status in statuses.items():
        out[name] = status.worker_id
        out.update({f"{name}/{t.id}": t.worker_id for t in status.tasks})
    return out


def moved(before: Mapping[str, str], after: Mapping[str, str]) -> int:
    """Tasks (``name/id``) running on another worker than before, or new / gone."""
    keys = {k for k in (*before, *after) if "/" in k}
    return sum(before.get(k) != after.get(k) for k in keys)


class Roll:
    """The roll's state machine over a :class:`Cluster` and a :class:`WorkerRestarter`; ``clock`` and
    ``sleep`` are injectable so that a unit test runs it without waiting."""

    def __init__(self, plan: RollPlan, cluster: Cluster, restarter: WorkerRestarter, *,
                 log: Callable[[str], None] = print, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.plan, self.cluster, self.restarter = plan, cluster, restarter
        self.log, self.clock, self.sleep = log, clock, sleep
        self.report = RollReport()
        self._moves, self._last = 0, {}  # task moves seen during the current worker's roll, the last placement

    def run(self) -> RollReport:
        self._preflight()
        if self.report.skipped:
            self.log(f"roll skipped: {self.report.skipped}")
            return self.report
        for number, url in enumerate(self.plan.urls, start=1):
            self.report.workers.append(self._roll_one(number, url))
        return self.report

    def _preflight(self) -> None:
        silent = [worker_id_of(u) for u in self.plan.urls if self.cluster.answers(u) is None]
        if silent:
            raise RollRefused(f"worker(s) {', '.join(silent)} do not answer; a roll restarts one worker while the others "
                              "run its tasks, so every worker must be up first (nothing was restarted)")
        trouble = problems(self.cluster.statuses())
        if trouble:
            raise RollRefused(f"the cluster is not healthy: {'; '.join(trouble)}; fix it first (restart_failed_connectors, "
                              "connector_status_report) — nothing was restarted")
        if self.plan.only_if_missing and self.plan.plugins:
            lacking = {worker_id_of(u): sorted(set(self.plan.plugins) - (self.cluster.plugins(u) or set()))
                       for u in self.plan.urls}
            if not any(lacking.values()):
                self.report.skipped = f"every worker already lists {', '.join(self.plan.plugins)} (only_if_missing)"

    def _roll_one(self, number: int, url: str) -> WorkerRoll:
        worker = worker_id_of(url)
        statuses = self.cluster.statuses()
        trouble = problems(statuses)
        if trouble:
            self._stop(f"before restarting worker {worker}: the cluster is not healthy: {'; '.join(trouble)}")
        before, plugins_before = placement(statuses), self.cluster.plugins(url) or set()
        self.log(f"worker {worker} ({number}/{len(self.plan.urls)}): restarting through {self.restarter.describe()}; "
                 f"it runs {sum(w == worker for k, w in before.items() if '/' in k)} task(s)")
        self._moves, self._last = 0, before
        started = self.clock()
        self._restart(worker, url, number)
        info = self._wait(lambda: self._answers_watching(url), self.plan.worker_deadline_s,
                          f"worker {worker} did not answer GET / within {self.plan.worker_deadline_s:.0f} s of its restart")
        wanted = set(self.plan.plugins)
        plugins_after = self._wait(lambda: (found := self.cluster.plugins(url)) is not None and wanted <= found and found,
                                   self.plan.worker_deadline_s,
                                   f"worker {worker} answers again but does not list {', '.join(sorted(wanted))} within "
                                   f"{self.plan.worker_deadline_s:.0f} s (is the plugin in that worker's plugin.path / image?)")
        down_s = self.clock() - started
        self.log(f"worker {worker}: back after {down_s:.1f} s, {len(plugins_after)} plugin(s), version {info.get('version')}")
        settled_at = self.clock()
        self._settle(worker)
        settle_s = self.clock() - settled_at
        roll = WorkerRoll(worker, down_s, settle_s, self._moves, len(plugins_before), len(plugins_after),
                          tuple(sorted(plugins_after - plugins_before)), tuple(sorted(plugins_before - plugins_after)),
                          str(info.get("version")))
        self.log(f"worker {worker}: settled {settle_s:.1f} s later, {roll.tasks_moved} task move(s) seen; "
                 f"added {list(roll.added)}, removed {list(roll.removed)}")
        return roll

    def _restart(self, worker: str, url: str, number: int) -> None:
        """Run the restarter in a thread (a command may block until the worker is back) and watch the
        placement meanwhile: a task that moves to another worker and back is two moves."""
        failed: list[BaseException] = []

        def restart() -> None:
            try:
                self.restarter.restart(url, number)
            except Exception as exc:  # noqa: BLE001 - raised below, in the roll's thread, naming the worker
                failed.append(exc)

        thread = threading.Thread(target=restart, name=f"restart {worker}", daemon=True)
        thread.start()
        while thread.is_alive():
            thread.join(self.plan.poll_s)
            try:
                self._observe(self.cluster.statuses())
            except ConnectError as exc:  # a rebalance or the restarted worker answering: the next poll reads again
                self.log(f"worker {worker} restarting: statuses not readable this time ({type(exc).__name__}: {exc})")
        if failed:
            self._stop(f"restarting worker {worker} failed: {failed[0]}", cause=failed[0])

    def _answers_watching(self, url: str) -> dict[str, Any] | None:
        """The worker's ``GET /`` (None while it is down), the placement observed first: a restarter that
        returns at once (a pod deleted) leaves the whole outage to this wait."""
        self._observe(self.cluster.statuses())
        return self.cluster.answers(url)

    def _observe(self, statuses: Mapping[str, ConnectorStatus]) -> dict[str, str]:
        now = placement(statuses)
        self._moves += moved(self._last, now)
        self._last = now
        return now

    def _settle(self, worker: str) -> dict[str, str]:
        """Every connector and task in its declared state and the placement unchanged for ``settle_s``."""
        seen: dict[str, Any] = {"placement": None, "since": self.clock(), "trouble": []}

        def settled() -> dict[str, str] | None:
            statuses = self.cluster.statuses()
            now, seen["trouble"] = self._observe(statuses), problems(statuses)
            if seen["trouble"] or now != seen["placement"]:
                seen.update(placement=now, since=self.clock())
                return None
            return now if self.clock() - seen["since"] >= self.plan.settle_s else None

        return self._wait(settled, self.plan.settle_deadline_s,
                          lambda: f"after worker {worker}'s restart the tasks did not settle within "
                          f"{self.plan.settle_deadline_s:.0f} s ({'; '.join(seen['trouble']) or 'placement still changing'})")

    def _wait(self, probe: Callable[[], Any], timeout: float, failure: str | Callable[[], str]) -> Any:
        """``probe()`` until it gives something other than None or False (an empty placement — a cluster
        without connectors — is an answer), or stop the roll at the deadline with ``failure``."""
        deadline = self.clock() + timeout
        while True:
            value = probe()
            if value is not None and value is not False:
                return value
            if self.clock() >= deadline:
                self._stop(failure() if callable(failure) else failure)
            self.sleep(self.plan.poll_s)

    def _stop(self, why: str, cause: BaseException | None = None) -> None:
        rest = [worker_id_of(u) for u in self.plan.urls[len(self.report.workers) + 1:]]
        raise RollStopped(f"{why}; the roll stopped{' — not restarted: ' + ', '.join(rest) if rest else ''}",
                          self.report.workers) from cause

