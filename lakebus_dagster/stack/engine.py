"""The engine that starts the service table: in order, each service healthy before the next starts.

It knows no service by name: what to run, what to write first, what to wait for and what to do
once a service answers all come from the :class:`~lakebus_dagster.stack.service.Service` (a bound
row of :mod:`.services`). The members of a start group (a KRaft quorum's brokers, a Connect
cluster's workers) are all started before any is waited for. A service that already runs is
not started again: ``up`` is safe to repeat.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import psutil

from lakebus_dagster.stack import process
from lakebus_dagster.stack.errors import StackError
from lakebus_dagster.stack.local_settings import StackSettings
from lakebus_dagster.stack.service import Service


def say(msg: str) -> None:
    print(f"[stack] {msg}", flush=True)


def start_all(settings: StackSettings, services: list[Service], jars: Path, java: str) -> list[str]:
    """Start every service that is not already running, in order; return the names actually started."""
    started: list[str] = []
    for batch in batches(services):
        # a start group's members are all started before any is waited for (see Service.start_group)
        waiting = [(svc, _start(settings, svc, jars, java, started)) for svc in batch]
        for svc, proc in waiting:
            _wait_healthy(settings, svc, proc)
    return started


def batches(services: list[Service]) -> list[list[Service]]:
    """Consecutive services of one start group form one batch; every other service is a batch of its own."""
    result: list[list[Service]] = []
    for svc in services:
        if svc.start_group and result and result[-1][0].start_group == svc.start_group:
            result[-1].append(svc)
        else:
            result.append([svc])
    return result


def _start(settings: StackSettings, svc: Service, jars: Path, java: str, started: list[str]) -> psutil.Process | None:
    """The process to wait for: the one already there, or a new one (its name added to ``started``);
    None when the service already runs and is healthy."""
    proc = process.find_process(settings, svc.name)
    if proc is not None:
        if healthy(svc):
            say(f"{svc.name:<13} already up (pid {proc.pid})")
            _hook(svc, svc.on_ready)
            return None
        say(f"{svc.name:<13} running (pid {proc.pid}) but not healthy yet; waiting")
        return proc
    if process.port_in_use(settings.host, svc.port):
        raise StackError(
            f"{svc.name}: port {settings.host}:{svc.port} is already in use by a process this stack did not start; "
            f"stop it or set the port's LAKEBUS_*_PORT variable (another profile's stack? `lakebus stack down` "
            f"with its LAKEBUS_PROFILE)"
        )
    if svc.prepare:
        svc.prepare()
    argv = svc.argv(settings, jars, java, process.markers(settings, svc.name))
    proc = process.spawn(settings, svc.name, argv, process.environ_for_jvm(svc.env))
    started.append(svc.name)
    say(f"{svc.name:<13} starting (pid {proc.pid}), waiting until {svc.health_text} ...")
    return proc


def _wait_healthy(settings: StackSettings, svc: Service, proc: psutil.Process | None) -> None:
    if proc is None:  # already up and healthy
        return
    t0 = time.monotonic()
    if not process.wait_until(lambda: healthy(svc), timeout=svc.timeout, alive=proc):
        log = process.log_file(settings, svc.name)
        state = "exited" if not process.is_alive(proc) else f"did not become healthy within {svc.timeout:.0f}s"
        raise StackError(f"{svc.name}: {state} ({svc.health_text}); see {log}\n{process.tail(log)}")
    say(f"{svc.name:<13} healthy after {time.monotonic() - t0:.1f}s")
    _hook(svc, svc.on_ready)
    _hook(svc, svc.after_start)


def _hook(svc: Service, hook: Callable[[], str | None] | None) -> None:
    """Run one of the service's hooks (idempotent, e.g. the secured broker's ACLs) and print its line."""
    if hook and (said := hook()):
        say(f"{svc.name:<13} {said}")


def healthy(svc: Service) -> bool:
    try:
        return bool(svc.health())
    except Exception:  # noqa: BLE001 - any failure of a probe means "not healthy"
        return False
