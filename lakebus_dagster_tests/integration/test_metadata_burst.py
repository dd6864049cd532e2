"""A burst of commits (a backfill, a replay) is back under the metadata bound within the hour, as
shipped: the real sink creates an ODS table (its schema, spec, properties and commit summaries),
then the table takes a burst of one-row commits shaped like the sink's (the same summary
properties), until its newest ``metadata.json`` is well over the bound. The hourly maintenance
schedule is evaluated at the first tick that comes after the expiry age has passed since the burst
ended (Dagster's schedule evaluation gives the run config), and its run, with its clock at that
tick, brings the newest ``metadata.json`` under the bound; every row stays. (Which tags exist depends
on the hours the burst crossed: ``test_time_travel_tags.py`` holds them.)

The burst's commits are pyiceberg appends, ten snapshots to a catalog commit, so it takes minutes,
not the hour a real burst takes; what the maintenance sees, snapshots in a table's metadata with
the sink's summary properties, is the same.
"""

from __future__ import annotations

import time
import uuid
from datetime import datetime, timedelta, timezone

import dagster as dg
import pyarrow as pa
import pytest

from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.lakehouse.constants import (EXPIRE_SNAPSHOTS_OLDER_THAN_HOURS, MAINTENANCE_HOURLY_CRON,
                                                      MAINTENANCE_JOB)
from lakebus_dagster.events import EventProducer, GeneratorConfig, generate_events
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.settings import AWS_SDK_ENV
from lakebus_dagster_tests.cleanup import remove_suffixed
from lakebus_dagster_tests.clocks import FixedClock

from .helpers import committed_rows, metadata_json_files, provisioned_bus, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.lake]

#: the bound on a table's newest metadata.json (BENCHMARKS.md#metadata-bound)
METADATA_BOUND_BYTES = 512 * 1024
#: snapshots in the burst: enough to put the newest metadata.json well over the bound
BURST = 650
#: pyiceberg copies the table's metadata for every change inside a transaction: small ones are fastest
PER_TRANSACTION = 10
SCHEDULE = "lakehouse_maintenance_hourly"


def _first_tick_after(cron: str, after: datetime) -> datetime:
    """The first minute at or after ``after`` that the hourly ``cron`` (``M1,M2 * * * *``) fires."""
    minutes, *rest = cron.split()
    assert rest == ["*"] * 4, f"{cron}: the test reads an hourly cron only"
    at = after.replace(second=0, microsecond=0) + (timedelta(minutes=1) if after.second or after.microsecond else timedelta())
    while at.minute not in {int(m) for m in minutes.split(",")}:
        at += timedelta(minutes=1)
    return at


def _newest_metadata_bytes(stack, table) -> int:
    table.refresh()
    location = table.metadata_location
    files = metadata_json_files(stack, table.location())
    (size,) = [b for key, b in files.items() if location.endswith(key)]
    return size


def _burst(table, row: pa.Table, summary: dict[str, str]) -> None:
    """``BURST`` one-row appends, each its own snapshot with the sink's summary properties."""
    for _ in range(BURST // PER_TRANSACTION):
        with table.transaction() as tx:
            for _ in range(PER_TRANSACTION):
                tx.append(row, snapshot_properties={**summary, "kafka.connect.commit-id": str(uuid.uuid4())})


def test_a_burst_of_commits_is_back_under_the_metadata_bound_at_the_next_maintenance(stack, monkeypatch):
    for key, value in AWS_SDK_ENV.items():  # pyiceberg's S3 uploads, as every lakebus S3 client sends them
        monkeypatch.setenv(key, value)
    suffix = uuid.uuid4().hex[:8]
    try:
        with provisioned_bus(stack, suffix) as (resources, layout, connect):
            events = list(generate_events(GeneratorConfig(count=20, seed=41, days=("2025-11-21",), hours=(9,))))
            with EventProducer(layout.bus_topic.name, {"bootstrap.servers": stack.kafka.bootstrap_servers}) as producer:
                for e in events:
                    producer.send(e)
            name = layout.routes["bet"]
            catalog = load_catalog(stack)
            bets = sum(e.event == "bet" for e in events)
            wait_for(lambda: committed_rows(catalog, name) == bets, f"{bets} rows the sink committed")
            connect.pause(layout.connector_name)  # the burst's commits are the only ones
            connect.wait_for_state(layout.connector_name, {"PAUSED"}, timeout=60)

            table = catalog.load_table(name)
            sink_summary = {k: v for k, v in table.current_snapshot().summary.additional_properties.items()
                            if k.startswith("kafka.connect.")}
            assert sink_summary, "the sink's commit summary (its offsets, commit id, vtts)"
            row = table.scan(limit=1).to_arrow()
            _burst(table, row, sink_summary)
            burst_end = datetime.now(timezone.utc)
            over = _newest_metadata_bytes(stack, table)
            assert over > METADATA_BOUND_BYTES, f"the burst's metadata.json is {over} B: not over the bound"

            # the shipped hourly schedule, at its first tick once the burst is older than the expiry age
            tick = _first_tick_after(MAINTENANCE_HOURLY_CRON,
                                     burst_end + timedelta(hours=EXPIRE_SNAPSHOTS_OLDER_THAN_HOURS, minutes=1))
            assert tick - burst_end <= timedelta(hours=1), f"the first maintenance after the expiry age is at {tick}"
            schedule = defs.resolve_schedule_def(SCHEDULE)
            with dg.instance_for_test() as instance:
                (request,) = schedule.evaluate_tick(
                    dg.build_schedule_context(instance=instance, scheduled_execution_time=tick)).run_requests
            run = defs.resolve_job_def(MAINTENANCE_JOB).execute_in_process(
                resources={**build_resources(), "layout": resources["layout"], "clock": FixedClock(at=tick.timestamp())},
                run_config=request.run_config, tags=request.tags)
            assert run.success

            under = _newest_metadata_bytes(stack, table)
            assert under <= METADATA_BOUND_BYTES, f"{under} B after the maintenance at {tick:%H:%M} (was {over} B)"
            assert committed_rows(catalog, name) == bets + BURST, "the maintenance deletes no row"
            print(f"burst of {BURST} commits: metadata.json {over} B -> {under} B at the maintenance "
                  f"{(tick - burst_end).total_seconds() / 60:.0f} min after it ({time.strftime('%H:%M')})")
    finally:
        remove_suffixed(stack, {suffix})
