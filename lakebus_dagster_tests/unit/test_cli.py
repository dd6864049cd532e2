"""The ``lakebus`` command as a user meets it, run as a subprocess: every bad input (environment
variable, JSON, job name, date, number, unreachable service) ends in ONE line on stderr that names
the input, a non-zero exit and no traceback, within seconds. Needs no services: the unreachable
ones are closed ports, the Dagster UI that lists jobs is a small fake GraphQL server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

LAKEBUS = Path(sys.executable).parent / "lakebus"
#: "within a few seconds": the broker probe's timeout is 5 s, everything else answers at once
MAX_SECONDS = 9.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lakebus(*args: str, tmp: Path | None = None, module: str | None = None, **env: str) -> subprocess.CompletedProcess:
    """Run ``lakebus ARGS`` (or ``python -m MODULE ARGS``) with ``env`` on top of a clean LAKEBUS_* environment."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("LAKEBUS_")}
    if tmp is not None:
        base["LAKEBUS_STATE_DIR"] = str(tmp / "state")
    argv = [sys.executable, "-m", module, *args] if module else [str(LAKEBUS), *args]
    start = time.monotonic()
    proc = subprocess.run(argv, env={**base, **env}, capture_output=True, text=True, timeout=60)
    proc.elapsed = time.monotonic() - start  # type: ignore[attr-defined]
    return proc


def assert_one_line_error(proc: subprocess.CompletedProcess, *named: str) -> str:
    """Exit 2, exactly one line on stderr naming every string in ``named``, no traceback, quick."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for text in named:
        assert text in lines[0], (text, lines[0])
    assert proc.elapsed < MAX_SECONDS, proc.elapsed  # type: ignore[attr-defined]
    return lines[0]


def test_the_console_command_is_installed():
    assert LAKEBUS.exists(), "make install (pip install -e .[dev]) installs the `lakebus` script"
    proc = lakebus("--help")
    assert proc.returncode == 0
    for area in ("stack", "ui", "launch", "demo", "generate", "bench", "config"):
        assert area in proc.stdout


@pytest.mark.parametrize("area", [["stack"], ["stack", "logs"], ["ui"], ["launch"], ["demo"], ["generate"], ["bench"], ["config"]])
def test_every_subcommand_explains_itself_with_an_example(area):
    proc = lakebus(*area, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "examples:" in proc.stdout and "lakebus " in proc.stdout.split("examples:")[1]


# -- environment variables ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, variable, value",
    [
        (["stack", "status"], "LAKEBUS_KAFKA_PORT", "abc"),
        (["stack", "status"], "LAKEBUS_CONNECT_PORT", "-5"),
        (["stack", "status"], "LAKEBUS_S3_PORT", "99999"),
        (["ui", "status"], "LAKEBUS_DAGSTER_PORT", "abc"),
        (["launch", "provision_lakebus"], "LAKEBUS_DAGSTER_PORT", "0"),
        (["generate", "--topic", "t", "--count", "1"], "LAKEBUS_KAFKA_BOOTSTRAP", "no-port"),
        (["demo"], "LAKEBUS_CATALOG_URI", "catalog:8181"),
        (["config"], "LAKEBUS_ALERT_SINK", "email"),
        (["stack", "status"], "LAKEBUS_KAFKA_HEAP", "lots"),
    ],
)
def test_a_bad_environment_variable_is_named(tmp_path, args, variable, value):
    line = assert_one_line_error(lakebus(*args, tmp=tmp_path, **{variable: value}), variable, repr(value))
    assert "unset it" in line  # what to do


def test_a_secret_is_never_echoed(tmp_path):
    secret = "https//hooks.example/T000/B000/XXXXSECRET"
    proc = lakebus("config", tmp=tmp_path, LAKEBUS_ALERT_SINK="webhook", LAKEBUS_ALERT_WEBHOOK_URL=secret)
    line = assert_one_line_error(proc, "LAKEBUS_ALERT_WEBHOOK_URL", "hidden")
    assert "SECRET" not in line


def test_config_markdown_lists_every_variable():
    proc = lakebus("config", "--markdown")
    assert proc.returncode == 0 and "| `LAKEBUS_KAFKA_PORT` | `19092` |" in proc.stdout


# -- arguments: numbers, dates, JSON -------------------------------------------------------------
@pytest.mark.parametrize(
    "args, named",
    [
        (["generate", "--topic", "t", "--count", "-5"], ["--count", "'-5'"]),
        (["generate", "--topic", "t", "--count", "0"], ["--count", ">= 1"]),
        (["generate", "--topic", "t", "--rate", "-1"], ["--rate", "> 0"]),
        (["generate", "--topic", "t", "--days", "0"], ["--days", "'0'"]),
        (["generate", "--topic", "t", "--users", "-1"], ["--users"]),
        (["generate", "--topic", "t", "--start-date", "2025-13-45"], ["--start-date", "YYYY-MM-DD", "2025-13-45"]),
        (["generate", "--topic", "t", "--start-date", "yesterday"], ["--start-date", "yesterday"]),
        (["generate", "--topic", "t", "--duration", "5"], ["--duration", "--rate"]),
        (["generate", "--topic", "t", "-X", "linger.ms"], ["-X", "KEY=VALUE"]),
        (["demo", "--start-date", "2025-02-30"], ["--start-date", "2025-02-30"]),
        (["demo", "--days", "-1"], ["--days"]),
        (["demo", "--count", "-5"], ["--count"]),
        (["launch", "provision_lakebus", "--config", "{bad"], ["--config", "not valid JSON"]),
        (["launch", "provision_lakebus", "--config", "[1, 2]"], ["--config", "JSON object"]),
        (["launch", "provision_lakebus", "--tags", "{'a': 1}"], ["--tags", "not valid JSON"]),
        (["launch", "provision_lakebus", "--tag", "novalue"], ["--tag", "KEY=VALUE"]),
        (["launch", "provision_lakebus", "--timeout", "-1"], ["--timeout"]),
        (["stack", "logs", "-n", "-1"], ["--lines", "'-1'"]),
        (["stack", "logs", "zookeeper"], ["zookeeper", "connect"]),
        (["stack", "restart", "zookeeper"], ["zookeeper"]),
        (["stack", "explode"], ["explode"]),
        (["bench", "bench_no_such"], ["bench_no_such", "bench_events_encode"]),
    ],
)
def test_a_bad_argument_is_named(tmp_path, args, named):
    assert_one_line_error(lakebus(*args, tmp=tmp_path), *named)


def test_a_bare_generate_never_writes_to_the_bus(tmp_path):
    assert_one_line_error(lakebus("generate", tmp=tmp_path), "--topic", "required")


def test_the_module_entry_points_keep_working(tmp_path):
    assert_one_line_error(lakebus("x", "--config", "{bad", module="lakebus_dagster.stack.launch", tmp=tmp_path), "--config")
    assert_one_line_error(lakebus("--count", "-5", "--topic", "t", module="lakebus_dagster.events.generate"), "--count")
    assert_one_line_error(lakebus("logs", "-n", "-2", module="lakebus_dagster.stack", tmp=tmp_path), "--lines")
    assert_one_line_error(lakebus("--days", "0", module="lakebus_dagster.stack.demo", tmp=tmp_path), "--days")
    proc = lakebus("status", module="lakebus_dagster.stack.dagster_ui", tmp=tmp_path, LAKEBUS_DAGSTER_PORT=str(free_port()))
    assert proc.returncode == 1 and "not running" in proc.stdout


def test_debug_adds_the_traceback(tmp_path):
    proc = lakebus("stack", "status", "--debug", tmp=tmp_path, LAKEBUS_KAFKA_PORT="abc")
    assert proc.returncode == 2
    assert "Traceback" in proc.stderr and proc.stderr.strip().splitlines()[-1].startswith("lakebus stack status: error: LAKEBUS_KAFKA_PORT")


# -- unreachable services -----------------------------------------------------------------------
def test_unreachable_broker_fails_fast_and_quietly(tmp_path):
    proc = lakebus("generate", "--topic", "t", "--bootstrap", "127.0.0.1:1", "--count", "2", tmp=tmp_path)
    assert_one_line_error(proc, "127.0.0.1:1", "--bootstrap", "unreachable")
    assert proc.stdout == ""  # nothing sent, no librdkafka log lines either


@pytest.mark.parametrize("args", [["launch", "provision_lakebus"], ["demo"]])
def test_the_ui_not_running_says_how_to_start_it(tmp_path, args):
    port = str(free_port())
    assert_one_line_error(lakebus(*args, tmp=tmp_path, LAKEBUS_DAGSTER_PORT=port), f":{port}", "not running", "lakebus ui up")


@pytest.fixture
def fake_ui() -> Iterator[int]:
    """A web server answering like the Dagster UI: /server_info, and the job list over /graphql."""
    jobs = {"data": {"repositoriesOrError": {"__typename": "RepositoryConnection", "nodes": [
        {"location": {"name": "lakebus"}, "jobs": [{"name": "provision_lakebus"}, {"name": "__ASSET_JOB"}, {"name": "replay_dlq"}]},
    ]}}}

    class Handler(BaseHTTPRequestHandler):
        def _json(self, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self._json({})

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self._json(jobs)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()


def test_an_unknown_job_lists_the_known_ones(tmp_path, fake_ui):
    proc = lakebus("launch", "no_such_job", tmp=tmp_path, LAKEBUS_DAGSTER_PORT=str(fake_ui))
    line = assert_one_line_error(proc, "no_such_job", "provision_lakebus, replay_dlq")
    assert "__ASSET_JOB" not in line


# -- stack logs / status ------------------------------------------------------------------------
def test_logs_zero_lines_prints_nothing(tmp_path):
    logs = tmp_path / "state" / "logs"
    logs.mkdir(parents=True)
    (logs / "kafka.log").write_text("".join(f"line {i}\n" for i in range(100)))
    (logs / "dagster.log").write_text("ui line\n")
    proc = lakebus("stack", "logs", "kafka", "-n", "0", tmp=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    proc = lakebus("stack", "logs", "-n", "1", tmp=tmp_path)
    assert "line 99" in proc.stdout and "ui line" in proc.stdout and "line 98" not in proc.stdout


def test_status_shows_the_dagster_ui(tmp_path):
    proc = lakebus("stack", "status", tmp=tmp_path, LAKEBUS_DAGSTER_PORT=str(free_port()))
    assert proc.returncode == 0, proc.stderr
    assert [line.split()[0] for line in proc.stdout.splitlines()[1:9]] == [
        "s3", "kafka", "rest-catalog", "connect", "spark-master", "spark-worker", "spark-connect", "dagster"]


# -- the UI reads well ----------------------------------------------------------------------------
def test_every_job_has_one_domain_tag_and_a_description():
    """One ``domain`` key on every job, so the Runs page filters by area; no older ``lakebus/domain``."""
    from lakebus_dagster.definitions import defs

    jobs = [j for j in defs.get_repository_def().get_all_jobs() if not j.name.startswith("__")]
    missing = sorted(j.name for j in jobs if not j.tags.get("domain"))
    assert missing == []
    assert sorted(j.name for j in jobs if "lakebus/domain" in j.tags) == []
    assert sorted(j.name for j in jobs if not (j.description or "").strip()) == []
