"""What a DWS run costs the user: a Spark application per step (the baseline) vs one long-lived
Spark Connect server the steps attach to (what ships), in one run, on the same data and machine.

Data: ``days`` days of sample events (``events_per_day`` each) sent through a real, isolated bus
into the ODS tables by the real sink. Two shapes of ``dws_hourly_job``, each run as Dagster runs it
(``dagster job execute``: the multiprocess executor, one process per step, a temp DAGSTER_HOME):

* ``demo`` — the demo's 48 hourly partitions (the last two days) in one single-run backfill;
* ``tick`` — one hourly partition (the schedule's run) with the whole history in the ODS.

Each shape runs the **baseline** first — lakebus as it was before Spark Connect, the package at
``BASELINE_COMMIT`` extracted from this repository's history (``git archive``): 8 steps (each DWS
asset and each of its three checks a step of its own, in a process of its own), every step starting
its own Spark application on the stack's standalone master — and then **connect**: this tree, the
steps attached to the stack's Spark Connect server. Measured: wall time of the run (process
start to exit) and the run's own duration (start to success, as the UI shows it; one instance for
every run, created before the first), per-step Spark session time (the asset's ``spark_session_s`` metadata: attach vs
application start), CPU seconds of the run's own processes (embedded drivers included), of the
Spark Connect server (driver) and of the worker's executors. The two legs must write identical DWS
rows (compared through pyiceberg). Targets: demo ``>= 5x`` faster, session ``<= 3 s``.

    python -m benchmarks bench_dws_latency     (needs the local stack: make stack-up)
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import psutil

from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster.events import EventProducer, GeneratorConfig, generate_events
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster_tests.lake_counts import committed_rows
from lakebus_dagster.lake.dws import BET_HOUR, RECHARGE_HOUR, LakehouseTables
from lakebus_dagster.settings import REPO_ROOT, Settings, load_local_secrets
from lakebus_dagster.stack.local_settings import load_stack_settings
from lakebus_dagster.stack import process

LAST_DAY = date(2025, 11, 30)
#: the last commit before Spark Connect: the baseline's code
BASELINE_COMMIT = "dd3a0ec"


def baseline_tree(into: str) -> str:
    """``lakebus_dagster`` and ``infra/maven`` (its jar cache key) as of :data:`BASELINE_COMMIT`, under ``into``."""
    archive = subprocess.run(["git", "archive", BASELINE_COMMIT, "lakebus_dagster", "infra/maven"], cwd=REPO_ROOT,
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return into


def _cpu(proc: psutil.Process | None, *, children: bool) -> float:
    """CPU seconds of ``proc`` (and, with ``children``, of its live and reaped children)."""
    if proc is None:
        return 0.0
    try:
        t = proc.cpu_times()
        total = 0.0 if children else t.user + t.system
        if children:
            total += t.children_user + t.children_system
            for child in proc.children(recursive=True):
                try:
                    c = child.cpu_times()
                    total += c.user + c.system
                except psutil.NoSuchProcess:
                    pass
        return total
    except psutil.NoSuchProcess:
        return 0.0


def _own_children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def land(settings: Settings, suffix: str, days: int, per_day: int) -> LakehouseTables:
    """Provision an isolated bus and land ``days`` x ``per_day`` sample events in its ODS tables."""
    from lakebus_dagster.definitions import defs

    resources = {**build_resources(settings), "layout": BusLayoutResource(name_suffix=suffix)}
    layout = resources["layout"].layout()
    assert defs.resolve_job_def("provision_lakebus").execute_in_process(resources=resources).success
    first = LAST_DAY - timedelta(days=days - 1)
    sample = GeneratorConfig(count=days * per_day, seed=1818,
                             days=tuple(str(first + timedelta(days=d)) for d in range(days)), users=200)
    events = list(generate_events(sample))
    with EventProducer(layout.bus_topic.name, settings.kafka.client_config()) as producer:
        for event in events:
            producer.send(event)
    expected = {layout.routes[e]: sum(x.event == e for x in events) for e in ("bet", "recharge")}
    catalog = load_catalog(settings)
    deadline = time.monotonic() + 600
    while {t: committed_rows(catalog, t) for t in expected} != expected:
        if time.monotonic() > deadline:
            raise TimeoutError(f"ODS rows {expected} not landed in 600 s")
        time.sleep(2)
    print(f"[bench_dws_latency] {len(events)} events over {days} days in the ODS", flush=True)
    return LakehouseTables.from_routes(layout.routes)


def run_job(settings: Settings, home: str, suffix: str, tags: dict[str, str], spark_env: dict[str, str],
            code: Path = REPO_ROOT, job: str = "dws_hourly_job") -> dict[str, Any]:
    """``job`` (the hourly DWS job unless named) as a Dagster run of its own in the instance at ``home``: wall time of the
    process, the run's own duration (start to success, as the UI shows it), CPU, session times."""
    from dagster import DagsterEventType, DagsterInstance

    worker = process.find_process(settings, "spark-worker")
    server = process.find_process(settings, "spark-connect")
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")}
    env.update({"DAGSTER_HOME": home, "LAKEBUS_BUS_SUFFIX": suffix, **spark_env})
    argv = [sys.executable, "-m", "dagster", "job", "execute", "-m", "lakebus_dagster.definitions",
            "-j", job, "--tags", json.dumps(tags)]
    before = (_own_children_cpu(), _cpu(server, children=False), _cpu(worker, children=True))
    started = time.monotonic()
    if code != REPO_ROOT:  # another tree's package first (python -m puts the working directory first)
        env.update({"PYTHONPATH": str(code), "LAKEBUS_STATE_DIR": str(settings.state_dir)})
    proc = subprocess.run(argv, cwd=code, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - started
    after = (_own_children_cpu(), _cpu(server, children=False), _cpu(worker, children=True))
    if proc.returncode != 0:
        raise RuntimeError(f"{job} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    with DagsterInstance.from_config(home) as instance:
        run = instance.get_runs(limit=1)[0]
        record = instance.get_run_record_by_id(run.run_id)
        sessions = [
            meta["spark_session_s"].value
            for e in instance.all_logs(run.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION)
            if "spark_session_s" in (meta := e.dagster_event.event_specific_data.materialization.metadata)
        ]
        steps = {e.step_key for e in instance.all_logs(run.run_id, of_type=DagsterEventType.STEP_SUCCESS)}
    return {
        "wall_s": round(wall, 1),
        "run_s": round(record.end_time - record.start_time, 1),
        "steps": len(steps),
        # the baseline's code does not report it (its steps each start an application: see its step times)
        **({"session_s_max": round(max(sessions), 2), "session_s_median": round(statistics.median(sessions), 2)}
           if sessions else {}),
        "run_cpu_s": round(after[0] - before[0], 1),
        "connect_server_cpu_s": round(after[1] - before[1], 1),
        "executor_cpu_s": round(after[2] - before[2], 1),
    }


def dws_rows(catalog, tables: LakehouseTables) -> dict[str, list]:
    return {spec.name: sorted(tuple(sorted(r.items())) for r in catalog.load_table(tables.dws(spec)).scan().to_arrow().to_pylist())
            for spec in (BET_HOUR, RECHARGE_HOUR)}


def connect_stack_settings(bench: str) -> Settings:
    """The local stack's settings (its secrets loaded), refusing an embedded Spark session: the DWS
    benchmarks measure runs on the stack's Spark Connect server, as deployed."""
    settings = load_stack_settings()
    load_local_secrets(settings)
    if settings.spark.remote is None:
        raise SystemExit(f"{bench} runs on the stack's Spark Connect server: unset LAKEBUS_SPARK_REMOTE=local")
    return settings


def run(days: int = 30, events_per_day: int = 1000) -> dict[str, Any]:
    settings = connect_stack_settings("bench_dws_latency")
    suffix = f"benchdws{uuid.uuid4().hex[:6]}"
    tables = land(settings, suffix, days, events_per_day)
    catalog = load_catalog(settings)
    first_demo_day = LAST_DAY - timedelta(days=1)
    shapes = {
        "demo": {"dagster/asset_partition_range_start": f"{first_demo_day}-00:00",
                 "dagster/asset_partition_range_end": f"{LAST_DAY}-23:00"},
        "tick": {"dagster/partition": f"{LAST_DAY}-12:00"},
    }
    old = Path(baseline_tree(tempfile.mkdtemp(prefix="bench-dws-baseline-")))
    legs = {
        "baseline": ({"LAKEBUS_SPARK_MASTER": settings.local_spark_master, "LAKEBUS_SPARK_DRIVER_MEMORY": "1g"}, old),
        "connect": ({}, REPO_ROOT),
    }
    results: dict[str, Any] = {}
    # one instance for every run, created before the first (a deployment's instance exists already)
    home = tempfile.mkdtemp(prefix="bench-dws-")
    Path(home, "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    from dagster import DagsterInstance

    with DagsterInstance.from_config(home) as instance:
        instance.get_runs(limit=1)
    try:
        for shape, tags in shapes.items():
            rows = {}
            for leg, (env, code) in legs.items():
                print(f"[bench_dws_latency] {shape} / {leg} ...", flush=True)
                measured = run_job(settings, home, suffix, tags, env, code)
                print(f"[bench_dws_latency] {shape} / {leg}: {measured}", flush=True)
                results.update({f"{shape}_{leg}_{k}": v for k, v in measured.items()})
                rows[leg] = dws_rows(catalog, tables)
            if rows["baseline"] != rows["connect"]:
                raise AssertionError(f"{shape}: the two legs wrote different DWS rows")
            results[f"{shape}_speedup"] = round(results[f"{shape}_baseline_wall_s"] / results[f"{shape}_connect_wall_s"], 2)
            results[f"{shape}_run_speedup"] = round(results[f"{shape}_baseline_run_s"] / results[f"{shape}_connect_run_s"], 2)
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
        delete_connector(settings, suffix)
    return results


def delete_connector(settings: Settings, suffix: str) -> None:
    """Stop the sink of the benchmark's bus (``suffix``): its tables and topics stay for a look."""
    from lakebus_dagster.connect import ConnectClient

    layout = BusLayoutResource(name_suffix=suffix).layout()
    with ConnectClient(settings.connect.urls[0]) as client:
        if client.exists(layout.connector_name):
            client.delete(layout.connector_name)


if __name__ == "__main__":
    from benchmarks.__main__ import main

    sys.exit(main(["bench_dws_latency", *sys.argv[1:]]))
