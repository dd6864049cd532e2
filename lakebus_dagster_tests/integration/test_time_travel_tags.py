"""Time-travel tags on the real stack's Spark Connect server and catalog: maintenance tags the state
at the top of each hour and day before it expires snapshots, the tags carry their maximum reference
age, a second run creates none, and a query by tag reads the tagged state after every other
snapshot expired.

The run's clock is injected (two hours ahead), so the test's three commits lie before the instants
(the product passes its own clock; the decision is unit-tested in ``unit/test_snapshot_window.py``)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest

from lakebus_dagster.lake.maintenance import MaintenancePlan, maintain_table, tag_time_travel

pytestmark = [pytest.mark.integration]


def test_tags_keep_the_top_of_each_hour_and_day_through_expiry(spark):
    namespace = f"lake.tags_{uuid.uuid4().hex[:8]}"
    table = f"{namespace}.t"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    try:
        spark.sql(f"CREATE TABLE {table} (log_date string, hour int, n bigint) USING iceberg")
        for n in range(3):
            spark.sql(f"INSERT INTO {table} VALUES ('2026-11-28', 9, {n})")
        head = spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'main'").collect()[0][0]
        now = datetime.now(timezone.utc) + timedelta(hours=2)
        top = now.replace(minute=0, second=0, microsecond=0)

        created = tag_time_travel(spark, table, now)
        # the table existed at the last two tops of the hour (and at midnight when one of them was it)
        assert f"lakebus-hour-{top:%Y-%m-%dT%H}" in created and f"lakebus-hour-{top - timedelta(hours=1):%Y-%m-%dT%H}" in created
        refs = {r["name"]: r for r in spark.sql(f"SELECT name, type, snapshot_id, max_reference_age_in_ms FROM {table}.refs").collect()}
        for name in created:
            assert refs[name]["type"] == "TAG" and refs[name]["snapshot_id"] == head
            reach = timedelta(days=7) if name.startswith("lakebus-day-") else timedelta(hours=24)
            assert refs[name]["max_reference_age_in_ms"] >= reach.total_seconds() * 1000, name
        assert tag_time_travel(spark, table, now) == []  # idempotent

        spark.sql(f"INSERT INTO {table} VALUES ('2026-11-28', 10, 99)")  # after the tagged state
        plan = MaintenancePlan(compact=False, rewrite_manifests=False, expire_older_than=now, retain_last=1, tag_time_travel_at=now)
        report = maintain_table(spark, table, plan)
        kept = {r["snapshot_id"] for r in spark.sql(f"SELECT snapshot_id FROM {table}.snapshots").collect()}
        assert head in kept and len(kept) == 2, (report.expiry, kept)  # the tagged state and the newest
        tagged = spark.sql(f"SELECT count(*) AS n FROM {table} VERSION AS OF '{created[0]}'").collect()[0]["n"]
        assert tagged == 3 and spark.sql(f"SELECT count(*) AS n FROM {table}").collect()[0]["n"] == 4
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {table} PURGE")
        spark.sql(f"DROP NAMESPACE IF EXISTS {namespace}")
