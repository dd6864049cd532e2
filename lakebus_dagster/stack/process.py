"""Start, find and stop the stack's JVMs, touching no process the stack did not start.

Every JVM is started with ``-Dlakebus.service=<name>`` and ``-Dlakebus.state=<state dir>`` and its
pid is written to ``<state>/run/<name>.pid``. A pid is trusted only if the live process's command
line still carries both markers, so a stale pid file (after a reboot, say) never makes ``down`` kill
an unrelated process that happens to reuse the pid.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import psutil

from lakebus_dagster.stack.local_settings import StackSettings


def markers(settings: StackSettings, service: str) -> list[str]:
    return [f"-Dlakebus.service={service}", f"-Dlakebus.state={settings.state_dir}"]


def native_markers(settings: StackSettings, service: str) -> list[str]:
    """The markers of a native server (PostgreSQL): the same two, as custom settings
    (``--lakebus.service=…``), which the server accepts and ignores. :func:`find_process` takes
    either form."""
    return ["--" + m.removeprefix("-D") for m in markers(settings, service)]


def pid_file(settings: StackSettings, service: str) -> Path:
    return settings.run_dir / f"{service}.pid"


def log_file(settings: StackSettings, service: str) -> Path:
    return settings.logs_dir / f"{service}.log"


def tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a log file (``""`` for ``lines <= 0``)."""
    if lines <= 0:  # lines[-0:] would be the whole file
        return ""
    try:
        return "".join(path.read_text(errors="replace").splitlines(keepends=True)[-lines:])
    except FileNotFoundError:
        return "(no log file)"


def find_process(settings: StackSettings, service: str, expected: Sequence[str] | None = None) -> psutil.Process | None:
    """The live process this stack started for ``service`` (its command line carries ``expected``,
    by default the JVM markers), or None."""
    path = pid_file(settings, service)
    try:
        pid = int(path.read_text().strip())
        proc = psutil.Process(pid)
        cmdline = proc.cmdline()
    except (FileNotFoundError, ValueError, psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    if expected is None:
        carries = all(m in cmdline for m in markers(settings, service)) or all(
            m in cmdline for m in native_markers(settings, service))
    else:
        carries = all(m in cmdline for m in expected)
    if not carries or proc.status() == psutil.STATUS_ZOMBIE:
        return None
    return proc


def spawn(
    settings: StackSettings,
    service: str,
    argv: Sequence[str],
    env: Mapping[str, str],
) -> psutil.Process:
    """Start ``argv`` detached (own session, so Ctrl-C in a terminal does not reach it), logging to its file."""
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    log = log_file(settings, service).open("ab")
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=dict(env),
        cwd=str(settings.state_dir),
        start_new_session=True,
        close_fds=True,
        # a parent started with `&` from a script ignores SIGINT, and children inherit that;
        # `dagster dev` maps SIGTERM onto its SIGINT handling, so restore the default first
        preexec_fn=_default_sigint,
    )
    log.close()
    pid_file(settings, service).write_text(f"{proc.pid}\n")
    return psutil.Process(proc.pid)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def stop(settings: StackSettings, service: str, *, timeout: float = 45.0, expected: Sequence[str] | None = None,
         sig: int = signal.SIGTERM) -> bool:
    """Signal the service's process group (``sig``, SIGTERM by default; then SIGKILL after ``timeout``).
    True if one was running.

    Each service was started as its own session leader, so its group holds exactly the processes
    it spawned (``dagster dev`` starts a webserver, a daemon and code servers) and nothing else.
    """
    proc = find_process(settings, service, expected)
    path = pid_file(settings, service)
    if proc is None:
        path.unlink(missing_ok=True)
        return False
    group = [proc, *proc.children(recursive=True)]
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    _, alive = psutil.wait_procs(group, timeout=timeout)
    for leftover in alive:
        try:
            leftover.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=10)
    path.unlink(missing_ok=True)
    return True


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def rss_bytes(proc: psutil.Process) -> int:
    try:
        return proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))
    except psutil.Error:
        return 0


def wait_until(predicate, *, timeout: float, interval: float = 0.5, alive: psutil.Process | None = None) -> bool:
    """Poll ``predicate`` until it returns truthy or ``timeout`` passes; stop early if ``alive`` died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except Exception:  # noqa: BLE001 - a health probe failing just means "not yet"
            pass
        if alive is not None and not is_alive(alive):
            return False
        time.sleep(interval)
    return False


def is_alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def environ_for_jvm(extra: Mapping[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env
