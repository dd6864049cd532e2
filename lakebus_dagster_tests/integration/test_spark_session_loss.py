"""A step's Spark Connect session whose server goes away mid-step fails the step in about half a
minute, instead of the client's default ten minutes of retries (which held the lakehouse
concurrency slot and queued every scheduled DWS run behind a dead step: the CI failure of stop 9).

The session is the product's own (``lake.spark.attach``, what ``LakeSparkResource`` uses); the
server is the stack's, stopped for real and started again afterwards.
"""

from __future__ import annotations

import time

import pytest

from lakebus_dagster.lake.spark import attach
from lakebus_dagster.stack import manager, process

#: the cluster stage's stack: the shortest lane, and no other module of it keeps a session across this one
pytestmark = [pytest.mark.integration, pytest.mark.cluster]

#: the bounded policy retries ~29 s plus jitter; the client's default would take over 600 s
FAIL_WITHIN_S = 90.0


def test_a_session_whose_server_dies_fails_in_seconds_not_minutes(stack):
    session = attach(stack.spark.remote)
    assert session.sql("SELECT 1 AS one").collect()[0]["one"] == 1
    process.stop(stack, "spark-connect")
    try:
        started = time.monotonic()
        with pytest.raises(Exception) as failure:
            session.sql("SELECT 2 AS two").collect()
        took = time.monotonic() - started
        print(f"[spark] a query on a dead server failed after {took:.1f}s: {type(failure.value).__name__}")
        assert took < FAIL_WITHIN_S, f"the query on a stopped server took {took:.0f}s to fail"
        assert "UNAVAILABLE" in str(failure.value) or "RETRIES_EXCEEDED" in str(failure.value), failure.value
    finally:
        assert "spark-connect" in manager.up(stack)
    fresh = attach(stack.spark.remote)
    assert fresh.sql("SELECT 3 AS three").collect()[0]["three"] == 3
    fresh.stop()
