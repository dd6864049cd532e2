"""``python -m lakebus_dagster.stack.dagster_ui up|down|status``: the Dagster UI (webserver + daemon)
on the local stack, in the background, started at most once.

``dagster dev`` runs the webserver, the daemon (schedules, sensors, run queue) and the code server.
Its instance lives in ``<state>/dagster_home`` so runs and sensor cursors survive a restart.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import requests

from lakebus_dagster.settings import REPO_ROOT, Settings, load_local_secrets, load_settings
from lakebus_dagster.stack import process

SERVICE = "dagster"
WORKSPACE = REPO_ROOT / "workspace.yaml"


def ui_port() -> int:
    return int(os.environ.get("LAKEBUS_DAGSTER_PORT", "3000"))


def ui_url(settings: Settings) -> str:
    return f"http://{settings.host}:{ui_port()}"


def dagster_home(settings: Settings) -> Path:
    return settings.state_dir / "dagster_home"


def expected_cmdline() -> list[str]:
    return ["dev", str(WORKSPACE)]


def _healthy(settings: Settings) -> bool:
    try:
        return requests.get(f"{ui_url(settings)}/server_info", timeout=2).status_code == 200
    except requests.RequestException:
        return False


def up(settings: Settings, timeout: float = 180.0) -> None:
    load_local_secrets(settings)
    proc = process.find_process(settings, SERVICE, expected_cmdline())
    if proc is not None:
        print(f"[dagster] already running (pid {proc.pid}) at {ui_url(settings)}", flush=True)
    else:
        if process.port_in_use(settings.host, ui_port()):
            raise SystemExit(f"[dagster] ERROR port {ui_port()} is in use by another process; set LAKEBUS_DAGSTER_PORT")
        home = dagster_home(settings)
        home.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "dagster", "dev", "-w", str(WORKSPACE), "-h", settings.host, "-p", str(ui_port())]
        proc = process.spawn(settings, SERVICE, argv, {**os.environ, "DAGSTER_HOME": str(home)})
        print(f"[dagster] starting webserver + daemon (pid {proc.pid}), log {process.log_file(settings, SERVICE)} ...", flush=True)
    t0 = time.monotonic()
    if not process.wait_until(lambda: _healthy(settings), timeout=timeout, alive=proc):
        raise SystemExit(f"[dagster] ERROR the UI did not come up within {timeout:.0f}s; see {process.log_file(settings, SERVICE)}")
    print(f"[dagster] UI ready after {time.monotonic() - t0:.1f}s: {ui_url(settings)}", flush=True)


def down(settings: Settings) -> None:
    if process.stop(settings, SERVICE, expected=expected_cmdline()):
        print("[dagster] stopped", flush=True)
    else:
        print("[dagster] was not running", flush=True)


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
