"""End-to-end ingest on the cluster profile: 3 KRaft brokers (RF 3, min ISR 2), 2 Connect workers,
the sink with 1 task vs 2 tasks (2 bus partitions), measured one after the other in one run.

The benchmark brings up its own cluster profile (``LAKEBUS_PROFILE=cluster``) in
``.lakebus-bench-cluster`` on ports of its own (:data:`CLUSTER_ENV`), so it runs next to the
single-node stack that ``make bench`` starts; the cluster is stopped again at the end unless it
was already running. The measurement itself is :func:`benchmarks.bench_ingest_e2e.run_variant`
(backlog throughput, then freshness at a steady rate), run in a child process that sees only the
cluster's settings; CPU is summed over both Connect workers.

    python -m benchmarks bench_cluster_ingest
    python -m benchmarks.bench_cluster_ingest [n] [rate] [duration_s]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

from lakebus_dagster.settings import REPO_ROOT

#: the benchmark's own cluster: state dir and base ports apart from the local stack and from the
#: profiles' stages of ``make test`` (broker n at 24092+10(n-1), workers at 25083/25093)
CLUSTER_ENV = {
    "LAKEBUS_PROFILE": "cluster",
    "LAKEBUS_STATE_DIR": str(REPO_ROOT / ".lakebus-bench-cluster"),
    "LAKEBUS_KAFKA_PORT": "24092",
    "LAKEBUS_KAFKA_CONTROLLER_PORT": "24093",
    "LAKEBUS_CONNECT_PORT": "25083",
    "LAKEBUS_REST_CATALOG_PORT": "25181",
    "LAKEBUS_S3_PORT": "25000",
    "LAKEBUS_SPARK_MASTER_PORT": "25077",
    "LAKEBUS_SPARK_WEBUI_PORT": "25080",
}


def _stack(*command: str, quiet: bool = False) -> int:
    return subprocess.run([sys.executable, "-m", "lakebus_dagster.stack", *command], env={**os.environ, **CLUSTER_ENV},
                          cwd=REPO_ROOT, capture_output=quiet).returncode


def run(n: int = 200_000, rate: float = 2000.0, duration_s: float = 30.0) -> dict[str, float]:
    was_up = _stack("status", "--check", quiet=True) == 0
    print(f"[bench_cluster_ingest] bringing up the cluster profile in {CLUSTER_ENV['LAKEBUS_STATE_DIR']} ...", flush=True)
    if _stack("up") != 0:
        raise RuntimeError("the cluster profile did not come up; see the [stack] lines above")
    try:
        child = subprocess.run([sys.executable, "-m", "benchmarks.bench_cluster_ingest", "--measure", str(n), str(rate),
                                str(duration_s)], env={**os.environ, **CLUSTER_ENV}, cwd=REPO_ROOT,
                               stdout=subprocess.PIPE, text=True)
        line = next((ln for ln in child.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if child.returncode != 0 or line is None:
            raise RuntimeError(f"the measurement failed (exit {child.returncode}):\n{child.stdout[-3000:]}")
        return json.loads(line[len("RESULT "):])
    finally:
        if not was_up:
            _stack("down")


def measure(n: int, rate: float, duration_s: float) -> dict[str, float]:
    """In the child: the cluster's settings come from the environment (CLUSTER_ENV)."""
    from benchmarks.bench_ingest_e2e import Variant, _cleanup, _layout, cpu_seconds, run_variant
    from lakebus_dagster.bus.layout import BusLayout, SinkTuning
    from lakebus_dagster.settings import load_local_secrets, load_settings

    settings = load_settings()
    load_local_secrets(settings)
    assert settings.profile == "cluster", settings.profile
    pids = [int((settings.run_dir / f"{name}.pid").read_text()) for name in ("connect", "connect-2")]
    tag = uuid.uuid4().hex[:6]
    base = BusLayout.default().with_suffix(f"cl{tag}").with_replication(3, 2)
    chosen = [Variant("tasks1", 1, SinkTuning()), Variant("tasks2", 2, SinkTuning())]
    layouts = [_layout(base, tag, v) for v in chosen]
    results: dict[str, float] = {"events": n, "freshness_rate_per_s": rate, "load_1min_at_start": os.getloadavg()[0]}
    try:
        for layout, v in zip(layouts, chosen):
            cpu0 = sum(cpu_seconds(p) for p in pids)
            measured = run_variant(settings, layout, v, n, rate, duration_s, False, tag, settings.connect_url, pids[0])
            # run_variant's CPU figures are of one worker; both workers' CPU over the whole variant instead
            measured = {k: val for k, val in measured.items() if "connect_cpu" not in k}
            measured[f"{v.name}_workers_cpu_s"] = sum(cpu_seconds(p) for p in pids) - cpu0
            results.update(measured)
        results["tasks2_vs_tasks1_ratio"] = results["tasks2_events_per_s"] / results["tasks1_events_per_s"]
        results["load_1min_at_end"] = os.getloadavg()[0]
        return results
    finally:
        _cleanup(settings, layouts)


def main(argv: list[str]) -> None:
    measuring = "--measure" in argv
    args = [a for a in argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 200_000
    rate = float(args[1]) if len(args) > 1 else 2000.0
    duration = float(args[2]) if len(args) > 2 else 30.0
    if measuring:
        print("RESULT " + json.dumps(measure(n, rate, duration)), flush=True)
    else:
        print(json.dumps(run(n, rate, duration), indent=1))


if __name__ == "__main__":
    main(sys.argv)
