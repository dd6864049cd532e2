"""The Dagster instance's run queue, pool limit, run monitoring and sensor threads, declared once.

Why here: the production instance (``deploy/dagster.yaml`` and the Helm values, rendered by
``lakebus deploy render``) and the local stack's (deploy/dagster.yaml itself, with a declared
overlay: ``stack/deploy_files.py``) must queue runs alike: one provisioning run and one lakehouse write at a time, one run per partition key,
at most :data:`MAX_CONCURRENT_RUNS` runs. Only the ``spark`` pool's limit differs by target: it is
the cores of the Spark Connect server the steps share (2 on the local stack; deploy/values.yaml's
``spark_connect.cores`` in production).
"""

from __future__ import annotations

from typing import Any

__all__ = ["EXCLUSIVE_TAG", "MAX_CONCURRENT_RUNS", "RETENTION", "RUN_MONITORING", "RUN_RETRIES", "SENSOR_WORKERS", "concurrency",
           "tag_concurrency_limits"]

#: run tag whose value the run queue allows one run at a time (the jobs carry it: provisioning,
#: lakehouse); ``defs/lakehouse/constants.py`` re-exports it for the job definitions
EXCLUSIVE_TAG = "lakebus/exclusive"

MAX_CONCURRENT_RUNS = 6
#: a run whose worker died (container restart, OOM) is marked failed instead of hanging STARTED
RUN_MONITORING = {"start_timeout_seconds": 180, "poll_interval_seconds": 30}
#: the daemon's sensor threads (several sensors tick every few seconds: one thread each would queue them)
SENSOR_WORKERS = 4
#: run retries: only runs tagged dagster/max_retries are retried (the DWS jobs and gap-fill runs), no
#: other run blindly (healing runs, provisioning)
RUN_RETRIES = {"enabled": True, "max_retries": 0}
#: how long the instance keeps sensor and schedule ticks (days; -1: forever): the sensors tick every few
#: seconds, so skipped ticks go after a week, failures after a month, ticks that did something never
RETENTION = {"schedule": {"purge_after_days": 90}, "sensor": {"purge_after_days": {"skipped": 7, "failure": 30, "success": -1}}}


def tag_concurrency_limits() -> list[dict[str, Any]]:
    """The run queue's tag limits (Dagster's ``tag_concurrency_limits``), the same on every target.

    * ``lakebus/exclusive=provisioning``: ``provision_lakebus`` and ``requeue_lost_records`` one at a time;
    * ``lakebus/exclusive=lakehouse``: the DWS MERGE jobs and the lakehouse maintenance one at a time,
      so two MERGEs on the same partition (or a MERGE and a compaction) never overlap;
    * ``dagster/partition``, per value: one run per partition key, for runs launched outside those
      jobs (a DWS asset partition materialized from the asset graph).
    """
    return [
        {"key": EXCLUSIVE_TAG, "value": "provisioning", "limit": 1},
        {"key": EXCLUSIVE_TAG, "value": "lakehouse", "limit": 1},
        {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}, "limit": 1},
    ]


def concurrency(spark_pool_limit: int) -> dict[str, Any]:
    """The instance's ``concurrency:`` block: the run queue and the limit of the ``spark`` pool (every
    pool without a limit of its own gets ``default_limit``; ``spark`` is lakebus's only pool)."""
    if spark_pool_limit < 1:
        raise ValueError(f"the spark pool limit must be >= 1, got {spark_pool_limit}")
    return {
        "runs": {"max_concurrent_runs": MAX_CONCURRENT_RUNS, "tag_concurrency_limits": tag_concurrency_limits()},
        "pools": {"default_limit": spark_pool_limit},
    }
