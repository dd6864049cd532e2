"""The shipped maintenance, as deployed, while the sink commits: a ``dagster dev`` of the test's own,
the two maintenance schedules evaluated by Dagster for their ticks (GraphQL ``scheduleDryRun``, the
UI's "Test schedule"), each run request launched through the webserver and started by the daemon,
while a producer keeps the sink committing every commit interval.

Asserted: both runs succeed beside the sink's commits (compaction conflicts are retried, not
failures); the hourly (recent) run merges the sink's small files; the sink keeps committing after
them. The bound on ``metadata.json`` files however many commits land is
``test_table_properties.py``'s (the same table properties, on a sink of its own).
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from dagster import DagsterRunStatus

from lakebus_dagster.defs.lakehouse.constants import MAINTENANCE_JOB
from lakebus_dagster.events import Bet
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.stack.launch import launch, log_messages

from .dagster_instance import running_dagster
from .helpers import Traffic, wait_for
from .test_dws_schedule_daemon import launch_request, tick_run_requests

pytestmark = [pytest.mark.integration, pytest.mark.daemon]  # a dagster dev of its own against the default stack

#: sink commits (snapshots) before maintenance: several small files per day partition to merge
COMMITS = 12
#: one maintenance run, compaction and expiry beside the sink's commits: 83 s on a quiet machine, past
#: 300 s for the daily run with the whole suite on the same two cores
RUN_TIMEOUT_S = 900
MAINTENANCE_TICKS = {"lakehouse_maintenance_hourly": datetime(2025, 11, 25, 10, 40, tzinfo=timezone.utc),
                     "lakehouse_maintenance_schedule": datetime(2025, 11, 26, 4, 0, tzinfo=timezone.utc)}


def _bet(i: int) -> Bet:
    """A bet stamped now: the hourly (recent) maintenance works on the days the sink appends to."""
    now = datetime.now(timezone.utc)
    return Bet(category="biz", event="bet", log_date=now.date().isoformat(), hour=f"{now.hour:02d}", plat_id=1,
               app_id=10406, ts=int(now.timestamp() * 1000), schema_version=1, user_id=i % 11, order_id=f"m{i}",
               amount=1.0 + i % 5, currency="BRL", game_id=777)


def test_shipped_maintenance_runs_beside_the_sink_and_compacts(stack, tmp_path_factory):
    with running_dagster(stack, tmp_path_factory, "maintenance") as dagster:
        dagster.stop_sensors("dws_gap_fill_sensor")  # its :45 builds would queue ahead of the maintenance runs
        _, status = launch("provision_lakebus", port=dagster.port, timeout=300)
        assert status == DagsterRunStatus.SUCCESS
        layout, catalog = dagster.layout, load_catalog(stack)
        table_name = layout.routes["bet"]

        def snapshots() -> int:
            return len(catalog.load_table(table_name).snapshots()) if catalog.table_exists(table_name) else 0

        with Traffic(stack.kafka.bootstrap_servers, layout.bus_topic.name, _bet, every_s=0.25) as traffic:
            wait_for(lambda: snapshots() >= COMMITS, f"{COMMITS} sink commits on {table_name}", timeout=600)
            files_before = len(catalog.load_table(table_name).inspect.files())
            snapshots_before = {snap.snapshot_id for snap in catalog.load_table(table_name).snapshots()}
            for schedule, at in MAINTENANCE_TICKS.items():
                (request,) = tick_run_requests(dagster.port, schedule, at)
                # a schedule's request names no job: it runs the schedule's own
                run_id, status, took = launch_request(dagster.port, {**request, "jobName": request["jobName"] or MAINTENANCE_JOB},
                                                     timeout=RUN_TIMEOUT_S)
                assert status == DagsterRunStatus.SUCCESS, "\n".join(log_messages(run_id, port=dagster.port)[-20:])
                print(f"[maintenance] {schedule}: SUCCESS in {took:.1f}s beside the sink's commits")
            # the sink keeps adding files meanwhile: the proof of a merge is the rewrite's own snapshot
            merged = [snap.summary for snap in catalog.load_table(table_name).snapshots()
                      if snap.snapshot_id not in snapshots_before and snap.summary is not None
                      and snap.summary.operation.value == "replace"
                      and int(snap.summary.get("deleted-data-files") or 0) > int(snap.summary.get("added-data-files") or 0)]
            assert merged, "no rewrite snapshot merged the sink's small files"
            files_after = len(catalog.load_table(table_name).inspect.files())
            commits_so_far = snapshots()
            wait_for(lambda: snapshots() >= commits_so_far + 3, "3 more sink commits after maintenance", timeout=300)
        print(f"[maintenance] {len(merged)} rewrite(s) merged small files (data files {files_before} -> {files_after} "
              f"with the sink committing meanwhile); the sink committed on after both runs")

        def landed() -> list[str]:
            ids = catalog.load_table(table_name).scan(selected_fields=("order_id",)).to_arrow().column("order_id").to_pylist()
            return ids if len(ids) >= len(traffic.sent) else []

        ids = wait_for(landed, f"{len(traffic.sent)} bets landed", timeout=300)
        assert sorted(ids) == sorted(e.order_id for e in traffic.sent), "an event was lost or duplicated beside maintenance"
