"""Launch a job on the running Dagster UI the way a user's click does: through the GraphQL API.

The run is queued by the webserver and dequeued by the daemon, so this exercises the same path as
the Launchpad. ``lakebus launch provision_lakebus`` (or ``python -m lakebus_dagster.stack.launch``)
prints the outcome and the run's metadata; exit 0 when the run succeeded, 1 when it failed or was
still going after ``--timeout`` (the run goes on in Dagster; the line names its page).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from typing import Any

import requests
from dagster import DagsterRunStatus
from dagster_graphql import DagsterGraphQLClient

from lakebus_dagster.errors import CliError
from lakebus_dagster.stack.dagster_ui import ui_port, ui_url
from lakebus_dagster.stack.local_settings import load_stack_settings

LOCATION = "lakebus"
TERMINAL = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}

_JOBS_QUERY = """
{ repositoriesOrError { __typename
    ... on RepositoryConnection { nodes { location { name } jobs { name } } }
    ... on PythonError { message } } }
"""

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
    return DagsterGraphQLClient(load_stack_settings().host, port_number=port or ui_port(), timeout=60)


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
        f"http://{load_stack_settings().host}:{port or ui_port()}/graphql",
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
    if status not in TERMINAL:  # the run is not ours to end: it goes on in Dagster
        page = f"{ui_url(load_stack_settings())}/runs/{run_id}"
        print(f"[launch] {job}: run {run_id} is still {status.value} after {time.monotonic() - t0:.0f}s (--timeout {timeout:g}); "
              f"it goes on in Dagster: watch it at {page} (its log and outcome), or wait longer next time with a "
              "larger --timeout", flush=True)
        return False
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


def require_ui(port: int | None = None) -> str:
    """The UI's URL, or a :class:`CliError` saying it is not running and how to start it (3 s at most)."""
    url = f"http://{load_stack_settings().host}:{port or ui_port()}"
    try:
        requests.get(f"{url}/server_info", timeout=3).raise_for_status()
    except requests.RequestException as exc:
        reason = "refused the connection" if isinstance(exc, requests.ConnectionError) else type(exc).__name__
        raise CliError(f"the Dagster UI at {url} (LAKEBUS_DAGSTER_PORT) is not running ({reason}); "
                       "start it with `lakebus ui up` (needs `lakebus stack up`), or run `make demo`") from exc
    return url


def known_jobs(port: int | None = None) -> list[str]:
    """The jobs of the ``lakebus`` code location, as the UI lists them (hidden ``__`` jobs left out)."""
    url = require_ui(port)
    try:
        body = requests.post(f"{url}/graphql", json={"query": _JOBS_QUERY}, timeout=30).json()
    except (requests.RequestException, ValueError) as exc:
        raise CliError(f"the Dagster UI at {url} did not answer the job list: {exc}") from exc
    repos = (body.get("data") or {}).get("repositoriesOrError") or {}
    if repos.get("__typename") != "RepositoryConnection":
        raise CliError(f"the Dagster UI at {url} cannot load its code: {repos.get('message', body)!s:.300}; "
                       "see `lakebus stack logs dagster`")
    return sorted(
        job["name"] for node in repos["nodes"] if node["location"]["name"] == LOCATION
        for job in node["jobs"] if not job["name"].startswith("__")
    )


EXAMPLES = """\
  lakebus launch provision_lakebus
  lakebus launch generate_sample_events --config '{"ops": {"send_sample_events": {"config": {"count": 100}}}}'
  lakebus launch dws_hourly_job --tag dagster/partition=2025-11-25-18:00
  lakebus launch connector_status_report
"""


def configure(p: argparse.ArgumentParser) -> None:
    from lakebus_dagster.argtypes import json_object, key_value, positive_float

    p.add_argument("job", help="a job of the lakebus code location (an unknown name lists them)")
    p.add_argument("--config", type=json_object, default={}, help="run config as a JSON object (the Launchpad's YAML, as JSON)")
    p.add_argument("--tag", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                   help="a run tag, repeatable (e.g. dagster/partition=2025-11-25)")
    p.add_argument("--tags", type=json_object, default={}, help="run tags as one JSON object (same as --tag)")
    p.add_argument("--timeout", type=positive_float, default=600.0, help="seconds to wait for the run (default 600); after that the run goes on in Dagster")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    jobs = known_jobs()
    if args.job not in jobs:
        raise CliError(f"unknown job {args.job!r}; the lakebus code location has: {', '.join(jobs)}")
    # pick up code changed since the UI started (a no-op otherwise)
    client().reload_repository_location(LOCATION)
    tags = {**args.tags, **dict(args.tag)}
    ok = launch_and_report(args.job, args.config, tags=tags, timeout=args.timeout)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    from lakebus_dagster.commandline import parser, run_command

    p = parser("python -m lakebus_dagster.stack.launch", __doc__, EXAMPLES)
    configure(p)
    return run_command(p, argv)


if __name__ == "__main__":
    sys.exit(main())
