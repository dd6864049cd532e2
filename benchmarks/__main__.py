"""``python -m benchmarks [NAME ...]``: run every ``benchmarks/bench_*.py`` (or the NAMEs given).

Prints one table of every measurement next to its target and appends the run - results, targets,
verdicts and the machine - to ``build/benchmarks.json`` (a JSON list, newest run last), so numbers
from different days and machines can be compared. Benchmarks are not tests: a missed target is
reported, not raised, and the exit code only says whether every benchmark *ran*.
"""

from __future__ import annotations

import importlib
import json
import operator
import os
import pkgutil
import platform
import re
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

import confluent_kafka

from lakebus_dagster.settings import REPO_ROOT

RESULTS_FILE = REPO_ROOT / "build" / "benchmarks.json"
_COMPARISONS: dict[str, Callable[[float, float], bool]] = {">=": operator.ge, "<=": operator.le}


@dataclass(frozen=True)
class Target:
    """``value <op> threshold``, e.g. ``Target(">=", 0.8)``."""

    op: str
    threshold: float

    def met(self, value: float) -> bool:
        return _COMPARISONS[self.op](value, self.threshold)

    def __str__(self) -> str:
        return f"{self.op} {self.threshold:g}"


#: (benchmark module, metric) -> target; BENCHMARKS.md quotes the same numbers.
TARGETS: dict[tuple[str, str], Target] = {
    ("bench_events_encode", "ratio"): Target(">=", 5.0),
    ("bench_events_produce", "sdk_vs_raw_ratio"): Target(">=", 0.8),
    ("bench_events_produce", "log_vs_envelope_ratio"): Target("<=", 0.15),
    ("bench_lakehouse", "history_unpartitioned_30d_vs_1d_ratio"): Target("<=", 1.5),
    ("bench_lakehouse", "history_partitioned_30d_vs_1d_ratio"): Target("<=", 1.5),
    ("bench_lakehouse", "compaction_scan_speedup"): Target(">=", 3.0),
    ("bench_lakehouse", "bytes_parquet_vs_envelope_ratio_sink"): Target("<=", 0.05),
    ("bench_lakehouse", "bytes_parquet_vs_envelope_ratio_compacted"): Target("<=", 0.05),
    ("bench_sink_door", "lakebus_vs_bare_ratio"): Target(">=", 0.85),
    # the shipped sink lands a backlog at half a plain writer's rate or better (BENCHMARKS.md#raw-writer)
    ("bench_raw_writer", "sink_vs_raw_ratio"): Target(">=", 0.5),
    # change capture (issue 30): what the capture gives must be the database, one update reaches the
    # lake within two commit intervals of the shipped 10 s, and a burst flows at >= 1,000 changes/s
    ("bench_cdc", "current_state_matches_database"): Target(">=", 1),
    ("bench_cdc", "latency_to_current_state_p50_s"): Target("<=", 15.0),
    ("bench_cdc", "latency_to_current_state_max_s"): Target("<=", 25.0),
    ("bench_cdc", "current_state_events_per_s"): Target(">=", 1000.0),
    ("bench_sink_door", "lakebus_vs_bare_bytes_pp"): Target("<=", 1.0),
    ("bench_ingest_e2e", "tuned_vs_seed_ratio"): Target(">=", 2.0),
    # an hour of 10 million bets builds in a minute, the day holding it in two (BENCHMARKS.md#dws-scale)
    ("bench_dws_scale", "scale_run_s"): Target("<=", 60.0),
    ("bench_dws_scale", "day_run_s"): Target("<=", 120.0),
    ("bench_ingest_e2e", "tuned_p95_minus_interval_s"): Target("<=", 5.0),
    ("bench_dws_latency", "demo_speedup"): Target(">=", 5.0),
    ("bench_dws_latency", "demo_run_speedup"): Target(">=", 5.0),
    ("bench_dws_latency", "demo_connect_session_s_max"): Target("<=", 3.0),
    ("bench_dws_latency", "tick_connect_session_s_max"): Target("<=", 3.0),
    ("bench_dws_latency", "tick_connect_wall_s"): Target("<=", 60.0),
    # kills at every phase of the commit cycle: nothing lost upstream (before any re-queue), nothing
    # missing or twice at the end, no incident, first rows p95 <= 45 s
    ("bench_failover_protocol", "phases_first_rows_p95_s"): Target("<=", 45.0),
    ("bench_failover_protocol", "phases_lost_upstream"): Target("<=", 0),
    ("bench_failover_protocol", "phases_requeues"): Target("<=", 0),
    ("bench_failover_protocol", "phases_missing_at_end"): Target("<=", 0),
    ("bench_failover_protocol", "phases_duplicate_events"): Target("<=", 0),
    ("bench_failover_protocol", "phases_other_incidents"): Target("<=", 0),
    # issue 29: first rows p95 <= 45 s over >= 20 kills, no acked event twice or missing at the end
    ("bench_failover_protocol", "sessioned_first_rows_p95_s"): Target("<=", 45.0),
    ("bench_failover_protocol", "sessioned_duplicate_events"): Target("<=", 0),
    ("bench_failover_protocol", "sessioned_missing_at_end"): Target("<=", 0),
    ("bench_failover_protocol", "eager_first_rows_p95_s"): Target("<=", 45.0),
    ("bench_failover_protocol", "eager_duplicate_events"): Target("<=", 0),
    ("bench_failover_protocol", "eager_missing_at_end"): Target("<=", 0),
    ("bench_failover_protocol", "prompt-heal_first_rows_p95_s"): Target("<=", 45.0),
    ("bench_failover_protocol", "prompt-heal_duplicate_events"): Target("<=", 0),
    ("bench_failover_protocol", "prompt-heal_missing_at_end"): Target("<=", 0),
    ("bench_failover_protocol", "stop12-heal_first_rows_p95_s"): Target("<=", 45.0),
    ("bench_failover_protocol", "stop12-heal_duplicate_events"): Target("<=", 0),
    ("bench_failover_protocol", "stop12-heal_missing_at_end"): Target("<=", 0),
    ("bench_failover_protocol", "control10_first_rows_p95_s"): Target("<=", 45.0),
    ("bench_failover_protocol", "control10_duplicate_events"): Target("<=", 0),
    ("bench_failover_protocol", "control10_missing_at_end"): Target("<=", 0),
    ("bench_failover_protocol", "prompt10_first_rows_p95_s"): Target("<=", 45.0),
    ("bench_failover_protocol", "prompt10_duplicate_events"): Target("<=", 0),
    ("bench_failover_protocol", "prompt10_missing_at_end"): Target("<=", 0),
    ("bench_failover_protocol", "stop12_first_rows_p95_s"): Target("<=", 45.0),
    ("bench_failover_protocol", "stop12_duplicate_events"): Target("<=", 0),
    ("bench_failover_protocol", "stop12_missing_at_end"): Target("<=", 0),
    ("bench_failover_protocol", "prompt_first_rows_p95_s"): Target("<=", 45.0),
    ("bench_failover_protocol", "prompt_duplicate_events"): Target("<=", 0),
    ("bench_failover_protocol", "prompt_missing_at_end"): Target("<=", 0),
}


def discover(names: Sequence[str] = ()) -> list[ModuleType]:
    """The ``bench_*`` modules of this package (only ``names`` when given), in name order."""
    package = Path(__file__).parent
    found = sorted(m.name for m in pkgutil.iter_modules([str(package)]) if m.name.startswith("bench_"))
    unknown = set(names) - set(found)
    if unknown:
        raise SystemExit(f"python -m benchmarks: error: unknown benchmark {sorted(unknown)[0]!r}; available: {', '.join(found)}")
    return [importlib.import_module(f"benchmarks.{name}") for name in found if not names or name in names]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram_gib() -> float | None:
    try:
        match = re.search(r"^MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text(), re.M)
    except OSError:
        return None
    return round(int(match.group(1)) / 1024**2, 1) if match else None


def _kafka_version() -> str:
    """The broker version the local stack runs (pinned in the Maven parent pom)."""
    try:
        match = re.search(r"<kafka\.version>([^<]+)<", (REPO_ROOT / "infra" / "maven" / "pom.xml").read_text())
    except OSError:
        return "unknown"
    return match.group(1) if match else "unknown"


def machine_info() -> dict[str, Any]:
    return {
        "nproc": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "ram_gib": _ram_gib(),
        "load_avg_1m_at_start": round(os.getloadavg()[0], 2),
        "os": platform.platform(),
        "python": platform.python_version(),
        "confluent_kafka": confluent_kafka.__version__,
        "librdkafka": confluent_kafka.libversion()[0],
        "kafka_broker": _kafka_version(),
    }


def _format(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def table(results: dict[str, dict[str, Any]]) -> list[list[str]]:
    """Rows of ``benchmark | metric | value | target | verdict``."""
    rows = []
    for bench, metrics in results.items():
        for metric, value in metrics.items():
            target = TARGETS.get((bench, metric))
            verdict = "" if target is None else ("PASS" if target.met(value) else "MISS")
            rows.append([bench, metric, _format(value), "" if target is None else str(target), verdict])
    return rows


def _print_table(rows: list[list[str]]) -> None:
    header = ["benchmark", "metric", "value", "target", ""]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.rjust(w) if i == 2 else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))))


def append_run(run: dict[str, Any], path: Path = RESULTS_FILE) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    history = json.loads(path.read_text()) if path.exists() else []
    if not isinstance(history, list):  # an older single-run file: keep it as the first entry
        history = [history]
    history.append(run)
    path.write_text(json.dumps(history, indent=2) + "\n")


def new_run() -> dict[str, Any]:
    """An entry of build/benchmarks.json: when, the machine, and each benchmark's results or error."""
    return {"started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": machine_info(), "results": {}, "errors": {}, "durations_s": {}}


def measure_into(run: dict[str, Any], name: str, measure: Any) -> None:
    """Run one benchmark's ``measure()`` into ``run``: its results, or its error beside the machine."""
    print(f"[bench] {name} ...", flush=True)
    start = time.monotonic()
    try:
        run["results"][name] = measure()
    except Exception as exc:  # one broken benchmark must not hide the others' numbers
        traceback.print_exc()
        run["errors"][name] = f"{type(exc).__name__}: {exc}"
    run["durations_s"][name] = round(time.monotonic() - start, 1)


def finish(run: dict[str, Any]) -> int:
    """Print the table and the machine, append the run to build/benchmarks.json; 1 if any benchmark failed."""
    rows = table(run["results"])
    run["verdicts"] = {f"{r[0]}.{r[1]}": r[4] for r in rows if r[4]}
    print()
    _print_table(rows)
    machine = run["machine"]
    print(f"\nmachine: {machine['nproc']} x {machine['cpu_model']}, {machine['ram_gib']} GiB, "
          f"load {machine['load_avg_1m_at_start']}; Python {machine['python']}, confluent-kafka "
          f"{machine['confluent_kafka']} (librdkafka {machine['librdkafka']}), Kafka {machine['kafka_broker']}")
    append_run(run)
    print(f"appended to {RESULTS_FILE}")
    return 1 if run["errors"] else 0


def main(argv: Sequence[str]) -> int:
    run = new_run()
    for module in discover(argv):
        measure_into(run, module.__name__.rsplit(".", 1)[1], module.run)
    return finish(run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
