"""A new plugin into the running Connect cluster (issue 30.6), on the cluster profile (2 workers).

A Single Message Transform compiled here (a class name of this run's own, so no worker has it) is
dropped into the stack's ``<state>/connect-plugins``; under steady load into a 2-partition bus with
the real Iceberg sink, ``rolling_restart_connect`` runs through Dagster with the shipped resources
(the local stack's worker restart) and the plugin class as the one every worker must list
afterwards. First, on the idle cluster: without a restart command the run refuses with the platform's
advice, and a failing restart command fails the run naming the worker, the next one untouched. Proven: each worker was restarted once, one after the other, and lists the plugin;
every acknowledged event is in the table exactly once (by order_id and by (partition, offset)); a
rerun with ``only_if_missing`` skips with its reason; and ``connect/cluster`` lists both workers,
including the one that runs nothing once the sink is stopped (an idle worker, invisible before).

Run twice: with the stack's own restart (a worker back within seconds) and with each worker kept
stopped 20 s (a pod rescheduled slowly). The workers move a departed worker's tasks at once
(``scheduled.rebalance.max.delay.ms=0``), so in both its tasks run on the other worker meanwhile and
come back when it rejoins.

Runs in the ``cluster`` stage of ``make test`` (marker ``cluster``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import Counter
from pathlib import Path

import dagster as dg
import pytest

from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.connect.worker_probe import worker_plugins
from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.asset_keys import CONNECT_CLUSTER_KEY
from lakebus_dagster.defs.connector_fleet.resources import WorkerRestartResource
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.stack import manager, process
from lakebus_dagster.stack.jars import jars_dir
from lakebus_dagster.stack.kafka_services import extra_plugins_dir

from .helpers import wait_for
from lakebus_dagster_tests.failover_kit import SteadyProducer, provision

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

TRANSFORM = """package io.lakebus.rolltest;

import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.ConnectRecord;
import org.apache.kafka.connect.transforms.Transformation;

/** Passes every record through unchanged: a plugin no worker has loaded before this test. */
public class {name}<R extends ConnectRecord<R>> implements Transformation<R> {{
    public R apply(R record) {{ return record; }}
    public ConfigDef config() {{ return new ConfigDef(); }}
    public void close() {{}}
    public void configure(Map<String, ?> configs) {{}}
}}
"""


@pytest.fixture
def cluster(stack):
    if stack.profile != "cluster":
        pytest.fail("this test needs the cluster profile: LAKEBUS_PROFILE=cluster (make test runs it in its cluster stage)")
    yield stack
    manager.up(stack)  # a worker a failed roll left down comes back for the next test


def build_plugin(settings, run_id: str) -> tuple[str, Path]:
    """Compile the pass-through transform into ``<state>/connect-plugins/rolltest-<run_id>/`` with its
    ServiceLoader manifest (the workers discover plugins with plugin.discovery=service_load)."""
    name = f"Noop{run_id}"
    cls = f"io.lakebus.rolltest.{name}"
    plugin_dir = extra_plugins_dir(settings) / f"rolltest-{run_id}"
    kafka_jars = jars_dir(settings) / "kafka"
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / f"{name}.java"
        src.write_text(TRANSFORM.format(name=name))
        classpath = ":".join(str(p) for p in sorted(kafka_jars.glob("*.jar")) if p.name.startswith(("connect-api", "kafka-clients")))
        subprocess.run(["javac", "--release", "17", "-cp", classpath, "-d", str(Path(tmp) / "out"), str(src)], check=True,
                       capture_output=True, text=True)
        plugin_dir.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(plugin_dir / f"rolltest-{run_id}.jar", "w") as jar:
            for path in (Path(tmp) / "out").rglob("*.class"):
                jar.write(path, path.relative_to(Path(tmp) / "out").as_posix())
            jar.writestr("META-INF/services/org.apache.kafka.connect.transforms.Transformation", cls + "\n")
    return cls, plugin_dir


def observe_connect_cluster(resources: dict) -> dict:
    """The shipped ``connect/cluster`` asset observed through Dagster; its observation's metadata."""
    asset = next(a for a in defs.assets if getattr(a, "key", None) == CONNECT_CLUSTER_KEY)
    only = dg.Definitions(assets=[asset], jobs=[dg.define_asset_job("observe_connect_cluster", selection=[CONNECT_CLUSTER_KEY])],
                          resources={"connect": resources["connect"]})
    result = only.resolve_job_def("observe_connect_cluster").execute_in_process()
    assert result.success
    (metadata,) = [e.event_specific_data.asset_observation.metadata for e in result.all_events
                   if e.event_type_value == "ASSET_OBSERVATION"]
    return {k: v.value for k, v in metadata.items()}


def _roll_metadata(result) -> dict:
    (output,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    return {k: v.value for k, v in output.event_specific_data.metadata.items()}


#: how long each worker stays stopped: 0 = the stack's restart (back within seconds); 20 = a pod
#: rescheduled slowly. Either way its tasks move to the other worker at once and back when it returns
STOPPED_S = (0, 20)


@pytest.mark.parametrize("stopped_s", STOPPED_S)
def test_a_new_plugin_rolls_in_one_worker_at_a_time_every_acked_event_once_and_idle_workers_listed(
        cluster, run_id, stopped_s, remove_what_the_tests_created):
    layout_resource = BusLayoutResource(name_suffix=run_id, bus_partitions=2, replication_factor=3, min_insync_replicas=2)
    resources = {**build_resources(), "layout": layout_resource}  # the shipped resources: worker_restart is the stack's
    if stopped_s:
        shipped = resources["worker_restart"].command  # [python, -m, lakebus_dagster.stack, restart-worker, {url}]
        resources["worker_restart"] = WorkerRestartResource(command=[*shipped[:-1], f"--stopped-s={stopped_s}", shipped[-1]])
    layout = layout_resource.layout()
    urls = list(resources["connect"].urls)
    assert len(urls) == 2 and resources["worker_restart"].command, resources["worker_restart"]
    if not stopped_s:
        refusals_name_the_worker_and_restart_nothing(cluster, resources, urls)
    drop_finished_tests_connectors(urls, remove_what_the_tests_created.suffixes - {run_id})
    plugin, plugin_dir = build_plugin(cluster, run_id)
    try:
        _roll_under_load(cluster, resources, layout, urls, plugin, stopped_s)
    finally:
        shutil.rmtree(plugin_dir)  # loaded until the workers' next start; harmless, never used by a connector
        with ConnectClient(tuple(urls)) as client:
            if client.exists(layout.connector_name):
                client.delete(layout.connector_name)


def drop_finished_tests_connectors(urls: list[str], suffixes: set[str]) -> None:
    """Delete the connectors of this session's earlier tests (their suffixes; the session's end would):
    with only this test's sink on the cluster, stopping it leaves one of the two workers running nothing."""
    with ConnectClient(tuple(urls)) as client:
        for name in client.list_connectors(expand_status=False, expand_info=False):
            if any(suffix in name for suffix in suffixes):
                client.delete(name)


def _failure(result) -> str:
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    return failure.event_specific_data.error.message


def refusals_name_the_worker_and_restart_nothing(cluster, resources: dict, urls: list[str]) -> None:
    """The platform's refusal (no restart command) and a restart command that fails, through Dagster:
    each run fails with a message saying what to do or naming the worker, and no worker's process changed."""
    pids = {n: process.find_process(cluster, n).pid for n in ("connect", "connect-2")}
    job = defs.resolve_job_def("rolling_restart_connect")
    refused = job.execute_in_process(resources={**resources, "worker_restart": WorkerRestartResource()}, raise_on_error=False)
    assert not refused.success and "Strimzi" in _failure(refused) and "rolls the Connect pods" in _failure(refused)
    broken = WorkerRestartResource(command=[sys.executable, "-c", "import sys; sys.exit(3)", "{url}"])
    failed = job.execute_in_process(resources={**resources, "worker_restart": broken}, raise_on_error=False)
    first, second = (u.removeprefix("http://") for u in urls)
    assert not failed.success and f"restarting worker {first} failed" in _failure(failed), _failure(failed)
    assert "exited 3" in _failure(failed) and f"not restarted: {second}" in _failure(failed), _failure(failed)
    assert {n: process.find_process(cluster, n).pid for n in pids} == pids


def _roll_under_load(cluster, resources: dict, layout, urls: list[str], plugin: str, stopped_s: int) -> None:
    table, connector = layout.routes["bet"], layout.connector_name
    assert all(plugin not in worker_plugins(u) for u in urls)
    provision(cluster, resources, layout)
    client = ConnectClient(tuple(urls))
    catalog = load_catalog(cluster)
    producer = SteadyProducer(cluster.kafka.bootstrap_servers, layout.bus_topic.name)
    producer.start()
    try:
        wait_for(lambda: client.status(connector).in_states({"RUNNING"}) and catalog.table_exists(table)
                 and catalog.load_table(table).current_snapshot(), "the sink RUNNING and a first commit", 240, interval=1)
        busy = observe_connect_cluster(resources)
        assert busy["worker_count"] == 2 and busy["workers_answering"] == 2, busy["workers"]

        started = time.monotonic()
        result = defs.resolve_job_def("rolling_restart_connect").execute_in_process(
            run_config={"ops": {"rolling_restart_connect_op": {"config": {"plugins": [plugin]}}}}, resources=resources)
        roll_s = time.monotonic() - started
        assert result.success
        rolled = _roll_metadata(result)
        print(f"[roll] stopped_s={stopped_s}: {roll_s:.0f} s; seconds down {rolled['seconds_down']}, tasks moved {rolled['tasks_moved']}, "
              f"plugins added {rolled['plugins_added']}\n{rolled['workers']}", flush=True)
        assert rolled["workers_rolled"] == 2 and plugin in rolled["plugins_added"] and rolled["outcome"] == "rolled"
        assert list(rolled["seconds_down"]) == [u.removeprefix("http://") for u in urls]  # in order, each once
        assert min(rolled["seconds_down"].values()) >= stopped_s
        if stopped_s:  # past the group's wait: each worker's task ran on the other one meanwhile
            assert rolled["tasks_moved"] >= 2, rolled["workers"]
        assert all(plugin in worker_plugins(u) for u in urls)

        again = defs.resolve_job_def("rolling_restart_connect").execute_in_process(
            run_config={"ops": {"rolling_restart_connect_op": {"config": {"plugins": [plugin], "only_if_missing": True}}}},
            resources=resources)
        assert again.success and _roll_metadata(again)["outcome"] == "skipped"
        time.sleep(5)  # a few more batches after the roll (load, not an outcome)
    finally:
        producer.stop.set()
        producer.join(200)
    assert not producer.is_alive() and producer.errors == [], producer.errors[:5]
    acked = {(p, o): oid for oid, p, o in producer.acked}

    def every_acked_event():
        rows = catalog.load_table(table).scan(selected_fields=("order_id", "_kafka_partition", "_kafka_offset")).to_arrow()
        return rows.to_pylist() if set(rows.column("order_id").to_pylist()) >= set(acked.values()) else None

    rows = wait_for(every_acked_event, f"all {len(acked)} acked events in {table}", 300, interval=2)
    ids = Counter(r["order_id"] for r in rows)
    positions = Counter((r["_kafka_partition"], r["_kafka_offset"]) for r in rows)
    print(f"[roll] {len(acked)} events acked, {len(rows)} rows in {table}", flush=True)
    assert [i for i, n in ids.items() if n > 1] == [], "an acked event twice"
    assert [p for p, n in positions.items() if n > 1] == [], "an offset twice"
    assert set(positions) == set(acked) and len(rows) == len(acked)

    # the sink stopped: its connector instance stays on one worker, the other runs nothing and is listed idle
    client.stop(connector)
    client.wait_for_state(connector, {"STOPPED"}, timeout=60, require_tasks=False)
    quiet = wait_for(lambda: idle_listed(resources), "connect/cluster listing a configured worker idle once the sink is "
                     f"stopped (connectors on the cluster: {sorted(client.list_connectors(False, False))})", 60, interval=2)
    print(f"[roll] connect/cluster with the sink stopped:\n{quiet['workers']}", flush=True)
    assert quiet["worker_count"] == 2 and quiet["workers_answering"] == 2
    assert set(quiet["workers_idle"]) < {u.removeprefix("http://") for u in urls}  # one idle, one holding the connector
    client.close()


def idle_listed(resources: dict) -> dict | None:
    """The view once it lists an idle worker (Connect's statuses drop a stopped connector's tasks a
    little after it reports STOPPED)."""
    view = observe_connect_cluster(resources)
    return view if view["workers_idle"] else None
