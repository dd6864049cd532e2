"""Snapshot expiry and the manifest rewrite as shipped, on the real stack (Spark Connect, the REST
catalog, S3): ``lakehouse_maintenance`` with its default expiry (snapshots older than
``EXPIRE_SNAPSHOTS_OLDER_THAN_HOURS``; the newest ``RETAIN_LAST_SNAPSHOTS`` and the time-travel tags
always stay), its clock given through the ``clock`` resource as the deployment's is.

An ODS table gets 110 one-row appends through Spark (110 snapshots, one manifest each with manifest
merging off: what hours of sink commits look like, compressed). The first run, at wall time, rewrites the manifests into a few and expires
nothing: every snapshot is younger than the expiry age. The second run, its clock an hour ahead,
expires every snapshot but the newest 100 and the tagged ones; every row stays readable. Compaction is
switched off so that the manifest count shows the manifest rewrite alone.
"""

from __future__ import annotations

import time
import uuid

import pytest

from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.lakehouse.constants import (EXPIRE_SNAPSHOTS_OLDER_THAN_HOURS, MAINTENANCE_JOB,
                                                      RETAIN_LAST_SNAPSHOTS)
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster.lake.spark import SPARK_CATALOG
from lakebus_dagster_tests.cleanup import remove_suffixed
from lakebus_dagster_tests.clocks import FixedClock

pytestmark = pytest.mark.integration

APPENDS = 110


def _snapshots(spark, table: str) -> list[int]:
    """Snapshot ids, oldest first."""
    return [int(r["snapshot_id"]) for r in spark.sql(f"SELECT snapshot_id FROM {table}.snapshots ORDER BY committed_at").collect()]


def _manifests(spark, table: str) -> int:
    return spark.sql(f"SELECT count(*) AS n FROM {table}.manifests").collect()[0]["n"]


def _tagged(spark, table: str) -> set[int]:
    return {int(r["snapshot_id"]) for r in spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE type = 'TAG'").collect()}


def test_expiry_keeps_the_newest_100_and_the_tags_and_the_manifests_are_rewritten(stack, spark):
    assert (EXPIRE_SNAPSHOTS_OLDER_THAN_HOURS, RETAIN_LAST_SNAPSHOTS) == (0.3, 100), "the shipped expiry this test names"
    suffix = uuid.uuid4().hex[:8]
    layout_resource = BusLayoutResource(name_suffix=suffix)
    name = layout_resource.layout().routes["bet"]
    table_ref = f"{SPARK_CATALOG}.{name}"
    try:
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {SPARK_CATALOG}.{name.split('.')[0]}")
        spark.sql(f"CREATE TABLE {table_ref} (log_date STRING, n BIGINT) USING iceberg "
                  "TBLPROPERTIES ('commit.manifest-merge.enabled'='false')")
        for i in range(APPENDS):
            spark.sql(f"INSERT INTO {table_ref} VALUES ('2025-11-21', {i})")
        before = _snapshots(spark, table_ref)
        assert len(before) == APPENDS and _manifests(spark, table_ref) >= APPENDS / 2

        def maintain(at: float):
            resources = {**build_resources(), "layout": layout_resource, "clock": FixedClock(at=at)}
            result = defs.resolve_job_def(MAINTENANCE_JOB).execute_in_process(
                resources=resources, run_config={"ops": {"maintain_lakehouse": {"config": {"compact": False}}}})
            assert result.success
            return {r["table"]: r for r in result.output_for_node("maintain_lakehouse")}[table_ref]

        now = time.time()
        first = maintain(now)
        assert _manifests(spark, table_ref) <= 2, "the manifest rewrite merged the appends' manifests"
        assert len(_snapshots(spark, table_ref)) == APPENDS + 1, "nothing is older than the expiry age yet (+ the rewrite's)"
        assert first["before"]["snapshots"] == APPENDS

        second = maintain(now + 3600)  # an hour later: every snapshot is past the expiry age
        kept = _snapshots(spark, table_ref)
        newest = set((before + [s for s in kept if s not in before])[-RETAIN_LAST_SNAPSHOTS:])
        tagged = _tagged(spark, table_ref)
        assert set(kept) == newest | tagged, f"kept {len(kept)}: not the newest {RETAIN_LAST_SNAPSHOTS} and the tags"
        assert len(kept) < APPENDS + 1 and second["after"]["snapshots"] == len(kept)
        rows = spark.sql(f"SELECT count(*) AS c, sum(n) AS s FROM {table_ref}").collect()[0]
        assert (rows["c"], rows["s"]) == (APPENDS, sum(range(APPENDS))), "expiry deletes no row"
    finally:
        remove_suffixed(stack, {suffix})
