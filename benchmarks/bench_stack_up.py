"""What a user waits for before anything runs: ``lakebus stack up`` from stopped, baseline vs shipped,
alternating in one run on the same machine.

* **baseline** — the engine as it was before (every service one after the other, each healthy
  before the next starts), Connect's default plugin discovery (``hybrid_warn``: every class of
  every jar on the plugin path scanned, then the ServiceLoader manifests read as well) and the
  JVMs' default JIT (tiered up to C2);
* **shipped** — each service started as soon as what it depends on is healthy (the Spark master and
  worker beside S3 and the brokers), ``plugin.discovery=service_load`` and the client compiler
  only (``-XX:TieredStopAtLevel=1``, :data:`lakebus_dagster.stack.service.CLIENT_COMPILER_ONLY`).

Each leg is a child process on a fresh state directory and ports of its own (nothing of the dev
stack is touched), the shared jar cache warm; it runs ``up``, records the wall time, each service's
"healthy after" and the CPU seconds the stack's processes spent getting there (on a loaded 2-core
CI box CPU is what start-ups compete for), then ``down``. Profiles: ``single`` (``make demo``'s) and
``cluster`` (3 brokers, 2 Connect workers).

    python -m benchmarks bench_stack_up          (no stack needed; ~5 min)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from typing import Any

#: ports apart from every stack make test or the dev stack runs
BENCH_PORTS = {
    "LAKEBUS_KAFKA_PORT": "33092",
    "LAKEBUS_KAFKA_CONTROLLER_PORT": "33093",
    "LAKEBUS_CONNECT_PORT": "34083",
    "LAKEBUS_REST_CATALOG_PORT": "34181",
    "LAKEBUS_S3_PORT": "34000",
    "LAKEBUS_SPARK_MASTER_PORT": "34077",
    "LAKEBUS_SPARK_WEBUI_PORT": "34090",
    "LAKEBUS_SPARK_CONNECT_PORT": "33002",
    "LAKEBUS_DAGSTER_PORT": "33000",
}
LEGS = ("baseline", "shipped")


def run(rounds: int = 2, profiles: tuple[str, ...] = ("single", "cluster")) -> dict[str, float]:
    results: dict[str, float] = {}
    for profile in profiles:
        walls: dict[str, list[float]] = {leg: [] for leg in LEGS}
        cpus: dict[str, list[float]] = {leg: [] for leg in LEGS}
        for r in range(rounds):
            for leg in (LEGS if r % 2 == 0 else LEGS[::-1]):  # alternate: neither leg always goes first
                got = _child(leg, profile)
                print(f"[bench_stack_up] {profile} {leg} round {r + 1}: up {got['wall_s']:.1f} s, "
                      f"CPU {got['cpu_s']:.0f} s; {got['healthy_after']}", flush=True)
                walls[leg].append(got["wall_s"])
                cpus[leg].append(got["cpu_s"])
        for leg in LEGS:
            results[f"{profile}_{leg}_up_s"] = round(statistics.median(walls[leg]), 1)
            results[f"{profile}_{leg}_cpu_s"] = round(statistics.median(cpus[leg]), 1)
        results[f"{profile}_speedup"] = round(results[f"{profile}_baseline_up_s"] / results[f"{profile}_shipped_up_s"], 2)
    return results


def _child(leg: str, profile: str) -> dict[str, Any]:
    state = tempfile.mkdtemp(prefix=f"lakebus-bench-up-{leg}-")
    env = {**os.environ, **BENCH_PORTS, "LAKEBUS_PROFILE": profile, "LAKEBUS_STATE_DIR": state}
    try:
        proc = subprocess.run([sys.executable, "-m", "benchmarks.bench_stack_up", leg], env=env,
                              capture_output=True, text=True, timeout=900)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if proc.returncode != 0 or not line:
            raise RuntimeError(f"{leg} leg failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return json.loads(line[len("RESULT "):])
    finally:
        subprocess.run([sys.executable, "-m", "lakebus_dagster.stack", "down"], env=env, capture_output=True, timeout=300)
        shutil.rmtree(state, ignore_errors=True)


def _as_baseline() -> None:
    """The engine and the worker config as they were before: one service after the other, and the
    worker's default plugin discovery."""
    from lakebus_dagster.stack import engine, kafka_services, service, spark_services

    def one_after_the_other(services):
        """Each start batch (one service, or a start group's members) waits for the whole batch before it."""
        needs: dict[str, set[str]] = {}
        before: set[str] = set()
        batch: set[str] = set()
        group = None
        for svc in services:
            if not (svc.start_group and svc.start_group == group):
                before, batch, group = batch, set(), svc.start_group
            batch.add(svc.name)
            needs[svc.name] = set(before)
        return needs

    shipped_props = kafka_services.connect_worker_properties

    def default_discovery(node):
        return {k: v for k, v in shipped_props(node).items() if k != "plugin.discovery"}

    engine.prerequisites = one_after_the_other
    kafka_services.connect_worker_properties = default_discovery
    # and the JVMs' default JIT (tiered up to C2), the executors' too
    service.JVM_FLAGS.remove(service.CLIENT_COMPILER_ONLY)
    spark_services.CLIENT_COMPILER_ONLY = ""


def _leg(leg: str) -> dict[str, Any]:
    import contextlib
    import io
    import time

    import psutil

    from lakebus_dagster.stack import manager, process
    from lakebus_dagster.stack.local_settings import load_stack_settings
    from lakebus_dagster.stack.services import profile_service_names

    if leg == "baseline":
        _as_baseline()
    settings = load_stack_settings()
    out = io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(out):
        manager.up(settings)
    wall = time.monotonic() - started
    cpu = 0.0
    for name in profile_service_names(settings):
        proc = process.find_process(settings, name)
        if proc is not None:
            with contextlib.suppress(psutil.Error):
                times = proc.cpu_times()
                cpu += times.user + times.system
    healthy = dict(re.findall(r"\[stack\] (\S+)\s+healthy after ([\d.]+)s", out.getvalue()))
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "healthy_after": healthy}


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] in LEGS:
        print("RESULT " + json.dumps(_leg(sys.argv[1])), flush=True)
    else:
        print(json.dumps(run(), indent=1))
