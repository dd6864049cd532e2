"""A broken deploy/ file breaks the local stack (issue 31.2): the Connect worker and the Spark Connect
server, started the way ``stack up`` starts them (their service spec, their command line) from a copy
of deploy/'s file with one broken key, refuse to start and say which key.

They run beside the stack, on ports of their own and pointed at no broker and no master of its: had
the broken key not reached them, they would wait for those until the deadline, and the test fails.
"""

from __future__ import annotations

import dataclasses
import os
import random
import socket
import subprocess
from pathlib import Path

import pytest

from lakebus_dagster.stack import deploy_files, kafka_services, spark_services
from lakebus_dagster.stack.jars import jars_dir
from lakebus_dagster.stack.local_settings import METRICS_PORT_OFFSET, StackSettings
from lakebus_dagster.stack.manager import find_java
from lakebus_dagster.stack.service import LOG4J2, LOG4J2_FILE, write_file
from lakebus_dagster.stack.spec import ServiceSpec

pytestmark = pytest.mark.integration
#: seconds a refusing JVM may take (both refuse within ~10 s on the reference machine)
DEADLINE_S = 90


#: where the side JVMs' ports are drawn: below the ephemeral range (32768-60999), so no outgoing
#: connection takes one between the draw and the JVM's bind, and clear of every stack's base ports
#: (8xxx-9xxx, 15xxx-19xxx, 21xxx-33xxx: lakebus_dagster_tests/stages.py)
PORT_RANGE = (11000, 14900)


def _free_port() -> int:
    """A port in PORT_RANGE whose metrics port (+ METRICS_PORT_OFFSET, where a worker's JMX exporter
    agent listens) is free too: an agent that cannot bind stops the JVM before it reads its worker
    file (seen in CI with a port the kernel had handed out)."""
    for _ in range(200):
        port = random.randrange(*PORT_RANGE)
        with socket.socket() as sock, socket.socket() as metrics:
            try:
                sock.bind(("127.0.0.1", port))
                metrics.bind(("127.0.0.1", port + METRICS_PORT_OFFSET))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port with its metrics port (+{METRICS_PORT_OFFSET}) free in {PORT_RANGE}")


def _beside(stack: StackSettings, tmp_path: Path) -> StackSettings:
    """The stack's settings with a state dir and ports of the test's own (no broker, no master listens there)."""
    ports = dataclasses.replace(stack.ports, kafka=_free_port(), connect=_free_port(), spark_master=_free_port(),
                                spark_connect=_free_port(), spark_webui=_free_port())
    return dataclasses.replace(stack, state_dir=tmp_path / "state", ports=ports)


def _start(spec: ServiceSpec, settings: StackSettings, jars: Path) -> subprocess.CompletedProcess:
    java = find_java()
    (node,) = spec.nodes(settings, jars, java, ("not-used", "not-used"))[:1]
    service = spec.bind(node)
    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    write_file(settings.run_dir / LOG4J2_FILE, LOG4J2)  # as the brokers' start writes it for the workers
    service.prepare()
    argv = service.argv(settings, jars, java, markers=[])
    try:
        return subprocess.run(argv, env={**os.environ, **service.env}, capture_output=True, text=True, timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{spec.name} started from a broken {service.source} and ran for {DEADLINE_S} s instead of refusing it")


def _start_broken(stack, tmp_path, monkeypatch, module, attribute: str, spec: ServiceSpec, good: str, bad: str) -> str:
    """Start ``spec`` as ``stack up`` would, from a copy of its deploy file (``module.attribute``) with
    ``good`` replaced by ``bad``; it must exit non-zero. Returns its output."""
    deploy_file = getattr(deploy_files, attribute)
    broken = tmp_path / deploy_file.path.name
    broken.write_text(deploy_file.path.read_text().replace(good, bad))
    assert bad in broken.read_text(), f"{good!r} is not in {deploy_file.path}"
    monkeypatch.setattr(module, attribute, dataclasses.replace(deploy_file, path=broken))
    result = _start(spec, _beside(stack, tmp_path), jars_dir(stack))
    out = result.stdout + result.stderr
    assert result.returncode != 0, out[-2000:]
    return out


def test_a_wrong_converter_in_the_compose_worker_file_stops_the_connect_worker(stack, tmp_path, monkeypatch):
    out = _start_broken(stack, tmp_path, monkeypatch, kafka_services, "WORKER", kafka_services.CONNECT_WORKER,
                        "json.JsonConverter", "json.NoSuchConverter")
    assert "Invalid value org.apache.kafka.connect.json.NoSuchConverter for configuration value.converter" in out, out[-2000:]


def test_a_bad_scheduler_mode_in_the_spark_connect_conf_stops_the_server(stack, tmp_path, monkeypatch):
    out = _start_broken(stack, tmp_path, monkeypatch, deploy_files, "SPARK_CONNECT", spark_services.SPARK_CONNECT,
                        "spark.scheduler.mode=FAIR", "spark.scheduler.mode=FAIRER")
    assert "'FAIRER' in the config \"spark.scheduler.mode\" is invalid" in out, out[-2000:]
