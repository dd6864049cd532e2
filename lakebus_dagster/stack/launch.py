"""Launch a job on the running Dagster UI the way a user's click does: through the GraphQL API.

The run is queued by the webserver and dequeued by the daemon, so this exercises the same path as
the Launchpad. ``python -m lakebus_dagster.stack.launch provision_lakebus`` prints the outcome.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from typing import Any

import requests
from dagster import DagsterRunStatus
from dagster_graphql import DagsterGraphQLClient

from lakebus_dagster.settings import load_settings
from lakebus_dagster.stack.dagster_ui import ui_port

LOCATION = "lakebus"
TERMINAL = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}

_RUN_METADATA_QUERY = """
query RunMetadata($runId: ID!) {
  logsForRun(runId: $runId, limit: 1000) {
    __typename
    ... on EventConnection {
      events {
        __typename
        ... on MessageEvent { message level stepKey }
        ... on ErrorEvent { error { className message cause { className message } } }
        ... on StepExpectationResultEvent { stepKey }
        ... on ExecutionStepOutputEvent {
          stepKey
          metadataEntries {
            label
            __typename
            ... on MarkdownMetadataEntry { mdStr }
            ... on TextMetadataEntry { text }
            ... on IntMetadataEntry { intValue }
            ... on FloatMetadataEntry { floatValue }
            ... on BoolMetadataEntry { boolValue }
            ... on JsonMetadataEntry { jsonString }
          }
        }
      }
    }
  }
}
"""


def client(port: int | None = None) -> DagsterGraphQLClient:
    """A GraphQL client for the UI on ``port`` (default: LAKEBUS_DAGSTER_PORT or 3000)."""
    return DagsterGraphQLClient(load_settings().host, port_number=port or ui_port(), timeout=60)


def submit(
    job: str, run_config: Mapping[str, Any] | None = None, *, tags: Mapping[str, str] | None = None, port: int | None = None
) -> str:
    """Submit ``job`` (the webserver queues the run, the daemon starts it); returns the run id.

    ``tags`` select partitions like the UI does: ``dagster/partition``, or
    ``dagster/asset_partition_range_start`` / ``_end`` for a single-run backfill of a range.
    """
    return client(port).submit_job_execution(
        job, repository_location_name=LOCATION, run_config=dict(run_config or {}), tags=dict(tags or {})
    )


def wait(run_id: str, *, timeout: float = 300.0, port: int | None = None) -> DagsterRunStatus:
    """Poll the run's status until it ends or ``timeout`` passes; returns the last status seen."""
    gql = client(port)
    deadline = time.monotonic() + timeout
    status = gql.get_run_status(run_id)
    while status not in TERMINAL and time.monotonic() < deadline:
        time.sleep(1.0)
        status = gql.get_run_status(run_id)
    return status


def launch(
    job: str,
    run_config: Mapping[str, Any] | None = None,
    *,
    tags: Mapping[str, str] | None = None,
    timeout: float = 300.0,
    port: int | None = None,
) -> tuple[str, DagsterRunStatus]:
    """Submit ``job`` and poll until it ends (or ``timeout`` passes); returns (run id, status)."""
    run_id = submit(job, run_config, tags=tags, port=port)
    return run_id, wait(run_id, timeout=timeout, port=port)


def run_events(run_id: str, *, port: int | None = None) -> list[dict[str, Any]]:
    """The run's event log over GraphQL: every event's ``__typename``, messages and output metadata."""
    resp = requests.post(
        f"http://{load_settings().host}:{port or ui_port()}/graphql",
        json={"query": _RUN_METADATA_QUERY, "variables": {"runId": run_id}},
        timeout=60,
    )
    resp.raise_for_status()
    body = resp.json()
    logs = (body.get("data") or {}).get("logsForRun") or {}
    if logs.get("__typename") != "EventConnection":
        raise RuntimeError(f"logsForRun({run_id}) failed: {body}")
    return logs["events"]


def _error_text(error: Mapping[str, Any] | None) -> str:
    if not error:
        return ""
    text = f" | {error.get('className')}: {(error.get('message') or '').strip()}"
    return text + _error_text(error.get("cause"))


def log_messages(run_id: str, *, port: int | None = None) -> list[str]:
    """The run's log as ``LEVEL [step] message`` lines, errors with their cause (as the run's page shows)."""
    return [
        f"{e['level']} [{e.get('stepKey') or '-'}] {e['message']}{_error_text(e.get('error'))}"
        for e in run_events(run_id, port=port)
        if e.get("message")
    ]


def output_metadata(run_id: str, *, port: int | None = None) -> dict[str, dict[str, Any]]:
    """``{step_key: {label: value}}`` of the run's output events, read back over GraphQL."""
    out: dict[str, dict[str, Any]] = {}
    for event in run_events(run_id, port=port):
        if event["__typename"] != "ExecutionStepOutputEvent":
            continue
        step = out.setdefault(event["stepKey"], {})
        for entry in event["metadataEntries"]:
            step[entry["label"]] = next(
                (entry[k] for k in ("mdStr", "text", "intValue", "floatValue", "boolValue", "jsonString") if k in entry and entry[k] is not None), None
            )
    return out


def launch_and_report(
    job: str, run_config: Mapping[str, Any] | None = None, *, tags: Mapping[str, str] | None = None, timeout: float = 600.0
) -> bool:
    """Launch ``job`` on the UI, print its outcome and output metadata; True on SUCCESS."""
    print(f"[launch] {job}: submitting through the Dagster UI's GraphQL API ...", flush=True)
    t0 = time.monotonic()
    run_id, status = launch(job, run_config, tags=tags, timeout=timeout)
    print(f"[launch] {job}: run {run_id} ended {status.value} after {time.monotonic() - t0:.1f}s", flush=True)
    for step, entries in output_metadata(run_id).items():
        print(f"--- {step}")
        for label, value in entries.items():
            text = str(value)
            print(f"{label}:\n{text}" if "\n" in text else f"  {label}: {text}")
    if status != DagsterRunStatus.SUCCESS:
        for line in log_messages(run_id)[-15:]:
            print(f"  {line}")
    return status == DagsterRunStatus.SUCCESS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lakebus_dagster.stack.launch", description=__doc__)
    parser.add_argument("job")
    parser.add_argument("--config", default="{}", help="run config as JSON")
    parser.add_argument("--tags", default="{}", help="run tags as JSON (e.g. dagster/partition)")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args(argv)
    # pick up code changed since the UI started (a no-op otherwise)
    client().reload_repository_location(LOCATION)
    ok = launch_and_report(args.job, json.loads(args.config), tags=json.loads(args.tags), timeout=args.timeout)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
