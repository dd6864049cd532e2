"""``python -m lakebus_dagster.stack.demo``: the whole pipeline on the running Dagster UI.

provision the bus → send sample events (only while the bus is still empty, so rerunning the demo
never duplicates them) → wait until the sink has committed them to the ODS tables → materialize
the DWS partitions of the demo days in one single-run backfill each. Every step is a run launched
through the UI's GraphQL API, so it shows up in the UI like a click would.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import date, timedelta

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.kafka import KafkaClients, TopicMissing, end_offsets
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.settings import load_local_secrets
from lakebus_dagster.stack.dagster_ui import ui_url
from lakebus_dagster.stack.launch import LOCATION, client, launch_and_report
from lakebus_dagster.stack.local_settings import load_stack_settings


def _say(msg: str) -> None:
    print(f"[demo] {msg}", flush=True)


def topic_end_offset(kafka_config: dict[str, str], topic: str) -> int:
    """The sum of ``topic``'s end offsets (records ever written); 0 when it does not exist."""
    consumer = KafkaClients(kafka_config).consumer("lakebus-demo")
    try:
        return sum(end_offsets(consumer, topic).values())
    except TopicMissing:
        return 0
    finally:
        consumer.close()


def wait_for_ods(layout: BusLayout, kafka_config: dict[str, str], timeout_s: float) -> None:
    """Until the offset ledger finds every offset up to the end of the bus accounted for: one ODS
    row, one DLQ record, re-queued, or a tombstone (counting rows + DLQ records never balances once
    a tombstone, an unrouted event or a remediation is on the bus)."""
    from lakebus_dagster.connect import ConnectClient
    from lakebus_dagster.ledger import Ledger, describe, ledger_complete

    settings = load_stack_settings()
    deadline, last = time.monotonic() + timeout_s, ""
    with ConnectClient(settings.connect.urls, auth=settings.connect.auth(), verify=settings.connect.verify()) as connect:
        ledger = Ledger.from_kafka_config(layout, kafka_config, load_catalog(settings), connect)
        while True:
            run = ledger_complete(ledger)
            base = run.state.baseline
            parts = run.verdict.partitions.items()
            verified, end = sum(v.verified_to - base[p] for p, v in parts), sum(v.window.end - base[p] for p, v in parts)
            progress = f"ledger: {verified}/{end} records accounted for (ODS row, DLQ, re-queued or tombstone)"
            if progress != last:
                _say(progress)
                last = progress
            if run.complete:
                return
            if time.monotonic() > deadline:  # a gap may still close (the sink commits offsets before rows)
                problems = run.verdict.problem_summary() or "; ".join(
                    f"{layout.bus_topic.name}[{p}] not yet accounted: {describe(v.pending)}" for p, v in run.verdict.partitions.items() if v.pending)
                from lakebus_dagster.errors import CliError  # one line + exit 2 through the CLI

                raise CliError(f"the offset ledger does not account for every record on {layout.bus_topic.name} within "
                               f"--timeout {timeout_s:.0f}s: {problems}; see `lakebus stack logs connect`, "
                               "`lakebus status`, then rerun `lakebus demo` (it does not resend events)")
            time.sleep(2)


EXAMPLES = """\
  lakebus demo                      # what `make demo` runs after `lakebus stack up` and `lakebus ui up`
  lakebus demo --start-date 2025-12-01 --days 1 --count 5000   # only used while the bus topic is empty
"""


def configure(p: argparse.ArgumentParser) -> None:
    from lakebus_dagster.argtypes import iso_date, positive_float, positive_int

    p.add_argument("--start-date", type=iso_date, default="2025-11-25", help="first log_date of the sample data (YYYY-MM-DD)")
    p.add_argument("--days", type=positive_int, default=2, help="consecutive log_dates (>= 1)")
    p.add_argument("--count", type=positive_int, default=20_000, help="sample events (>= 1)")
    p.add_argument("--timeout", type=positive_float, default=600.0, help="seconds to wait for the sink")
    p.set_defaults(func=run)


def main(argv: list[str] | None = None) -> int:
    from lakebus_dagster.commandline import parser, run_command

    p = parser("python -m lakebus_dagster.stack.demo", __doc__, EXAMPLES)
    configure(p)
    return run_command(p, argv)


def run(args: argparse.Namespace) -> int:
    from lakebus_dagster.events.generate import check_date_range
    from lakebus_dagster.stack.launch import require_ui

    check_date_range(args.start_date, args.days)  # before any run, not when the DWS ranges are built
    settings = load_stack_settings()
    load_local_secrets(settings)
    layout = BusLayout.default(settings.lake.namespace)
    require_ui()
    client().reload_repository_location(LOCATION)

    if not launch_and_report("provision_lakebus"):
        return 1
    on_bus = topic_end_offset(settings.kafka.client_config(), layout.bus_topic.name)
    if on_bus:
        _say(f"{layout.bus_topic.name} already holds {on_bus} records: not sending the sample again")
    else:
        config = {"ops": {"send_sample_events": {"config": {"count": args.count, "start_date": args.start_date, "days": args.days}}}}
        if not launch_and_report("generate_sample_events", config):
            return 1
    wait_for_ods(layout, settings.kafka.client_config(), args.timeout)

    first = date.fromisoformat(args.start_date)
    last = first + timedelta(days=args.days - 1)
    hourly = {"dagster/asset_partition_range_start": f"{first}-00:00", "dagster/asset_partition_range_end": f"{last}-23:00"}
    daily = {"dagster/asset_partition_range_start": f"{first}", "dagster/asset_partition_range_end": f"{last}"}
    ok = launch_and_report("dws_hourly_job", tags=hourly) and launch_and_report("dws_daily_job", tags=daily)
    # the schedules repeat these every 10 minutes; run them now so the UI shows them right away
    ok = ok and launch_and_report("observe_ods_job") and launch_and_report("offset_ledger_job")
    _say(f"done: open {ui_url(settings)} — Catalog → ods (snapshots, freshness, offset ledger), dws (tables, checks), "
         "lakebus/alerts (every alert sent); Automation → sensor and schedule ticks")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
