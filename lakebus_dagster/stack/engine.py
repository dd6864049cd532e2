"""The engine that starts the service table: each service as soon as the services it depends on
are healthy, several at once where the dependencies allow.

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
    """Start every service that is not already running, each as soon as what it depends on is
    healthy; return the names actually started.

    The Spark master and worker need nothing of the ingest, so they start beside S3 and the
    brokers: the stack is up after its longest chain of dependencies (measured: the Spark chain),
    not after the sum of every start-up."""
    started: list[str] = []
    _check_ports(settings, services)
    needs = prerequisites(services)
    pending = list(services)
    booting: list[tuple[Service, psutil.Process, float]] = []
    ready: set[str] = set()
    while pending or booting:
        for svc in [s for s in pending if needs[s.name] <= ready]:
            pending.remove(svc)
            proc = _start(settings, svc, jars, java, started)
            if proc is None:  # already up and healthy
                ready.add(svc.name)
            else:
                booting.append((svc, proc, time.monotonic()))
        for entry in list(booting):
            svc, proc, t0 = entry
            if healthy(svc):
                booting.remove(entry)
                say(f"{svc.name:<13} healthy after {time.monotonic() - t0:.1f}s")
                _hook(svc, svc.on_ready)
                _hook(svc, svc.after_start)
                ready.add(svc.name)
            elif not process.is_alive(proc) or time.monotonic() - t0 > svc.timeout:
                log = process.log_file(settings, svc.name)
                state = "exited" if not process.is_alive(proc) else f"did not become healthy within {svc.timeout:.0f}s"
                source = f"; started from {svc.source}" if svc.source else ""
                raise StackError(f"{svc.name}: {state} ({svc.health_text}){source}; see {log}\n{process.tail(log)}")
        if pending and not booting and not any(needs[s.name] <= ready for s in pending):
            raise StackError(f"up: {', '.join(s.name for s in pending)} wait for services that are not starting")
        if booting and not any(needs[s.name] <= ready for s in pending):
            time.sleep(POLL_S)
    return started


def _check_ports(settings: StackSettings, services: list[Service]) -> None:
    """Before anything starts: a port another process holds fails ``up`` naming the service (with
    services starting side by side, a late one's busy port would otherwise surface only after the
    others were started, or behind another service's failure)."""
    for svc in services:
        if process.find_process(settings, svc.name) is None:
            _check_free(settings, svc)


def _check_free(settings: StackSettings, svc: Service) -> None:
    """Its port and its metrics port (a JVM whose exporter agent cannot listen does not start)."""
    for port in (svc.port, *([svc.metrics_port] if svc.metrics_port else [])):
        if process.port_in_use(settings.host, port):
            raise _port_taken(settings, svc, port)


def _port_taken(settings: StackSettings, svc: Service, port: int) -> StackError:
    what = "metrics port" if port == svc.metrics_port else "port"
    return StackError(
        f"{svc.name}: {what} {settings.host}:{port} is already in use by a process this stack did not start; "
        f"stop it or set the port's LAKEBUS_*_PORT variable (another profile's stack? `lakebus stack down` "
        f"with its LAKEBUS_PROFILE)"
    )


#: how often ``up`` probes the services it waits for
POLL_S = 0.5


def prerequisites(services: list[Service]) -> dict[str, set[str]]:
    """For each service, the names of the services that must be healthy before it starts: every
    replica of each kind it depends on, and, for replicas not started together, the replica
    before it. Members of a start group (a KRaft quorum's brokers, a Connect cluster's workers)
    need nothing of each other: they are all started before any is waited for."""
    by_kind: dict[str, list[str]] = {}
    needs: dict[str, set[str]] = {}
    for svc in services:
        needs[svc.name] = {name for kind in svc.depends_on for name in by_kind.get(kind, [])}
        siblings = by_kind.setdefault(svc.spec or svc.name, [])
        if siblings and not svc.start_group:
            needs[svc.name].add(siblings[-1])
        siblings.append(svc.name)
    return needs


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
    _check_free(settings, svc)  # taken since the check before the start
    if svc.prepare:
        svc.prepare()
    argv = svc.argv(settings, jars, java, process.markers(settings, svc.name))
    proc = process.spawn(settings, svc.name, argv, process.environ_for_jvm(svc.env))
    started.append(svc.name)
    say(f"{svc.name:<13} starting (pid {proc.pid}), waiting until {svc.health_text} ...")
    return proc


def _hook(svc: Service, hook: Callable[[], str | None] | None) -> None:
    """Run one of the service's hooks (idempotent, e.g. the secured broker's ACLs) and print its line."""
    if hook and (said := hook()):
        say(f"{svc.name:<13} {said}")


def healthy(svc: Service) -> bool:
    try:
        return bool(svc.health())
    except Exception:  # noqa: BLE001 - any failure of a probe means "not healthy"
        return False
