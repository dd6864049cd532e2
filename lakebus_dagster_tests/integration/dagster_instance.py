"""A ``dagster dev`` of a test's own — webserver + daemon, as ``make demo`` runs them — on a free
port, with its DAGSTER_HOME in a temp dir, an isolated bus (``LAKEBUS_BUS_SUFFIX``) and whatever
extra environment the test gives the code location. Its instance is the local stack's
(deploy/dagster.yaml with the declared overlay: :func:`lakebus_dagster.stack.dagster_ui.instance_config`)
unless the test gives its own. On exit it stops the whole process group,
checks that nothing of it survived, and deletes the suffixed connector.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import psutil
import pytest

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster.stack.local_settings import StackSettings
from lakebus_dagster.stack import dagster_ui, process
from lakebus_dagster_tests.integration.helpers import TEST_COMMIT_INTERVAL_MS

START_S = 180.0
#: not the shipped 10 s (helpers.TEST_COMMIT_INTERVAL_MS says why): the monitoring windows counted in
#: commit intervals (stall 6, lost coordinator 2) shrink 5x with the same rules
COMMIT_INTERVAL_MS = TEST_COMMIT_INTERVAL_MS


@dataclass(frozen=True)
class DagsterInstance:
    settings: StackSettings  # state_dir is the instance's temp dir: pid file, log, dagster_home
    port: int
    home: Path
    layout: BusLayout  # the suffixed bus its code location provisions
    service: str

    @property
    def url(self) -> str:
        return dagster_ui.ui_url(self.settings, self.port)

    def stop_sensors(self, *names: str) -> None:
        """Stop ``names`` through the webserver's GraphQL, as the UI's toggle does: a test whose runs go
        through the lakehouse's one-at-a-time queue stops the sensors that would queue runs of their own
        for reasons of the wall clock (the gap fill builds a fresh deployment's last 48 h at :45)."""
        import requests

        query = "{ repositoriesOrError { ... on RepositoryConnection { nodes { sensors { id name } } } } }"
        body = requests.post(f"{self.url}/graphql", json={"query": query}, timeout=30).json()
        found = {x["name"]: x["id"] for repo in body["data"]["repositoriesOrError"]["nodes"] for x in repo["sensors"]}
        stop = ("mutation($id: String) { stopSensor(id: $id) { __typename ... on PythonError { message } } }")
        for name in names:
            assert name in found, f"no sensor {name} in the code location: {sorted(found)}"
            for attempt in range(3):
                done = requests.post(f"{self.url}/graphql", json={"query": stop, "variables": {"id": found[name]}}, timeout=30).json()
                answer = done["data"]["stopSensor"]
                # the daemon stores a sensor's first state while the mutation adds one of its own (Dagster
                # refuses the second add): the state now exists, and the next stop updates it
                if answer["__typename"] != "PythonError" or "already present in storage" not in answer.get("message", ""):
                    break
            assert answer["__typename"] == "StopSensorMutationResult", (name, attempt, done)

    def log_tail(self, lines: int = 40) -> str:
        path = process.log_file(self.settings, self.service)
        text = path.read_text(errors="replace") if path.exists() else "(no log)"
        return f"--- last {lines} lines of {path} ---\n" + "\n".join(text.splitlines()[-lines:])


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def process_group(pgid: int) -> list[str]:
    """Command lines of the live processes in process group ``pgid``."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(f"{proc.pid}: {' '.join(proc.info['cmdline'] or [])[:160]}")
        except (ProcessLookupError, psutil.Error):
            pass
    return found


@contextmanager
def running_dagster(
    stack: StackSettings,
    tmp_path_factory: pytest.TempPathFactory,
    service: str,
    *,
    instance_yaml: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[DagsterInstance]:
    suffix = secrets.token_hex(4)
    settings = replace(stack, state_dir=tmp_path_factory.mktemp(f"{service}-{suffix}"))
    home = dagster_ui.dagster_home(settings)
    home.mkdir()
    port = free_port(stack.host)
    layout = BusLayoutResource(namespace=stack.lake.namespace, name_suffix=suffix, commit_interval_ms=COMMIT_INTERVAL_MS).layout()
    instance = DagsterInstance(settings, port, home, layout, service)
    full_env = {"LAKEBUS_BUS_SUFFIX": suffix, "LAKEBUS_SINK_COMMIT_INTERVAL_MS": str(COMMIT_INTERVAL_MS), **(env or {})}
    try:
        try:
            dagster_ui.up(settings, START_S, port=port, home=home, service=service, env=full_env, instance_yaml=instance_yaml)
        except SystemExit as exc:  # the UI did not answer /server_info in time, or died
            pytest.fail(f"{exc}\n{instance.log_tail()}")
        yield instance
    finally:
        leader = process.find_process(settings, service, dagster_ui.expected_cmdline(port))
        dagster_ui.down(settings, port=port, service=service)
        with ConnectClient(stack.connect.urls[0]) as client:
            if client.exists(layout.connector_name):
                client.delete(layout.connector_name)
        # the code servers exit after their heartbeat to the stopped webserver/daemon lapses: poll, with a deadline
        deadline = time.monotonic() + 60
        leftovers = process_group(leader.pid) if leader else []
        while leftovers and time.monotonic() < deadline:
            time.sleep(1)
            leftovers = process_group(leader.pid)
        assert not leftovers, "processes of the test's dagster dev survived `down` by 60 s:\n" + "\n".join(leftovers)
