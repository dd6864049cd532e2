"""Soak: the shipped Dagster deployment (webserver + daemon, every schedule and sensor as shipped) on an
isolated bus under steady load for ``minutes``, sampled every ``sample_s``.

* A ``dagster dev`` of its own (as ``lakebus ui up`` starts it: :func:`lakebus_dagster.stack.dagster_ui.up`,
  the local instance's concurrency limits) on port ``port`` (default 3300; 3000 is the demo's), with
  its DAGSTER_HOME under ``build/bench-soak-<suffix>/`` and ``LAKEBUS_BUS_SUFFIX=<suffix>``: topics,
  connector and namespaces of its own on the running local stack, the sink's shipped 10 s commits.
* ``provision_lakebus`` launched through the UI's GraphQL API (:mod:`lakebus_dagster.stack.launch`).
* ``rate`` events/s (3 bets : 1 recharge) through the event SDK's ``EventProducer``, stamped with the
  current time (so the hourly DWS schedule builds real hours), unique order ids.
* Every ``sample_s``: events acknowledged vs rows committed in the ODS tables; runs by job and status;
  failed ticks; alerts (``lakebus/alerts`` observations and ``ALERT`` lines of the daemon's log); per
  lake table of the bus (ODS and DWS): snapshots, live data files, tracked ``metadata.json`` (the
  metadata log) and what S3 holds under the table (``metadata.json`` files and bytes, manifests,
  data files). RSS of every stack service (``lakebus stack status``'s figure:
  :func:`lakebus_dagster.stack.manager.status`) and of the soak's Dagster process group, at the start
  and the end.
* At the end: the producer stops, the sink drains, runs and backfills in flight may finish (``drain_s``); every
  sent order id is looked up in the ODS tables (lost, duplicated, unexpected).

Schedules tick on the wall clock: a 20-minute soak sees at most one tick of the hourly maintenance
(:40), of the hourly DWS build (:15) and of the gap-fill sensor (:45), and none of the daily ones; the
result names the ticks its window contained. The deployment config file (``LAKEBUS_CONFIG``) cannot
override crons, so nothing is compressed.

    lakebus bench bench_soak                              (20 minutes, or BENCH_SOAK_MINUTES; needs the local stack)
    python -m benchmarks.bench_soak --minutes 15 [--rate 300] [--sample-s 60] [--port 3300] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from lakebus_dagster.settings import REPO_ROOT, load_local_secrets
from lakebus_dagster.stack.local_settings import load_stack_settings

DEFAULT_MINUTES = 20.0
DEFAULT_PORT = 3300
SERVICE = "dagster-soak"
#: the instance keeps no telemetry; everything else is what ``dagster_ui.up`` writes for ``lakebus ui up``
INSTANCE_YAML = "telemetry:\n  enabled: false\n"
ALERT_LINE = re.compile(r"ALERT (\w+): (.*)")


def log(msg: str) -> None:
    print(f"[bench_soak] {time.strftime('%H:%M:%S')} {msg}", flush=True)


class Load(threading.Thread):
    """Produces ``rate`` events/s (3 bets : 1 recharge) stamped now, until stopped; remembers which
    order id went to which event."""

    def __init__(self, settings, topic: str, rate: float, first_order_id: int) -> None:
        super().__init__(daemon=True)
        self.settings, self.topic, self.rate, self.first = settings, topic, rate, first_order_id
        self.stop = threading.Event()
        self.kinds = bytearray()  # 0 bet, 1 recharge, by order id - first
        self.producer = None
        self.error: BaseException | None = None

    @property
    def acked(self) -> int:
        return self.producer.delivered if self.producer else 0

    @property
    def failed(self) -> int:
        return self.producer.failed if self.producer else 0

    def run(self) -> None:
        from lakebus_dagster.events import Bet, EventProducer, Recharge
        from lakebus_dagster.events.registry import default_registry

        versions = {m: default_registry.for_model(m).version for m in (Bet, Recharge)}
        rng = random.Random(self.first)
        slice_s = 0.05
        per_slice = max(1, int(self.rate * slice_s))
        try:
            with EventProducer(self.topic, {**self.settings.kafka.client_config(), "linger.ms": 5}) as producer:
                self.producer = producer
                start = time.monotonic()
                seq = 0
                while not self.stop.is_set():
                    due = start + seq / self.rate
                    if (ahead := due - time.monotonic()) > 0:
                        time.sleep(ahead)
                    now = datetime.now(timezone.utc)
                    ts = int(now.timestamp() * 1000)
                    for _ in range(per_slice):
                        is_bet = rng.random() < 0.75
                        common = dict(category="biz", log_date=now.strftime("%Y-%m-%d"), hour=now.strftime("%H"), plat_id=1,
                                      app_id=10406, ts=ts, user_id=2001 + rng.randrange(1000), order_id=str(self.first + seq),
                                      currency=rng.choice(("BRL", "USD")))
                        if is_bet:
                            event = Bet(event="bet", schema_version=versions[Bet], amount=round(rng.uniform(1, 500), 2),
                                        game_id=rng.choice((777, 778, 779)), **common)
                        else:
                            failed = rng.random() < 0.1
                            event = Recharge(event="recharge", schema_version=versions[Recharge],
                                             amount=round(rng.uniform(10, 2000), 2), status="failed" if failed else "success",
                                             reason="timeout" if failed else None, **common)
                        producer.send(event)
                        self.kinds.append(0 if is_bet else 1)
                        seq += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc


# -- reading the deployment ------------------------------------------------------------------------
def instance_summary(home) -> dict[str, Any]:
    """Runs by job and status, ticks by instigator and status (failed ones with their error), alerts."""
    import dagster as dg

    from lakebus_dagster.defs.alerts import ALERTS_ASSET_KEY

    with dg.DagsterInstance.from_config(str(home)) as instance:
        records = instance.get_run_records()
        runs = Counter(f"{r.dagster_run.job_name} [{_origin(r.dagster_run.tags)}]:{r.dagster_run.status.value}" for r in records)
        failed_runs = []
        for r in records:
            if r.dagster_run.status.value != "FAILURE":
                continue
            errors = []
            for e in instance.all_logs(r.dagster_run.run_id, of_type={dg.DagsterEventType.STEP_FAILURE,
                                                                       dg.DagsterEventType.RUN_FAILURE}):
                data = e.dagster_event.event_specific_data
                err = getattr(data, "error", None)
                if err is not None:
                    errors.append(f"{err.cls_name}: {err.message.strip()[:300]}")
                elif e.message:
                    errors.append(e.message[:300])
            failed_runs.append({"job": r.dagster_run.job_name, "run_id": r.dagster_run.run_id,
                                "tags": {k: v for k, v in r.dagster_run.tags.items() if k.startswith(("dagster/partition",
                                         "dagster/schedule", "dagster/sensor", "dagster/asset_partition"))},
                                "errors": errors[:3]})
        ticks: Counter[str] = Counter()
        failed_ticks = []
        for state in instance.all_instigator_state():
            for t in instance.get_ticks(state.instigator_origin_id, state.selector_id, limit=100_000):
                ticks[f"{state.instigator_name}:{t.status.value}"] += 1
                if t.status.value == "FAILURE":
                    failed_ticks.append({"instigator": state.instigator_name, "at": t.timestamp,
                                         "error": (t.error.message[:400] if t.error else "")})
        alerts = [{k: r.asset_observation.metadata[k].value for k in ("kind", "title") if k in r.asset_observation.metadata}
                  for r in instance.fetch_observations(ALERTS_ASSET_KEY, limit=10_000).records]
        in_flight = sum(1 for r in records if r.dagster_run.status.value in ("QUEUED", "NOT_STARTED", "STARTING", "STARTED"))
        # declarative automation (the DWS gap fill) requests backfills, whose runs come later
        backfills = []
        for b in instance.get_backfills():
            target = b.asset_backfill_data.target_subset if b.asset_backfill_data else None
            partitions = sum(len(ps.get_partition_keys()) for ps in target.partitions_subsets_by_asset_key.values()) if target else 0
            backfills.append({"id": b.backfill_id, "status": b.status.value, "asset_partitions": partitions,
                              "target": str(target)[:400] if target else ""})
        in_flight += sum(1 for b in backfills if b["status"] in ("REQUESTED", "CANCELING", "FAILING"))
    return {"runs": dict(sorted(runs.items())), "failed_runs": failed_runs, "ticks": dict(sorted(ticks.items())),
            "failed_ticks": failed_ticks, "alerts": alerts, "in_flight": in_flight, "backfills": backfills}


def _origin(tags: dict[str, str]) -> str:
    """What started a run: its schedule, its sensor, or a launch through the UI (provisioning)."""
    return tags.get("dagster/schedule_name") or tags.get("dagster/sensor_name") or (
        "automation" if any(k.startswith("dagster/automation") for k in tags) else "launched")


def alert_lines(path) -> list[str]:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return []
    return [m.group(0)[:300] for m in ALERT_LINE.finditer(text)]


def table_stats(catalog, s3, identifier: str) -> dict[str, Any] | None:
    """Snapshots, live data files, tracked metadata.json and what S3 holds under the table; None before it exists."""
    from benchmarks.bench_compressed_month import s3_prefix_stats

    try:
        table = catalog.load_table(identifier)
    except Exception:  # noqa: BLE001 - not created yet (the sink creates an ODS table with its first event)
        return None
    meta = table.metadata
    current = table.current_snapshot()
    props = current.summary.additional_properties if current and current.summary else {}
    s3_stats = s3_prefix_stats(s3, meta.location)
    return {
        "snapshots": len(meta.snapshots),
        "live_data_files": int(props.get("total-data-files", 0)),
        "records": int(props.get("total-records", 0)),
        "metadata_json_tracked": len(meta.metadata_log) + 1,
        **{k.removeprefix("s3_"): v for k, v in s3_stats.items()},
    }


def rss_mib(stack, ui_settings, port: int) -> dict[str, float]:
    """RSS per stack service (what ``lakebus stack status`` prints) and of the soak's Dagster group."""
    from lakebus_dagster.stack import dagster_ui, manager, process

    out = {s.name: round(s.rss / 2**20) for s in manager.status(stack) if s.pid}
    proc = process.find_process(ui_settings, SERVICE, dagster_ui.expected_cmdline(port))
    out[SERVICE] = round(process.rss_bytes(proc) / 2**20) if proc else 0
    out["total"] = sum(out.values())
    return out


def schedule_ticks_in_window(start: float, end: float) -> dict[str, list[str]]:
    """Each shipped schedule's cron ticks that fall in [start, end] (UTC)."""
    # private: Dagster 1.13 has no public iterator over a cron schedule's ticks
    from dagster._utils.schedules import cron_string_iterator

    from lakebus_dagster.definitions import defs

    out = {}
    for schedule in defs.get_repository_def().schedule_defs:
        times = []
        for tick in cron_string_iterator(start, schedule.cron_schedule, schedule.execution_timezone or "UTC"):
            if tick.timestamp() > end:
                break
            times.append(tick.strftime("%H:%M"))
        out[f"{schedule.name} ({schedule.cron_schedule}, {schedule.default_status.value})"] = times
    return out


def order_check(catalog, routes: dict[str, str], load: Load) -> dict[str, int]:
    """Every sent order id looked up in its ODS table: lost, duplicated, unexpected."""
    out = {}
    for code, event in ((0, "bet"), (1, "recharge")):
        sent = {load.first + i for i, k in enumerate(load.kinds) if k == code}
        try:
            column = catalog.load_table(routes[event]).scan(selected_fields=("order_id",)).to_arrow().column("order_id").to_pylist()
        except Exception:  # noqa: BLE001 - no table: nothing landed
            column = []
        found = Counter(int(x) for x in column if x is not None and x.isdigit())
        out[f"{event}_sent"] = len(sent)
        out[f"{event}_rows"] = len(column)
        out[f"{event}_lost"] = len(sent - set(found))
        out[f"{event}_duplicated"] = sum(n - 1 for n in found.values() if n > 1)
        out[f"{event}_unexpected"] = len(set(found) - sent)
    return out


# -- the run -----------------------------------------------------------------------------------------
def run(minutes: float | None = None, rate: float = 300.0, sample_s: float = 60.0, port: int = DEFAULT_PORT,
        drain_s: float = 600.0, keep: bool = False) -> dict[str, Any]:
    from lakebus_dagster.connect import ConnectClient
    from lakebus_dagster.defs.resources import BusLayoutResource
    from lakebus_dagster.lake.catalog import load_catalog
    from lakebus_dagster_tests.lake_counts import committed_rows
    from lakebus_dagster.lake.dws import LakehouseTables
    from lakebus_dagster.stack import dagster_ui, launch, process
    from lakebus_dagster.stack.s3 import s3_client

    if minutes is None:  # `lakebus bench bench_soak` passes no arguments
        minutes = float(os.environ.get("BENCH_SOAK_MINUTES", DEFAULT_MINUTES))
    stack = load_stack_settings()
    load_local_secrets(stack)
    suffix = f"soak{uuid.uuid4().hex[:6]}"
    state = REPO_ROOT / "build" / f"bench-soak-{suffix}"
    ui_settings = replace(stack, state_dir=state)
    home = dagster_ui.dagster_home(ui_settings)
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(INSTANCE_YAML)
    if process.port_in_use(stack.host, port):
        raise SystemExit(f"bench_soak: port {port} is in use; pass --port")
    os.environ["LAKEBUS_DAGSTER_PORT"] = str(port)  # launch.* and the code location's links
    env = {"LAKEBUS_BUS_SUFFIX": suffix, "LAKEBUS_DAGSTER_PORT": str(port)}
    layout = BusLayoutResource(name_suffix=suffix).layout()
    routes = dict(layout.routes)
    try:
        lake_tables = [*routes.values(), *LakehouseTables.from_routes(routes).all_dws]
    except Exception:  # noqa: BLE001
        lake_tables = list(routes.values())
    catalog, s3 = load_catalog(stack), s3_client(stack)
    samples_path = REPO_ROOT / "build" / f"bench_soak_{suffix}.json"
    results: dict[str, Any] = {"bus_suffix": suffix, "minutes": minutes, "rate_per_s": rate, "port": port,
                               "load_1min_at_start": round(os.getloadavg()[0], 2)}
    samples: list[dict[str, Any]] = []
    load: Load | None = None
    try:
        log(f"dagster dev on :{port}, DAGSTER_HOME {home}, bus suffix {suffix} ...")
        dagster_ui.up(ui_settings, 300, port=port, home=home, service=SERVICE, env=env)
        t0 = time.monotonic()
        run_id, status = launch.launch("provision_lakebus", port=port, timeout=600)
        results["provision_s"] = round(time.monotonic() - t0, 1)
        results["provision_status"] = status.value
        if status.value != "SUCCESS":
            raise RuntimeError(f"provision_lakebus {run_id} ended {status.value}: {launch.log_messages(run_id, port=port)[-8:]}")
        rss_start = rss_mib(stack, ui_settings, port)
        log(f"provisioned in {results['provision_s']} s; RSS at start (MiB): {rss_start}")

        load = Load(stack, layout.bus_topic.name, rate, first_order_id=10**9 + random.randrange(10**8))
        start_wall = time.time()
        start = time.monotonic()
        load.start()
        end = start + minutes * 60
        header = False
        while True:
            now = time.monotonic()
            time.sleep(max(0.0, min(sample_s - (now - start) % sample_s, end - now)))
            if load.error:
                raise RuntimeError(f"the producer failed: {load.error!r}")
            sample = take_sample(start, load, catalog, s3, routes, lake_tables, home, committed_rows)
            samples.append(sample)
            header = print_sample(sample, header)
            if time.monotonic() >= end - 1:
                break
        load.stop.set()
        load.join(60)
        stop_wall = time.time()
        sent = load.acked
        log(f"load stopped: {sent} acknowledged ({load.failed} failed); draining up to {drain_s:.0f} s ...")
        deadline = time.monotonic() + drain_s
        while time.monotonic() < deadline:
            landed = committed_rows(catalog, *routes.values())
            in_flight = instance_summary(home)["in_flight"]
            if landed >= sent and not in_flight:
                break
            time.sleep(5)
        results["drain_s"] = round(drain_s - max(0.0, deadline - time.monotonic()), 1)
        final = take_sample(start, load, catalog, s3, routes, lake_tables, home, committed_rows)
        samples.append(final)
        print_sample(final, True)
        rss_end = rss_mib(stack, ui_settings, port)
        summary = instance_summary(home)

        results.update({"events_acked": sent, "events_failed": load.failed,
                        "events_per_s_achieved": round(sent / max(1.0, stop_wall - start_wall), 1)})
        results.update(order_check(catalog, routes, load))
        results["lost_total"] = results["bet_lost"] + results["recharge_lost"]
        results["duplicated_total"] = results["bet_duplicated"] + results["recharge_duplicated"]
        for key, n in summary["runs"].items():
            results[f"runs {key}"] = n
        for b in summary["backfills"]:
            results[f"backfill {b['id']}"] = f"{b['status']}, {b['asset_partitions']} asset partitions"
        results["runs_failed"] = len(summary["failed_runs"])
        results["runs_in_flight_at_end"] = summary["in_flight"]
        results["ticks_failed"] = len(summary["failed_ticks"])
        for key, n in summary["ticks"].items():
            results[f"ticks {key}"] = n
        results["alerts_observed"] = len(summary["alerts"])
        for kind, n in sorted(Counter(a.get("kind", "?") for a in summary["alerts"]).items()):
            results[f"alerts kind={kind}"] = n
        # the topic inventory watches the whole shared broker: other sessions' test buses come and go
        results["alerts about other buses' topics"] = sum(
            1 for a in summary["alerts"] if a.get("kind") == "topic" and suffix not in a.get("title", ""))
        lines = alert_lines(process.log_file(ui_settings, SERVICE))
        results["alert_log_lines"] = len(lines)
        for phase, values in (("start", rss_start), ("end", rss_end)):
            for service, mib in values.items():
                results[f"rss_{phase} {service} MiB"] = mib
        first = next((s for s in samples if s["tables"]), samples[0])
        for table in lake_tables:
            short = table.split(".", 1)[1]
            for label, sample in (("first", first), ("end", final)):
                stats = sample["tables"].get(table)
                if not stats:
                    continue
                for k in ("snapshots", "live_data_files", "metadata_json_tracked", "metadata_json", "metadata_json_mib",
                          "newest_metadata_json_kib", "manifests", "manifest_lists", "data_files"):
                    results[f"{short} {k} @{label}"] = stats.get(k)
        windows = schedule_ticks_in_window(start_wall, stop_wall + results["drain_s"])
        results["schedule_ticks_in_window"] = "; ".join(f"{name.split(' (')[0]}: {','.join(t)}" for name, t in windows.items() if t) or "none"
        results["note"] = "wall-clock schedules: only the ticks above fell in the window (crons not overridable)"
        log("schedules tick on the wall clock: this soak's window held only these shipped schedule ticks "
            f"({results['schedule_ticks_in_window']}); a 20-minute soak sees at most one :40 maintenance tick and no daily "
            "tick unless it spans 01:30/02:00/04:00 UTC; LAKEBUS_CONFIG cannot override crons")
        results["samples_file"] = str(samples_path.relative_to(REPO_ROOT))
        results["load_1min_at_end"] = round(os.getloadavg()[0], 2)
        detail = {"results": results, "samples": samples, "failed_runs": summary["failed_runs"],
                  "failed_ticks": summary["failed_ticks"], "alerts": summary["alerts"], "alert_log_lines": lines,
                  "backfills": summary["backfills"],
                  "schedule_ticks_in_window": windows}
        samples_path.write_text(json.dumps(detail, indent=1, default=str) + "\n")
        for r in summary["failed_runs"]:
            log(f"FAILED run {r['job']} {r['run_id']} {r['tags']}: {r['errors']}")
        for t in summary["failed_ticks"][:20]:
            log(f"FAILED tick {t['instigator']}: {t['error'][:300]}")
        for line in lines[:30]:
            log(line)
        return results
    finally:
        if load is not None:
            load.stop.set()
        if samples and not samples_path.exists():
            samples_path.write_text(json.dumps({"results": results, "samples": samples}, indent=1, default=str) + "\n")
        log("stopping the soak's dagster dev ...")
        dagster_ui.down(ui_settings, port=port, service=SERVICE)
        with ConnectClient(stack.connect.urls[0]) as client:
            if client.exists(layout.connector_name):
                client.delete(layout.connector_name)
        if not keep:
            from benchmarks.bench_compressed_month import _drop

            _drop(catalog, s3, lake_tables)
            shutil.rmtree(state / "dagster_home" / "storage", ignore_errors=True)  # compute logs; the instance db stays


def take_sample(start: float, load: Load, catalog, s3, routes, lake_tables, home, committed_rows) -> dict[str, Any]:
    summary = instance_summary(home)
    rows = {event: committed_rows(catalog, table) for event, table in routes.items()}
    tables = {t: stats for t in lake_tables if (stats := table_stats(catalog, s3, t))}
    return {
        "t_s": round(time.monotonic() - start), "at": datetime.now(timezone.utc).strftime("%H:%M:%S"),
        "acked": load.acked, "failed": load.failed, "rows": rows, "rows_total": sum(rows.values()),
        "runs": summary["runs"], "runs_failed": len(summary["failed_runs"]), "in_flight": summary["in_flight"],
        "ticks_failed": len(summary["failed_ticks"]), "alerts": len(summary["alerts"]), "tables": tables,
        "load_1m": round(os.getloadavg()[0], 1),
    }


def print_sample(s: dict[str, Any], header: bool) -> bool:
    bet = next((v for k, v in s["tables"].items() if k.endswith("dwd_biz_bet")), {})
    if not header:
        print(f"{'at':>8} {'t_s':>5} {'acked':>8} {'rows':>8} {'behind':>7} {'runs':>5} {'fail':>4} {'inflt':>5} "
              f"{'tickF':>5} {'alrt':>4} {'bet:snaps':>9} {'files':>5} {'md.json':>7} {'md MiB':>7} {'load':>5}", flush=True)
    n_runs = sum(s["runs"].values())
    print(f"{s['at']:>8} {s['t_s']:>5} {s['acked']:>8} {s['rows_total']:>8} {s['acked'] - s['rows_total']:>7} {n_runs:>5} "
          f"{s['runs_failed']:>4} {s['in_flight']:>5} {s['ticks_failed']:>5} {s['alerts']:>4} {bet.get('snapshots', '-')!s:>9} "
          f"{bet.get('live_data_files', '-')!s:>5} {bet.get('metadata_json', '-')!s:>7} {bet.get('metadata_json_mib', '-')!s:>7} "
          f"{s['load_1m']:>5}", flush=True)
    return True


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_soak")
    p.add_argument("--minutes", type=float, default=None, help=f"default {DEFAULT_MINUTES:g}, or BENCH_SOAK_MINUTES")
    p.add_argument("--rate", type=float, default=300.0, help="events/s")
    p.add_argument("--sample-s", type=float, default=60.0)
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument("--drain-s", type=float, default=600.0,
                   help="after the load: wait this long at most for the sink and for runs and backfills in flight")
    p.add_argument("--keep", action="store_true", help="keep the bus's tables")
    args = p.parse_args(argv)
    from benchmarks.recording import record_run

    return record_run("bench_soak", lambda: run(args.minutes, args.rate, args.sample_s, args.port, args.drain_s, args.keep))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
