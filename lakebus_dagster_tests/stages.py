"""``make test``'s stages, each printing its time: unit → stack-up → integration → daemon, and — at
the same time as the daemon stage, which mostly waits out the shipped monitoring windows — the
cluster and secured profiles, each on ports of its own (:data:`PROFILE_PORTS`) so they run beside the
default stack: ``<profile>-up`` → ``<profile>`` → down.

    python -m lakebus_dagster_tests.stages          (``make test``; PYTEST_ARGS reaches every pytest)

Exit code: the first failing stage's; pytest's 5 ("no tests collected") is a failure too: every stage
selects tests that exist, so an empty stage means a marker or path went wrong. A
default stack that was up before is left up; one this run started is stopped. JUnit reports go to
``build/junit-<stage>.xml``; the daemon stage's output goes to ``build/stage-daemon.log`` while it
runs and is printed when it ends.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
PY = sys.executable

#: the extra profiles' base ports: apart from the default stack's and below the ephemeral range
PROFILE_PORTS = {
    "LAKEBUS_KAFKA_PORT": "26092",
    "LAKEBUS_KAFKA_CONTROLLER_PORT": "26093",
    "LAKEBUS_CONNECT_PORT": "27083",
    "LAKEBUS_REST_CATALOG_PORT": "27181",
    "LAKEBUS_S3_PORT": "27000",
    "LAKEBUS_SPARK_MASTER_PORT": "27077",
    "LAKEBUS_SPARK_WEBUI_PORT": "28080",
    "LAKEBUS_SPARK_CONNECT_PORT": "25002",
    "LAKEBUS_DAGSTER_PORT": "23000",
}
PROFILES = ("cluster", "secured")


def _say(line: str) -> None:
    print(f"[test] {line}", flush=True)


def _run(argv: list[str], env: dict[str, str] | None = None, log: Path | None = None) -> int:
    full_env = {**os.environ, **(env or {})}
    if log is None:
        return subprocess.run(argv, cwd=ROOT, env=full_env).returncode
    with log.open("w") as out:
        return subprocess.run(argv, cwd=ROOT, env=full_env, stdout=out, stderr=subprocess.STDOUT).returncode


def _stack(command: str, env: dict[str, str] | None = None, quiet: bool = False) -> int:
    argv = [PY, "-m", "lakebus_dagster.stack", command]
    if quiet:
        return subprocess.run(argv, cwd=ROOT, env={**os.environ, **(env or {})}, capture_output=True).returncode
    return _run(argv, env)


class Stages:
    def __init__(self, pytest_args: list[str]) -> None:
        self.pytest_args = pytest_args
        self.codes: list[int] = []
        self.lock = threading.Lock()

    def pytest(self, name: str, selection: list[str], env: dict[str, str] | None = None, log: Path | None = None) -> int:
        started = time.monotonic()
        code = _run([PY, "-m", "pytest", *selection, f"--junitxml={BUILD / f'junit-{name}.xml'}", *self.pytest_args], env, log)
        self.record(name, started, code)
        return code

    def record(self, name: str, started: float, code: int | None) -> None:
        with self.lock:
            if code is not None:
                self.codes.append(code)
            suffix = "" if code is None else f", exit code {code}"
            _say(f"stage {name}: {time.monotonic() - started:.0f}s{suffix}")

    def profiles(self) -> None:
        """The cluster and secured profiles one after the other, each up → tests → down."""
        for profile in PROFILES:
            env = {**PROFILE_PORTS, "LAKEBUS_PROFILE": profile}
            started = time.monotonic()
            if _stack("up", env) != 0:
                self.record(f"{profile}-up", started, 1)
            else:
                self.record(f"{profile}-up", started, None)
                self.pytest(profile, ["lakebus_dagster_tests/integration", "-m", profile], env)
            _stack("down", env, quiet=True)

    def run(self) -> int:
        BUILD.mkdir(exist_ok=True)
        begun = time.monotonic()
        was_up = subprocess.run([PY, "-m", "lakebus_dagster.stack", "status", "--check"], cwd=ROOT,
                                capture_output=True).returncode == 0
        self.pytest("unit", ["lakebus_dagster_tests/unit"])
        started = time.monotonic()
        if _stack("up") != 0:
            _stack("down")
            self.record("stack-up", started, 1)
            return 1
        self.record("stack-up", started, None)
        self.pytest("integration", ["lakebus_dagster_tests/integration", "-m", "not daemon and not cluster and not secured"])

        daemon_log = BUILD / "stage-daemon.log"
        _say(f"stage daemon runs while the cluster and secured profiles are tested (its output: {daemon_log})")
        daemon = threading.Thread(target=self.pytest, args=("daemon", ["lakebus_dagster_tests/integration", "-m", "daemon"]),
                                  kwargs={"log": daemon_log})
        daemon.start()
        self.profiles()
        daemon.join()
        sys.stdout.write(daemon_log.read_text(errors="replace"))
        if not was_up:
            _stack("down", quiet=True)
        code = next((c for c in self.codes if c != 0), 0)
        _say(f"finished in {time.monotonic() - begun:.0f}s with exit code {code}")
        return code


def main() -> int:
    return Stages(shlex.split(os.environ.get("PYTEST_ARGS", ""))).run()


if __name__ == "__main__":
    sys.exit(main())
