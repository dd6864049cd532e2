"""``restart_failed_connectors`` against a connector whose task is really FAILED on the stack's Connect
worker: a FileStream sink whose output file lies in a directory that does not exist fails its task
in ``start()`` (``Couldn't find or create file``), deterministically, on every start.

While the cause stays, the job restarts the failed task, sees it fail again and fails its run naming
the connector (restarted = 1, the row says ``(failed again)``); once the directory exists, the same
job brings the task back to RUNNING (and it really works: a record reaches the file), and a third
run has nothing to restart.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lakebus_dagster.bus.connector_specs import FILE_SINK_CLASS, STRING_CONVERTER
from lakebus_dagster.bus.layout import TopicSpec
from lakebus_dagster.connect import ConnectClient, ConnectorNotFound
from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster_tests.integration.helpers import temporary_topics, wait_for

pytestmark = pytest.mark.integration

JOB, OP = "restart_failed_connectors", "restart_failed_connectors_op"
WAIT_S = 60.0  # the job's deadline for RUNNING after a restart (DEFAULT_WAIT_S is longer; a FAILED task ends it early)
HEADER = "| connector | before | action | after |\n|---|---|---|---|"


def run(resources: dict, run_id: str):
    config = {"ops": {OP: {"config": {"connectors": run_id, "wait_timeout_s": WAIT_S}}}}
    return defs.resolve_job_def(JOB).execute_in_process(resources=resources, run_config=config, raise_on_error=False)


def output_metadata(result) -> dict:
    event = next(e for e in result.all_node_events if e.is_successful_output)
    return {k: v.value for k, v in event.event_specific_data.metadata.items()}


def failure(result) -> tuple[str, dict]:
    """The failed step's message and the metadata the job's ``dg.Failure`` carried."""
    assert not result.success
    event = next(e for e in result.all_node_events if e.is_step_failure)
    data = event.step_failure_data
    return data.error.message, {k: v.value for k, v in data.user_failure_data.metadata.items()}


@pytest.fixture
def failing_sink(stack, run_id, tmp_path):
    """A FileStream sink writing to ``<tmp>/missing/out.txt``: its task FAILS at start until ``missing`` exists."""
    name, topic = f"restart-failed-file-sink-{run_id}", f"restart-failed-{run_id}"
    out = tmp_path / "missing" / "out.txt"
    with temporary_topics(stack.kafka.bootstrap_servers, [TopicSpec(topic)]), ConnectClient(stack.connect.urls[0]) as client:
        client.create(name, {"connector.class": FILE_SINK_CLASS, "topics": topic, "file": str(out), "tasks.max": "1",
                             "key.converter": STRING_CONVERTER, "value.converter": STRING_CONVERTER})
        try:
            yield name, topic, out, client
        finally:
            client.delete(name)


def test_a_failed_task_is_restarted_fails_again_while_broken_then_runs_once_fixed(failing_sink, stack, run_id):
    name, topic, out, client = failing_sink
    def task_failed():
        try:
            status = client.status(name)
        except ConnectorNotFound:  # Connect answers 404 until the new connector's first status is written
            return None
        return status.failed_tasks and status

    failed = wait_for(task_failed, f"{name}'s task FAILED", timeout=WAIT_S)
    assert failed.describe() == "RUNNING; tasks 0=FAILED"
    assert "Couldn't find or create file" in failed.failed_tasks[0].trace
    resources = build_resources()

    # the cause is still there: the task is restarted, fails again, and the run says so by name
    broken = run(resources, run_id)
    message, meta = failure(broken)
    assert message == f"dagster._core.definitions.events.Failure: failed again after a restart: {name}\n"
    assert meta == {
        "connectors": f"{HEADER}\n| {name} | RUNNING; tasks 0=FAILED | restart (failed only) | RUNNING; tasks 0=FAILED (failed again) |",
        "restarted": 1,
        "outcome": "changed",
    }
    assert client.status(name).describe() == "RUNNING; tasks 0=FAILED"

    # the operator fixes the cause; the same job brings the task back
    out.parent.mkdir()
    fixed = run(resources, run_id)
    assert fixed.success
    assert output_metadata(fixed) == {
        "connectors": f"{HEADER}\n| {name} | RUNNING; tasks 0=FAILED | restart (failed only) | RUNNING; tasks 0=RUNNING |",
        "restarted": 1,
        "outcome": "changed",
    }
    assert client.status(name).describe() == "RUNNING; tasks 0=RUNNING"
    # RUNNING for real: a record on the topic reaches the file
    producer = resources["kafka"].producer(acks="all")
    producer.produce(topic, value=b"after the restart")
    assert producer.flush(30) == 0
    wait_for(lambda: out.exists() and out.read_text() == "after the restart\n", f"the record in {out}", timeout=WAIT_S)

    # nothing FAILED any more: nothing to restart
    again = run(resources, run_id)
    assert again.success
    assert output_metadata(again) == {
        "connectors": f"{HEADER}\n| {name} | RUNNING; tasks 0=RUNNING | unchanged | RUNNING; tasks 0=RUNNING |",
        "restarted": 0,
        "outcome": "unchanged",
    }
    assert Path(out).read_text() == "after the restart\n"
