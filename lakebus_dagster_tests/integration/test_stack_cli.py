"""The stack CLI's failure modes: each names the service (and its log) and exits non-zero; `down`
never touches a process the stack did not start. Runs the real CLI in a scratch state dir."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import psutil
import pytest

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_cli(tmp_path, *args, **env_overrides) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "LAKEBUS_STATE_DIR": str(tmp_path / "state"),
        "LAKEBUS_S3_PORT": str(free_port()),
        "LAKEBUS_KAFKA_PORT": str(free_port()),
        "LAKEBUS_KAFKA_CONTROLLER_PORT": str(free_port()),
        "LAKEBUS_REST_CATALOG_PORT": str(free_port()),
        "LAKEBUS_CONNECT_PORT": str(free_port()),
        # the Spark master starts beside S3 and the broker: its ports must be free too
        "LAKEBUS_SPARK_MASTER_PORT": str(free_port()),
        "LAKEBUS_SPARK_WEBUI_PORT": str(free_port()),
        "LAKEBUS_SPARK_CONNECT_PORT": str(free_port()),
        **env_overrides,
    }
    return subprocess.run([sys.executable, "-m", "lakebus_dagster.stack", *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("variable,service", [("LAKEBUS_S3_PORT", "s3"), ("LAKEBUS_SPARK_CONNECT_PORT", "spark-connect")])
def test_a_busy_port_names_the_service_before_anything_starts(stack, tmp_path, variable, service):
    """Services start side by side (the Spark chain beside S3 and the broker), so every port is
    checked before the first start: the last service's as well as the first's."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = run_cli(tmp_path, "up", **{variable: str(port)})
    assert proc.returncode == 2
    assert f"{service}: port 127.0.0.1:{port} is already in use" in proc.stderr
    assert "starting (pid" not in proc.stdout, proc.stdout


def test_no_java_is_a_clear_error(stack, tmp_path):
    proc = run_cli(tmp_path, "up", PATH="/nonexistent", JAVA_HOME="")
    assert proc.returncode == 2 and "java: no Java runtime found" in proc.stderr


def test_missing_maven_is_a_clear_error(stack, tmp_path):
    java_dir = os.path.dirname(os.path.realpath(subprocess.check_output(["which", "java"], text=True).strip()))
    proc = run_cli(tmp_path, "up", PATH=java_dir, LAKEBUS_JARS_CACHE=str(tmp_path / "empty-cache"))
    assert proc.returncode == 2 and "maven: `mvn` is not on PATH" in proc.stderr


def test_service_that_dies_names_its_log(stack, tmp_path):
    # a well-formed size the JVM still refuses (a malformed one never gets that far: settings name it)
    try:
        proc = run_cli(tmp_path, "up", LAKEBUS_S3_HEAP="1")
        assert proc.returncode == 2
        assert "s3: exited" in proc.stderr and str(tmp_path / "state" / "logs" / "s3.log") in proc.stderr
        assert "Error occurred during initialization of VM" in proc.stderr  # the log's tail comes with the message
        assert "rest-catalog" not in proc.stdout  # what needs S3 never started
    finally:
        run_cli(tmp_path, "down")  # the broker and the Spark master started beside S3


def test_a_malformed_heap_is_refused_before_anything_starts(tmp_path):
    proc = run_cli(tmp_path, "up", LAKEBUS_S3_HEAP="not-a-size")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "python -m lakebus_dagster.stack up: error: LAKEBUS_S3_HEAP='not-a-size' is not a memory size; use e.g. 512m or 2g, "
        "or unset it for the default 256m"]
    assert not (tmp_path / "state" / "logs").exists()


def test_down_spares_a_process_behind_a_stale_pid_file(tmp_path):
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        run_dir = tmp_path / "state" / "run"
        run_dir.mkdir(parents=True)
        (run_dir / "kafka.pid").write_text(f"{bystander.pid}\n")
        proc = run_cli(tmp_path, "down")
        assert proc.returncode == 0 and "nothing was running" in proc.stdout
        assert psutil.pid_exists(bystander.pid) and bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_service_logs_stay_at_info(stack):
    """S3Proxy defaults to DEBUG without a logback config (gigabytes of Jetty lines per hour)."""
    with open(stack.logs_dir / "s3.log", "rb") as fh:
        fh.seek(0, 2)
        fh.seek(max(0, fh.tell() - (1 << 20)))
        tail = fh.read().decode(errors="replace")
    assert " DEBUG " not in tail, tail[-2000:]
