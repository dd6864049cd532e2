"""A step's Spark Connect session gives up on a dead server in about half a minute (the client's
default policy tolerates at least ten minutes; the real server going away is in
integration/test_spark_session_loss.py)."""

from __future__ import annotations

from pyspark.sql.connect.client.retries import DefaultPolicy

from lakebus_dagster.lake.spark import bounded_retry_policy


def _total_backoff_s(policy) -> float:
    backoff, total = policy.initial_backoff, 0.0
    for _ in range(policy.max_retries):
        total += min(backoff, policy.max_backoff)
        backoff *= policy.backoff_multiplier
    return total / 1000


def test_the_sessions_retries_end_in_about_half_a_minute():
    assert 20 <= _total_backoff_s(bounded_retry_policy()) <= 40


def test_the_client_default_would_wait_ten_minutes():
    assert _total_backoff_s(DefaultPolicy()) >= 600
