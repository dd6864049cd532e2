"""up / down / restart / status / logs for the local stack.

``up`` binds the service table (:mod:`.services`) to the settings and hands it to the engine
(:mod:`.engine`); the rest reads the table's names: ``down`` stops them in reverse order (the
Dagster UI first, :mod:`.ui_process`), ``status`` shows the profile's services and any other that
still runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from lakebus_dagster.settings import load_local_secrets
from lakebus_dagster.stack import engine, jmx_exporter, process, ui_process
from lakebus_dagster.stack.engine import say as _say
from lakebus_dagster.stack.errors import StackError
from lakebus_dagster.stack.jars import ensure_jars, jars_dir
from lakebus_dagster.stack.local_settings import StackSettings
from lakebus_dagster.stack.secrets import create_local_secrets
from lakebus_dagster.stack.tls import ensure_tls
from lakebus_dagster.stack.services import SERVICE_NAMES, STOP_SIGNALS, Service, build_services, profile_service_names
from lakebus_dagster.stack.status_table import ServiceState, print_status

__all__ = ["SERVICE_ORDER", "ServiceState", "down", "find_java", "logs", "print_status", "restart", "restart_worker", "status", "up"]

MIN_JAVA = 17


def find_java() -> str:
    """``$JAVA_HOME/bin/java`` or ``java`` on PATH, at least version 17, or a clear error."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not candidate or not Path(candidate).exists():
        raise StackError("java: no Java runtime found (set JAVA_HOME or put `java` on PATH); the stack needs Java 17+")
    out = subprocess.run([candidate, "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "(\d+)', out)
    if not match or int(match.group(1)) < MIN_JAVA:
        raise StackError(f"java: {candidate} reports {out.splitlines()[0] if out else 'nothing'}; the stack needs Java {MIN_JAVA}+")
    return candidate


def _services(settings: StackSettings, *, create_secrets: bool) -> tuple[list[Service], Path, str]:
    (create_local_secrets if create_secrets else load_local_secrets)(settings)
    if create_secrets and settings.secured:
        ensure_tls(settings)  # the CA once, the server certificate when missing or stale (stack/tls.py)
    java = find_java()
    jars = ensure_jars(settings) if create_secrets else jars_dir(settings)
    return build_services(settings, jars, java), jars, java


def _check_paths(settings: StackSettings) -> None:
    if " " in str(settings.state_dir):
        # The Iceberg sink splits `sun.java.command` on spaces to find the worker properties file.
        raise StackError(f"connect: the state dir {settings.state_dir} contains a space; set LAKEBUS_STATE_DIR to a path without spaces")


def up(settings: StackSettings) -> list[str]:
    """Start every service that is not already running; return the names actually started."""
    _check_paths(settings)
    started_at = time.monotonic()
    services, jars, java = _services(settings, create_secrets=True)
    started = engine.start_all(settings, services, jars, java)
    _say(f"stack up in {time.monotonic() - started_at:.1f}s ({len(started)} started)")
    return started


#: every service of every profile, in start order
SERVICE_ORDER = SERVICE_NAMES


def down(settings: StackSettings) -> list[str]:
    """Stop every service this stack started (Connect first), and nothing else."""
    stopped = []
    # the Dagster UI runs on the stack, so it goes first
    if process.stop(settings, ui_process.SERVICE, expected=ui_process.expected_cmdline()):
        _say(f"{ui_process.SERVICE:<13} stopped")
        stopped.append(ui_process.SERVICE)
    for name in reversed(SERVICE_ORDER):
        proc = process.find_process(settings, name)
        if proc is None:
            process.pid_file(settings, name).unlink(missing_ok=True)
            continue
        _say(f"{name:<13} stopping (pid {proc.pid}) ...")
        process.stop(settings, name, sig=STOP_SIGNALS[name])
        stopped.append(name)
    _say("stack down" if stopped else "nothing was running")
    return stopped


def restart(settings: StackSettings, name: str, stopped_s: float = 0.0) -> list[str]:
    """Stop one service (if running) and bring the stack up again, leaving the others running.

    For picking up new jars or config in one service (e.g. Connect after lakebus's plugin changed)
    without stopping the broker, catalog and S3 that other work depends on. ``stopped_s`` keeps it
    stopped that long first (a worker rescheduled slower than the group waits for it).
    """
    if name not in SERVICE_ORDER:
        raise StackError(f"restart: unknown service {name!r}; one of {', '.join(SERVICE_ORDER)}")
    proc = process.find_process(settings, name)
    if proc is not None:
        _say(f"{name:<13} stopping (pid {proc.pid}) for a restart ...")
        process.stop(settings, name, sig=STOP_SIGNALS[name])
    if stopped_s > 0:
        _say(f"{name:<13} stays stopped for {stopped_s:.0f}s")
        time.sleep(stopped_s)
    return up(settings)


def restart_worker(settings: StackSettings, url: str, stopped_s: float = 0.0) -> list[str]:
    """Restart the Connect worker of this stack that serves ``url`` (a rolling restart's local
    restarter: :mod:`lakebus_dagster.connect.restarters`); the other workers keep running."""
    from lakebus_dagster.stack.kafka_services import worker_name

    port = urlsplit(url).port
    numbers = [n for n in range(1, settings.connect_workers + 1) if settings.connect_port(n) == port]
    if not numbers:
        ports = ", ".join(str(settings.connect_port(n)) for n in range(1, settings.connect_workers + 1))
        raise StackError(f"restart-worker: {url} is not a Connect worker of this stack (its workers listen on {ports})")
    return restart(settings, worker_name(numbers[0]), stopped_s)


def status(settings: StackSettings) -> list[ServiceState]:
    services, _, _ = _services(settings, create_secrets=False) if settings.secrets_file.exists() else ([], None, None)
    by_name = {s.name: s for s in services}
    states = []
    for name in SERVICE_ORDER:
        proc = process.find_process(settings, name)
        svc = by_name.get(name)
        if proc is None and name not in profile_service_names(settings):
            continue  # not part of this profile, and not running
        states.append(
            ServiceState(
                name=name,
                port=svc.port if svc else 0,
                pid=proc.pid if proc else None,
                rss=process.rss_bytes(proc) if proc else 0,
                healthy=bool(proc and svc and engine.healthy(svc)),
                log=process.log_file(settings, name),
                metrics=jmx_exporter.metrics_url(settings.host, svc.metrics_port) if svc and svc.metrics_port else "",
            )
        )
    return states


def logs(settings: StackSettings, names: list[str], lines: int) -> None:
    """The last ``lines`` lines of each service's log (default: every service, and the Dagster UI's
    log when it has one); ``lines=0`` prints nothing."""
    if lines <= 0:
        return
    names = names or [*SERVICE_ORDER, *(["dagster"] if process.log_file(settings, "dagster").exists() else [])]
    for name in names:
        path = process.log_file(settings, name)
        print(f"==> {path} <==")
        sys.stdout.write(process.tail(path, lines))
