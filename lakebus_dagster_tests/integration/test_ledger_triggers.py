"""When the offset ledger runs, as deployed: ``offset_ledger_schedule`` ticked through Dagster with the
code location's resources against the live Connect worker, and ``ledger_after_recovery_sensor``
evaluated on an instance that holds a real ``replay_dlq`` run.

Oracles: Connect's own REST answer (does the connector exist?) and the run id of the replay run
this test executed. Each test works on its own suffixed bus and deletes what it creates.
"""

from __future__ import annotations

from datetime import datetime, timezone

import dagster as dg
import pytest
import requests

from lakebus_dagster.bus.desired import topic_specs
from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import BusLayoutResource

from .helpers import temporary_topics, wait_for

pytestmark = pytest.mark.integration

LEDGER_JOB = "offset_ledger_job"  # written out: the job the UI and the daemon launch


def _resources(suffix: str) -> dict:
    return {**build_resources(), "layout": BusLayoutResource(name_suffix=suffix)}


def _tick_schedule(resources: dict) -> dg.ScheduleExecutionData:
    schedule = defs.resolve_schedule_def("offset_ledger_schedule")
    # a context manager: resources with a teardown (the Spark resource releases its session) are
    # opened and closed by it, as the daemon does
    with dg.build_schedule_context(
        resources=resources, scheduled_execution_time=datetime(2025, 11, 26, 4, 10, tzinfo=timezone.utc)
    ) as context:
        return schedule.evaluate_tick(context)


def test_ledger_schedule_skips_until_the_connector_exists_then_requests_the_ledger_job(stack, run_id):
    resources = _resources(run_id)
    layout = resources["layout"].layout()
    url = f"{stack.connect.urls[0]}/connectors/{layout.connector_name}"
    assert requests.get(url, timeout=10).status_code == 404

    skipped = _tick_schedule(resources)
    assert skipped.run_requests == [] and layout.connector_name in (skipped.skip_message or ""), skipped

    # any connector under the bus's connector name: the schedule only asks Connect whether it is deployed
    with temporary_topics(stack.kafka.bootstrap_servers, [layout.bus_topic]):
        config = {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "tasks.max": "1",
                  "topics": layout.bus_topic.name, "file": "/dev/null"}
        assert requests.put(f"{url}/config", json=config, timeout=30).status_code == 201
        try:
            wait_for(lambda: requests.get(url, timeout=10).status_code == 200, f"{layout.connector_name} in Connect", 30)
            ticked = _tick_schedule(resources)
            (request,) = ticked.run_requests
            assert defs.resolve_schedule_def("offset_ledger_schedule").job_name == LEDGER_JOB
            dg.validate_run_config(defs.resolve_job_def(LEDGER_JOB), request.run_config)
        finally:
            requests.delete(url, timeout=30)


def test_ledger_runs_after_a_successful_replay_once_per_run(stack, run_id):
    resources = _resources(run_id)
    layout = resources["layout"].layout()
    sensor = defs.resolve_sensor_def("ledger_after_recovery_sensor")
    assert sensor.job_name == LEDGER_JOB

    def tick(instance, cursor):
        return sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs, cursor=cursor))

    # the replay ledger (<dlq>.replayed) is one of the layout's topics: created and deleted with them
    with dg.instance_for_test() as instance, temporary_topics(stack.kafka.bootstrap_servers, topic_specs(layout)):
        first = tick(instance, None)
        assert first.run_requests == [] and first.cursor  # the first tick only places the cursor

        # a run of a job it does not watch, then a real replay_dlq run on the (empty) isolated DLQ
        other = defs.resolve_job_def("generate_sample_events").execute_in_process(
            resources=resources, instance=instance, run_config={"ops": {"send_sample_events": {"config": {"count": 0}}}}
        )
        confirm = {"ops": {"replay_dlq_op": {"config": {"confirm": resources["layout"].layout().dlq_topic.name}}}}
        replay = defs.resolve_job_def("replay_dlq").execute_in_process(resources=resources, instance=instance, run_config=confirm)
        assert other.success and replay.success

        second = tick(instance, first.cursor)
        (request,) = second.run_requests
        assert request.run_key == f"ledger-after-{replay.run_id}"
        assert request.tags["lakebus/after_run"] == replay.run_id and request.tags["lakebus/after_job"] == "replay_dlq"
        assert tick(instance, second.cursor).run_requests == [], "one ledger run per replay run"

