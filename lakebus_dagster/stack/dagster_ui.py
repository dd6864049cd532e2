"""``python -m lakebus_dagster.stack.dagster_ui up|down|status``: the Dagster UI (webserver + daemon)
on the local stack, in the background, started at most once.

``dagster dev`` runs the webserver, the daemon (schedules, sensors, run queue) and the code server.
Its instance lives in ``<state>/dagster_home`` so runs and sensor cursors survive a restart.

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

import psutil
import requests

from lakebus_dagster.settings import REPO_ROOT, Settings, load_local_secrets, load_settings
from lakebus_dagster.stack import process

SERVICE = "dagster"
WORKSPACE = REPO_ROOT / "workspace.yaml"


def ui_port() -> int:
    """LAKEBUS_DAGSTER_PORT (checked like every port: 1-65535), default 3000."""
    return load_settings().dagster_port


def ui_url(settings: Settings, port: int | None = None) -> str:
    return f"http://{settings.host}:{port or ui_port()}"


def dagster_home(settings: Settings) -> Path:
    return settings.state_dir / "dagster_home"


def write_instance_config(home: Path) -> Path:
    """``<home>/dagster.yaml`` with the UI's newsletter dialog turned off (``nux: enabled: false``).

    Other keys already in the file are kept, so a hand-edited instance config survives ``up``.
    """
    import yaml

    path = home / "dagster.yaml"
    config = (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}
    config["nux"] = {**(config.get("nux") or {}), "enabled": False}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def expected_cmdline(port: int | None = None) -> list[str]:
    """The markers of our ``dagster dev`` command line; with ``port``, of the instance on that port."""
    return ["dev", str(WORKSPACE)] + ([str(port)] if port else [])


def _healthy(settings: Settings, port: int | None = None) -> bool:
    try:
        return requests.get(f"{ui_url(settings, port)}/server_info", timeout=2).status_code == 200
    except requests.RequestException:
        return False


def up(
    settings: Settings,
    timeout: float = 180.0,
    *,
    port: int | None = None,
    home: Path | None = None,
    service: str = SERVICE,
    env: Mapping[str, str] | None = None,
) -> psutil.Process:
    """Start ``dagster dev`` (unless ``service`` already runs) and wait for ``/server_info``.

    Defaults: the demo instance (LAKEBUS_DAGSTER_PORT or 3000, ``<state>/dagster_home``). ``env`` is
    added to this process's environment for the webserver, the daemon and the code location.
    """
    load_local_secrets(settings)
    port = port or ui_port()
    url, log = ui_url(settings, port), process.log_file(settings, service)
    proc = process.find_process(settings, service, expected_cmdline())  # the pid file names the service
    if proc is not None:
        print(f"[dagster] already running (pid {proc.pid}) at {url}", flush=True)
    else:
        if process.port_in_use(settings.host, port):
            raise SystemExit(f"[dagster] ERROR port {port} is in use by another process; set LAKEBUS_DAGSTER_PORT")
        home = home or dagster_home(settings)
        home.mkdir(parents=True, exist_ok=True)
        write_instance_config(home)
        argv = [sys.executable, "-m", "dagster", "dev", "-w", str(WORKSPACE), "-h", settings.host, "-p", str(port)]
        proc = process.spawn(settings, service, argv, {**os.environ, **(env or {}), "DAGSTER_HOME": str(home)})
        print(f"[dagster] starting webserver + daemon (pid {proc.pid}), log {log} ...", flush=True)
    t0 = time.monotonic()
    if not process.wait_until(lambda: _healthy(settings, port), timeout=timeout, alive=proc):
        raise SystemExit(f"[dagster] ERROR the UI did not come up within {timeout:.0f}s; see {log}")
    print(f"[dagster] UI ready after {time.monotonic() - t0:.1f}s: {url}", flush=True)
    return proc


def down(settings: Settings, *, port: int | None = None, service: str = SERVICE) -> bool:
    """Stop ``service``'s whole process group (webserver, daemon, code servers, run workers)."""
    stopped = process.stop(settings, service, expected=expected_cmdline(port))
    print(f"[dagster] {'stopped' if stopped else 'was not running'}", flush=True)
    return stopped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lakebus_dagster.stack.dagster_ui")
    parser.add_argument("command", choices=["up", "down", "status"])
    args = parser.parse_args(argv)
    settings = load_settings()
    if args.command == "up":
        up(settings)
    elif args.command == "down":
        down(settings)
    else:
        proc = process.find_process(settings, SERVICE, expected_cmdline())
        print(f"[dagster] {'running (pid %d) at %s' % (proc.pid, ui_url(settings)) if proc else 'not running'}")
        return 0 if proc else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
