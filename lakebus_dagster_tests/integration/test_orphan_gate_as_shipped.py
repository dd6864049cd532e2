"""Orphan removal as shipped, on the real stack: the daily ``lakehouse_maintenance`` (the run config
the shipped ``lakehouse_maintenance_schedule`` requests, wall-clock time, the shipped 72 h age)
removes a file no snapshot references only while the sink connector and all its tasks are RUNNING.

A sink data file is referenced only by the control topic until its commit lands, so while the sink
is paused, failed or out of reach, such a file must not be taken for an orphan. The test plants an
orphan under an ODS table's ``data/`` (its S3Proxy file dated four days back: older than 72 h, which
Iceberg's procedure checks against real time), then runs the job three times:

- the sink PAUSED: orphan removal skipped and said so, the file stays;
- Connect out of reach (a worker URL nothing listens on): skipped, the file stays;
- the sink RUNNING again: the file is removed, and every row stays.

A FAILED task is held by ``unit/test_orphan_gate.py`` (the same gate, a stub Connect).
"""

from __future__ import annotations

import os
import time
import uuid
from datetime import datetime, timezone

import dagster as dg
import pytest

from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.lakehouse.constants import MAINTENANCE_JOB
from lakebus_dagster.defs.resources import ConnectResource
from lakebus_dagster.events import EventProducer, GeneratorConfig, generate_events
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.stack.s3 import s3_client
from lakebus_dagster_tests.cleanup import remove_suffixed

from .helpers import committed_rows, provisioned_bus, wait_for

pytestmark = pytest.mark.integration

SCHEDULE = "lakehouse_maintenance_schedule"
FOUR_DAYS_S = 4 * 24 * 3600


def _plant_orphan(stack, location: str) -> tuple[str, str]:
    """An unreferenced file under the table's data/ whose S3 LastModified is four days old."""
    bucket, _, prefix = location.removeprefix("s3://").removeprefix("s3a://").partition("/")
    key = f"{prefix.rstrip('/')}/data/orphan-{uuid.uuid4().hex}.parquet"
    s3_client(stack).put_object(Bucket=bucket, Key=key, Body=b"PAR1 not referenced by any snapshot PAR1")
    blob = stack.data_dir / "s3" / bucket / key  # S3Proxy's filesystem store: LastModified is the file's mtime
    old = time.time() - FOUR_DAYS_S
    os.utime(blob, (old, old))
    return bucket, key


def _exists(stack, bucket: str, key: str) -> bool:
    return "Contents" in s3_client(stack).list_objects_v2(Bucket=bucket, Prefix=key)


def _daily_maintenance(resources: dict, instance) -> dict:
    """The job with the run config the shipped daily schedule requests now; its output metadata."""
    (request,) = defs.resolve_schedule_def(SCHEDULE).evaluate_tick(
        dg.build_schedule_context(instance=instance, scheduled_execution_time=datetime.now(timezone.utc))).run_requests
    assert request.run_config["ops"]["maintain_lakehouse"]["config"]["scope"] == "full"
    run = defs.resolve_job_def(MAINTENANCE_JOB).execute_in_process(resources=resources, instance=instance,
                                                                   run_config=request.run_config, tags=request.tags)
    assert run.success
    (output,) = [e for e in run.all_node_events if e.is_successful_output]
    return {k: v.value for k, v in output.event_specific_data.metadata.items()}


def test_orphans_are_removed_only_while_the_sink_and_its_tasks_run(stack):
    suffix = uuid.uuid4().hex[:8]
    try:
        with provisioned_bus(stack, suffix) as (resources, layout, connect), dg.instance_for_test() as instance:
            events = list(generate_events(GeneratorConfig(count=20, seed=43, days=("2025-11-22",), hours=(9,))))
            with EventProducer(layout.bus_topic.name, {"bootstrap.servers": stack.kafka.bootstrap_servers}) as producer:
                for e in events:
                    producer.send(e)
            catalog, table = load_catalog(stack), layout.routes["bet"]
            bets = sum(e.event == "bet" for e in events)
            wait_for(lambda: committed_rows(catalog, table) == bets, f"{bets} rows the sink committed")
            bucket, key = _plant_orphan(stack, catalog.load_table(table).location())

            connect.pause(layout.connector_name)
            connect.wait_for_state(layout.connector_name, {"PAUSED"}, timeout=60)
            paused = _daily_maintenance(resources, instance)
            assert paused["orphan_removal"].startswith("skipped: ") and "PAUSED" in paused["orphan_removal"], paused
            assert _exists(stack, bucket, key), "removed while the sink was paused"

            unreachable = {**resources, "connect": ConnectResource(url="http://127.0.0.1:9", retries=0, timeout_s=2)}
            away = _daily_maintenance(unreachable, instance)
            assert away["orphan_removal"].startswith("skipped: Connect did not answer"), away
            assert _exists(stack, bucket, key), "removed while Connect was out of reach"

            connect.resume(layout.connector_name)
            connect.wait_for_state(layout.connector_name, {"RUNNING"}, timeout=60)
            healthy = _daily_maintenance(resources, instance)
            assert healthy["orphan_removal"] == "ran", healthy
            assert not _exists(stack, bucket, key), "the orphan stayed while the sink was healthy"
            assert committed_rows(catalog, table) == bets, "orphan removal deletes no row"
    finally:
        remove_suffixed(stack, {suffix})
