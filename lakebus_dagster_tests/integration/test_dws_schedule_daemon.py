"""The hourly DWS schedule's own run, as deployed: a ``dagster dev`` (webserver + daemon) of the
test's own, the schedule evaluated by Dagster for a tick at :15 after an hour closed (GraphQL
``scheduleDryRun``, the UI's "Test schedule"), its run request launched through the webserver, queued
and started by the daemon, its steps attached to the stack's Spark Connect server.

Asserted: the run request is the closed hour's partition; the run succeeds with one step per hourly
DWS table (the checks ran in the step that wrote the table) and every check passed for that
partition; the DWS rows equal an aggregate of the events computed in plain Python. Then the Spark
Connect server becomes unreachable (a TCP gate between this instance and the server, closed): the
next run fails at resource init, in seconds, with one line naming the endpoint and what to run;
the gate open again, one of the run's shipped automatic retries succeeds with the same rows.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest
import requests
import yaml
from dagster import DagsterRunStatus

from lakebus_dagster.defs.lakehouse.constants import DWS_HOURLY_JOB, DWS_RUN_RETRIES
from lakebus_dagster.events import GeneratorConfig
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.lake.dws import BET_HOUR, RECHARGE_HOUR, LakehouseTables, Scope
from lakebus_dagster.lake.spark import connect_address
from lakebus_dagster.stack.launch import LOCATION, client, launch, log_messages, submit, wait

from .dagster_instance import running_dagster
from .helpers import wait_for
from .outage import TcpGate
from .test_lakehouse import assert_same, expected_rows
from .test_spark_cluster import send_and_land

pytestmark = [pytest.mark.integration, pytest.mark.lake]  # the lake stage's stack, beside the daemon stage

SAMPLE = GeneratorConfig(count=400, seed=18180, days=("2025-11-25",), hours=(9, 10), users=20)
#: the shipped schedule's tick 15 minutes after 09:00-10:00 closed
TICK = datetime(2025, 11, 25, 10, 15, tzinfo=timezone.utc)
HOUR = "2025-11-25-09:00"
#: from the failed run to its successful retry: the daemon's retry, a run process's start, two steps
RETRY_S = 600.0
#: the step's wait for Spark Connect in this test's instance: shorter than the shipped 60 s (the lake
#: lane is make test's longest), and still longer than the test takes to reopen the gate
OUTAGE_WAIT_S = 20

_RUNS = """
query Runs($filter: RunsFilter) {
  runsOrError(filter: $filter) { ... on Runs { results { runId status tags { key value } } } }
}
"""

_DRY_RUN = """
mutation($selector: ScheduleSelector!, $timestamp: Float) {
  scheduleDryRun(selectorData: $selector, timestamp: $timestamp) {
    __typename
    ... on DryRunInstigationTick {
      evaluationResult { runRequests { jobName runConfigYaml tags { key value } } skipReason error { message } }
    }
    ... on PythonError { message }
  }
}
"""

_CHECKS_AND_STEPS = """
query($runId: ID!) {
  logsForRun(runId: $runId) {
    __typename
    ... on EventConnection {
      events {
        __typename
        ... on ExecutionStepSuccessEvent { stepKey }
        ... on AssetCheckEvaluationEvent { evaluation { checkName success partition } }
      }
    }
  }
}
"""


def _graphql(port: int, query: str, variables: dict) -> dict:
    resp = requests.post(f"http://127.0.0.1:{port}/graphql", json={"query": query, "variables": variables}, timeout=60)
    resp.raise_for_status()
    body = resp.json()
    assert not body.get("errors"), body
    return body["data"]


def tick_run_requests(port: int, schedule: str, at: datetime) -> list[dict]:
    """What Dagster's evaluation of ``schedule`` at ``at`` asks to run (as the UI's "Test schedule")."""
    selector = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__", "scheduleName": schedule}
    result = _graphql(port, _DRY_RUN, {"selector": selector, "timestamp": at.timestamp()})["scheduleDryRun"]
    assert result["__typename"] == "DryRunInstigationTick", result
    evaluation = result["evaluationResult"]
    assert not evaluation["error"], evaluation["error"]
    return evaluation["runRequests"]


def launch_request(port: int, request: dict, timeout: float = 300) -> tuple[str, DagsterRunStatus, float]:
    """Submit one run request through the webserver; (run id, final status, seconds to that status)."""
    started = time.monotonic()
    run_id = submit(request["jobName"], yaml.safe_load(request["runConfigYaml"]) or {},
                    tags={t["key"]: t["value"] for t in request["tags"]}, port=port)
    return run_id, wait(run_id, timeout=timeout, port=port), time.monotonic() - started


def hour_rows(catalog, tables: LakehouseTables, spec, hour: int) -> dict[tuple, dict]:
    """The DWS rows of 2025-11-25 ``hour``, read through pyiceberg (no Spark session: the test stops
    the server, and a session of the test's own would die with it)."""
    out = {}
    for r in catalog.load_table(tables.dws(spec)).scan().to_arrow().to_pylist():
        if str(r["log_date"]) == "2025-11-25" and r["hour"] == hour:
            key = tuple(r[k] for k in spec.keys)
            assert key not in out, f"{spec.name}: duplicate key {key}"
            out[key] = {m: r[m] for m in spec.measures}
    return out


def _succeeded_retry(port: int, root_run_id: str) -> dict[str, str] | None:
    """The tags of a successful automatic retry of ``root_run_id`` (Dagster's run retries tag each
    retry with the run it descends from), or None while there is none."""
    data = client(port)._execute(_RUNS, {"filter": {"tags": [{"key": "dagster/root_run_id", "value": root_run_id}]}})  # noqa: SLF001
    for run in data["runsOrError"]["results"]:
        tags = {t["key"]: t["value"] for t in run["tags"]}
        if run["status"] == "SUCCESS" and "dagster/retry_number" in tags:
            return tags
    return None


def test_hourly_schedule_run_builds_dws_through_spark_connect(stack, tmp_path_factory):
    # the instance reaches the stack's Spark Connect server through a gate of the test's: closed, the
    # server is unreachable for this instance alone (the server itself stays up and warm)
    host, port = connect_address(stack.spark.remote)
    spark_gate = TcpGate(host, port)
    spark_gate.open()
    try:
        _build_fail_and_retry(stack, tmp_path_factory, spark_gate)
    finally:
        spark_gate.close()


def _build_fail_and_retry(stack, tmp_path_factory, spark_gate: TcpGate) -> None:
    with running_dagster(stack, tmp_path_factory, "dws-schedule",
                         env={"LAKEBUS_SPARK_REMOTE": f"sc://{spark_gate.address}",
                              "LAKEBUS_SPARK_CONNECT_WAIT_S": str(OUTAGE_WAIT_S)}) as dagster:
        dagster.stop_sensors("dws_gap_fill_sensor")  # its :45 builds would queue ahead of this test's runs
        _, status = launch("provision_lakebus", port=dagster.port, timeout=300)
        assert status == DagsterRunStatus.SUCCESS
        layout = dagster.layout
        events = send_and_land(stack, layout, SAMPLE)
        catalog = load_catalog(stack)

        (request,) = tick_run_requests(dagster.port, "dws_hourly_schedule", TICK)
        tags = {t["key"]: t["value"] for t in request["tags"]}
        assert request["jobName"] == DWS_HOURLY_JOB and tags["dagster/partition"] == HOUR, request
        run_id, status, took = launch_request(dagster.port, request)
        assert status == DagsterRunStatus.SUCCESS, "\n".join(log_messages(run_id, port=dagster.port)[-20:])
        print(f"[dws-schedule] tick {HOUR} -> run SUCCESS in {took:.1f}s (queued, daemon, 2 steps on Spark Connect)")

        events_of_run = _graphql(dagster.port, _CHECKS_AND_STEPS, {"runId": run_id})["logsForRun"]["events"]
        steps = {e["stepKey"] for e in events_of_run if e["__typename"] == "ExecutionStepSuccessEvent"}
        assert steps == {"dws_biz_bet_hour", "dws_biz_recharge_hour"}, steps
        checks = [e["evaluation"] for e in events_of_run if e["__typename"] == "AssetCheckEvaluationEvent"]
        assert sorted(c["checkName"] for c in checks) == sorted(["reconciles_with_ods", "no_null_keys", "no_duplicate_keys"] * 2)
        assert all(c["success"] and c["partition"] == HOUR for c in checks), checks

        tables = LakehouseTables.from_routes(layout.routes)
        scope = Scope.hours(datetime(2025, 11, 25, 9))
        for spec in (BET_HOUR, RECHARGE_HOUR):
            assert_same(spec, hour_rows(catalog, tables, spec, 9), expected_rows(spec, events, [scope]))
        assert not hour_rows(catalog, tables, BET_HOUR, 10), "only the closed hour"

        # Spark Connect unreachable for longer than a step waits for it (LAKEBUS_SPARK_CONNECT_WAIT_S, here
        # OUTAGE_WAIT_S): the run says it waits, then fails at resource init in one line naming the
        # endpoint; the shipped run retries (dagster/max_retries on the DWS jobs, run_retries on in the
        # instance) launch it again at once, the retry waits in turn, and once the server answers it
        # succeeds: nobody relaunches
        spark_gate.close()
        try:
            run_id, status, took = launch_request(dagster.port, request)
            assert status == DagsterRunStatus.FAILURE
            messages = log_messages(run_id, port=dagster.port)
            waits = [m for m in messages if "trying again for" in m]
            failures = [m for m in messages if "Spark Connect at" in m and "lakebus stack up" in m]
            assert waits and failures, "\n".join(messages[-20:])
            assert f"Spark Connect at sc://{spark_gate.address} is unreachable" in failures[0]
            assert took >= OUTAGE_WAIT_S, f"the step failed after {took:.1f}s, before its wait ran out"
            print(f"[dws-schedule] Spark Connect unreachable -> run FAILURE after {took:.1f}s: {failures[0][:200]}")
        finally:
            spark_gate.open()
        retried = wait_for(lambda: _succeeded_retry(dagster.port, run_id),
                           f"a retry of run {run_id} succeeding once Spark Connect answers", timeout=RETRY_S)
        print(f"[dws-schedule] Spark Connect back -> retry {retried['dagster/retry_number']} of {run_id} SUCCESS")
        assert int(retried["dagster/retry_number"]) <= DWS_RUN_RETRIES
        for spec in (BET_HOUR, RECHARGE_HOUR):
            assert_same(spec, hour_rows(catalog, tables, spec, 9), expected_rows(spec, events, [scope]))
