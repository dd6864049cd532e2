"""``python -m lakebus_dagster.stack.dagster_ui up|down|status``: the Dagster UI (webserver + daemon)
on the local stack, in the background, started at most once.

``dagster dev`` runs the webserver, the daemon (schedules, sensors, run queue) and the code server.
Its instance lives in ``<state>/dagster_home`` so runs and sensor cursors survive a restart; its
``dagster.yaml`` is deploy/dagster.yaml with a declared overlay (:func:`instance_config`).

:func:`up` and :func:`down` also serve callers that need an instance of their own (the UI tests):
another port, DAGSTER_HOME, pid-file service name and extra environment for the code location.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psutil
import requests

from lakebus_dagster.settings import load_local_secrets
from lakebus_dagster.stack import process
from lakebus_dagster.stack.deploy_files import INSTANCE, flatten
from lakebus_dagster.stack.errors import StackError
from lakebus_dagster.stack.local_settings import StackSettings, load_stack_settings
from lakebus_dagster.stack.spark_services import SPARK_CONNECT_CORES
from lakebus_dagster.stack.status_table import ServiceState
from lakebus_dagster.stack.ui_process import SERVICE, WORKSPACE, expected_cmdline

__all__ = ["SERVICE", "WORKSPACE", "check_instance", "configure", "dagster_home", "down", "expected_cmdline",
           "instance_config", "main", "state", "ui_port", "ui_url", "up", "write_instance_config"]


def ui_port() -> int:
    """LAKEBUS_DAGSTER_PORT (checked like every port: 1-65535), default 3000."""
    return load_stack_settings().dagster_port


def ui_url(settings: StackSettings, port: int | None = None) -> str:
    return f"http://{settings.host}:{port or ui_port()}"


def dagster_home(settings: StackSettings) -> Path:
    return settings.state_dir / "dagster_home"


#: the local instance's pool ``spark`` (every DWS / maintenance step): at most as many Spark steps at
#: once as the local Spark Connect server's executor has cores (deploy/: values.yaml's spark_connect.cores)
LOCAL_SPARK_POOL_LIMIT = SPARK_CONNECT_CORES


def instance_config(home: Path) -> dict[str, Any]:
    """The local instance: deploy/dagster.yaml with its declared overlay only
    (:data:`lakebus_dagster.stack.deploy_files.INSTANCE`): SQLite storage and run logs on files under
    ``home`` instead of PostgreSQL and S3, the ``spark`` pool at the local server's cores. The run
    queue, the coordinator, run retries and monitoring, the sensors' threads, retention: the file's."""
    return INSTANCE.instance({
        "storage": {"sqlite": {"base_dir": str(home)}},
        "compute_logs": {"module": "dagster.core.storage.local_compute_log_manager", "class": "LocalComputeLogManager",
                         "config": {"base_dir": str(home / "storage")}},
        "concurrency.pools.default_limit": LOCAL_SPARK_POOL_LIMIT,
    })


def write_instance_config(home: Path, instance_yaml: str | None = None) -> Path:
    """``<home>/dagster.yaml``: :func:`instance_config`, rewritten on every start (edit deploy/dagster.yaml's
    template, not this file), or ``instance_yaml`` as given (a test running another instance, e.g.
    deploy/dagster.yaml's own PostgreSQL storage)."""
    import yaml

    path = home / "dagster.yaml"
    if instance_yaml is None:
        config = instance_config(home)
        base = flatten(yaml.safe_load(INSTANCE.path.read_text()))
        instance_yaml = INSTANCE.header(flatten(config), base) + yaml.safe_dump(config, sort_keys=False)
    path.write_text(instance_yaml)
    return path


def check_instance(home: Path) -> None:
    """Load ``<home>/dagster.yaml`` as the daemon will, its run coordinator, launcher and log manager
    too (Dagster loads them on first use: a broken class would only stop the daemon's queue later);
    raise :class:`StackError` in one line naming deploy/dagster.yaml when Dagster refuses it."""
    import dagster as dg

    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            for part in ("run_coordinator", "run_launcher", "compute_log_manager"):
                getattr(instance, part)
    except Exception as exc:  # noqa: BLE001 - whatever Dagster raises, said in one line with the file
        reason = " ".join(str(exc).split())[:400]
        raise StackError(f"{INSTANCE.name} (as {home / 'dagster.yaml'}): Dagster refuses it: {reason}") from None


def _healthy(settings: StackSettings, port: int | None = None) -> bool:
    try:
        return requests.get(f"{ui_url(settings, port)}/server_info", timeout=2).status_code == 200
    except requests.RequestException:
        return False


#: Dagster's timeout for a call to the code location (its default: 60 s), unless the environment sets
#: it. On the 2-core machine, with the stack's JVMs and a run's Spark step busy, the daemon's call
#: that dequeues a run timed out after 60 s (DEADLINE_EXCEEDED) and Dagster failed the run unstarted.
GRPC_TIMEOUTS = {"DAGSTER_GRPC_TIMEOUT_SECONDS": "180"}


def up(
    settings: StackSettings,
    timeout: float = 180.0,
    *,
    port: int | None = None,
    home: Path | None = None,
    service: str = SERVICE,
    env: Mapping[str, str] | None = None,
    instance_yaml: str | None = None,
) -> psutil.Process:
    """Start ``dagster dev`` (unless ``service`` already runs) and wait for ``/server_info``.

    Defaults: the demo instance (LAKEBUS_DAGSTER_PORT or 3000, ``<state>/dagster_home``). ``env`` is
    added to this process's environment for the webserver, the daemon and the code location;
    ``instance_yaml`` replaces the local instance (:func:`write_instance_config`).
    """
    load_local_secrets(settings)
    port = port or ui_port()
    url, log = ui_url(settings, port), process.log_file(settings, service)
    proc = process.find_process(settings, service, expected_cmdline())  # the pid file names the service
    if proc is not None:
        print(f"[dagster] already running (pid {proc.pid}) at {url}", flush=True)
    else:
        if process.port_in_use(settings.host, port):
            raise StackError(f"port {port} (LAKEBUS_DAGSTER_PORT) is in use by another process, not this stack's "
                             "Dagster UI; stop that process or set LAKEBUS_DAGSTER_PORT to a free port")
        home = home or dagster_home(settings)
        home.mkdir(parents=True, exist_ok=True)
        write_instance_config(home, instance_yaml)
        if instance_yaml is None:
            check_instance(home)
        argv = [sys.executable, "-m", "dagster", "dev", "-w", str(WORKSPACE), "-h", settings.host, "-p", str(port)]
        proc = process.spawn(settings, service, argv, {**GRPC_TIMEOUTS, **os.environ, **(env or {}), "DAGSTER_HOME": str(home)})
        print(f"[dagster] starting webserver + daemon (pid {proc.pid}), log {log} ...", flush=True)
    t0 = time.monotonic()
    if not process.wait_until(lambda: _healthy(settings, port), timeout=timeout, alive=proc):
        source = f" (its instance: {INSTANCE.name} as {home / 'dagster.yaml'})" if instance_yaml is None and home else ""
        raise SystemExit(f"[dagster] ERROR the UI did not come up within {timeout:.0f}s{source}; see {log}")
    print(f"[dagster] UI ready after {time.monotonic() - t0:.1f}s: {url}", flush=True)
    return proc


def state(settings: StackSettings) -> ServiceState:
    """The demo UI as a ``stack status`` row: pid, port, health (``/server_info``), memory, log."""
    proc = process.find_process(settings, SERVICE, expected_cmdline())
    return ServiceState(
        name=SERVICE,
        port=ui_port(),
        pid=proc.pid if proc else None,
        rss=process.rss_bytes(proc) if proc else 0,
        healthy=bool(proc and _healthy(settings)),
        log=process.log_file(settings, SERVICE),
    )


def down(settings: StackSettings, *, port: int | None = None, service: str = SERVICE) -> bool:
    """Stop ``service``'s whole process group (webserver, daemon, code servers, run workers)."""
    stopped = process.stop(settings, service, expected=expected_cmdline(port))
    print(f"[dagster] {'stopped' if stopped else 'was not running'}", flush=True)
    return stopped


EXAMPLES = """\
  lakebus ui up        # webserver + daemon on http://127.0.0.1:3000 (LAKEBUS_DAGSTER_PORT); needs the stack
  lakebus ui status    # exit 1 when it is not running
  lakebus ui down
"""


def configure(p: argparse.ArgumentParser) -> None:
    """Add ``up`` / ``down`` / ``status`` (shared by ``lakebus ui`` and ``python -m``)."""
    sub = p.add_subparsers(dest="command", metavar="{up,down,status}")
    sub.add_parser("up", help="start the webserver + daemon in the background (at most once) and wait until it answers"
                   ).set_defaults(func=lambda args: _up())
    sub.add_parser("down", help="stop the UI's whole process group").set_defaults(func=lambda args: _down())
    sub.add_parser("status", help="running or not (exit 1 when not)").set_defaults(func=lambda args: _status())


def _up() -> int:
    up(load_stack_settings())
    return 0


def _down() -> int:
    down(load_stack_settings())
    return 0


def _status() -> int:
    settings = load_stack_settings()
    proc = process.find_process(settings, SERVICE, expected_cmdline())
    print(f"[dagster] {'running (pid %d) at %s' % (proc.pid, ui_url(settings)) if proc else 'not running (start it: lakebus ui up)'}")
    return 0 if proc else 1


def main(argv: list[str] | None = None) -> int:
    from lakebus_dagster.commandline import parser, run_command

    p = parser("python -m lakebus_dagster.stack.dagster_ui", "The Dagster UI (webserver + daemon) on the local stack.", EXAMPLES)
    configure(p)
    return run_command(p, argv)


if __name__ == "__main__":
    sys.exit(main())
