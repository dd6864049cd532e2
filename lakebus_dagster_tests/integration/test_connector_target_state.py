"""A connector's declared target state on the real stack: pause/stop/resume jobs, provisioning, declared_states.

Each test provisions its own bus (``run_id`` suffix), drives it through the Dagster jobs
(``execute_in_process``) and checks the outcome against Connect's own REST status — the
independent oracle — and the run metadata. Everything created is deleted at the end: the
connector, the four topics (the state topic included) and the namespaces.
"""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.bus.target_state import DeclaredState
from lakebus_dagster.provision.target_state_store import (
    TargetStateStoreError,
    declared_states,
    ensure_state_topic,
    read_declared,
    record_declared,
)
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import BusLayoutResource, KafkaResource
from lakebus_dagster.definitions import defs
from lakebus_dagster_tests.integration.helpers import TEST_COMMIT_INTERVAL_MS
from lakebus_dagster_tests.cleanup import remove_suffixed

pytestmark = pytest.mark.integration

WAIT_S = 90.0


def _resources(suffix: str) -> dict:
    return {**build_resources(), "layout": BusLayoutResource(name_suffix=suffix, commit_interval_ms=TEST_COMMIT_INTERVAL_MS)}


def _run(job_name: str, suffix: str, op: str | None = None, **op_config):
    run_config = {"ops": {op: {"config": {"wait_timeout_s": WAIT_S, **op_config}}}} if op else {}
    result = defs.resolve_job_def(job_name).execute_in_process(resources=_resources(suffix), run_config=run_config)
    assert result.success, job_name
    return result


def _metadata(result, step: str) -> dict:
    event = next(e for e in result.all_node_events if e.step_key == step and e.is_successful_output)
    return {k: v.value for k, v in event.event_specific_data.metadata.items()}


def _records_in(kafka: KafkaResource, topic: str) -> int:
    """How many records the (single-partition) state topic holds: its end offset."""
    consumer = kafka.consumer("lakebus-test-watermarks")
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    finally:
        consumer.close()
    return high - low


def _connector_outcome(result):
    (outcome,) = result.output_for_node("ensure_connector")
    return outcome


@pytest.fixture
def bus(stack, run_id):
    """A provisioned, isolated bus; afterwards its connector, topics and namespaces are deleted."""
    layout = BusLayoutResource(name_suffix=run_id).layout()
    client = ConnectClient(stack.connect.urls[0], timeout=30)
    kafka = KafkaResource(bootstrap_servers=stack.kafka.bootstrap_servers)
    try:
        yield run_id, layout, client, kafka
    finally:
        client.close()
        remove_suffixed(stack, {run_id})  # its connector, topics and namespaces


def test_pause_survives_provisioning_until_resumed_and_repeats_are_unchanged(bus):
    run_id, layout, client, kafka = bus
    name = layout.connector_name
    first = _run("provision_lakebus", run_id)
    outcomes = {f"{o.kind}:{o.name}": o.action.value for o in first.output_for_node("ensure_topics")}
    assert outcomes[f"topic:{layout.state_topic.name}"] == "created"
    assert client.wait_for_state(name, {"RUNNING"}, timeout=WAIT_S).state == "RUNNING"
    assert declared_states(kafka.clients(), layout) == {name: "RUNNING"}  # the layout's default, nothing recorded

    paused = _run("pause_connector", run_id, "pause_connector_op", reason="catalog maintenance")
    meta = _metadata(paused, "pause_connector_op")
    assert client.status(name).state == "PAUSED"
    assert (meta["outcome"], meta["declared_change"], meta["connector_change"]) == ("changed", "RUNNING → PAUSED", "RUNNING → PAUSED")
    assert (meta["before_state"], meta["after_state"]) == ("RUNNING", "PAUSED")
    record = meta["declared_record"]
    assert record["state"] == "paused" and record["run_id"] == paused.run_id and record["reason"] == "catalog maintenance"
    assert record["job"] == "pause_connector"
    assert declared_states(kafka.clients(), layout) == {name: "PAUSED"}

    again = _metadata(_run("pause_connector", run_id, "pause_connector_op", reason="again"), "pause_connector_op")
    assert (again["outcome"], again["declared_change"]) == ("unchanged", "unchanged (declared PAUSED)")
    assert again["declared_record"]["run_id"] == paused.run_id, "an unchanged declaration must keep who declared it"
    assert _records_in(kafka, layout.state_topic.name) == 1, "the repeated pause must not write another declaration"
    assert read_declared(kafka.clients(), layout.state_topic.name)[name].reason == "catalog maintenance"

    # provisioning honours the declaration: the connector stays PAUSED (it used to be resumed)
    reprovision = _run("provision_lakebus", run_id)
    outcome = _connector_outcome(reprovision)
    assert outcome.action.value == "unchanged" and "unchanged (declared PAUSED)" in outcome.details, outcome
    assert _metadata(reprovision, "ensure_connector")["declared_state"] == "PAUSED"
    status = client.status(name)
    assert status.state == "PAUSED" and status.tasks and all(t.state == "PAUSED" for t in status.tasks), status.describe()

    resumed = _metadata(_run("resume_connector", run_id, "resume_connector_op"), "resume_connector_op")
    assert (resumed["declared_change"], resumed["after_state"]) == ("PAUSED → RUNNING", "RUNNING")
    assert client.wait_for_state(name, {"RUNNING"}, timeout=WAIT_S).state == "RUNNING"
    assert declared_states(kafka.clients(), layout) == {name: "RUNNING"}
    resumed_again = _metadata(_run("resume_connector", run_id, "resume_connector_op"), "resume_connector_op")
    assert resumed_again["outcome"] == "unchanged"
    assert _connector_outcome(_run("provision_lakebus", run_id)).action.value == "unchanged"
    assert client.status(name).state == "RUNNING"


def test_stop_survives_provisioning_and_a_recreated_connector_starts_stopped(bus):
    run_id, layout, client, kafka = bus
    name = layout.connector_name
    _run("provision_lakebus", run_id)
    client.wait_for_state(name, {"RUNNING"}, timeout=WAIT_S)

    stopped = _metadata(_run("stop_connector", run_id, "stop_connector_op"), "stop_connector_op")
    assert (stopped["outcome"], stopped["after_state"]) == ("changed", "STOPPED")
    assert client.status(name).state == "STOPPED"
    again = _metadata(_run("stop_connector", run_id, "stop_connector_op"), "stop_connector_op")
    assert (again["outcome"], again["connector_change"]) == ("unchanged", "unchanged (STOPPED)")

    outcome = _connector_outcome(_run("provision_lakebus", run_id))
    assert outcome.action.value == "unchanged" and "unchanged (declared STOPPED)" in outcome.details, outcome
    status = client.status(name)
    assert status.state == "STOPPED" and not status.tasks, status.describe()
    assert declared_states(kafka.clients(), layout) == {name: "STOPPED"}

    # deleted and provisioned again: created directly STOPPED (initial_state), never RUNNING
    client.delete(name)
    recreated = _connector_outcome(_run("provision_lakebus", run_id))
    assert recreated.action.value == "created" and "initial state STOPPED" in recreated.details, recreated
    status = client.status(name)
    assert status.state == "STOPPED" and not status.tasks, status.describe()

    _run("resume_connector", run_id, "resume_connector_op")
    assert client.wait_for_state(name, {"RUNNING"}, timeout=WAIT_S).state == "RUNNING"
    assert declared_states(kafka.clients(), layout) == {name: "RUNNING"}


def test_declared_states_names_the_topic_when_kafka_is_unreachable(run_id):
    layout = BusLayoutResource(name_suffix=run_id).layout()
    unreachable = KafkaResource(bootstrap_servers="127.0.0.1:1")
    with pytest.raises(TargetStateStoreError, match=f"state topic '{layout.state_topic.name}'.*127.0.0.1:1"):
        declared_states(unreachable.clients(), layout)


def test_a_malformed_latest_declaration_is_a_clear_error_until_a_valid_one_supersedes_it(stack, run_id):
    layout = BusLayoutResource(name_suffix=run_id).layout()
    kafka = KafkaResource(bootstrap_servers=stack.kafka.bootstrap_servers)
    topic, name = layout.state_topic.name, layout.connector_name
    ensure_state_topic(kafka.clients(), layout)
    admin = AdminClient({"bootstrap.servers": stack.kafka.bootstrap_servers})
    try:
        producer = kafka.producer()
        producer.produce(topic, key=name.encode(), value=b"{not json")
        assert producer.flush(30) == 0
        with pytest.raises(TargetStateStoreError, match=rf"state topic '{topic}'\[0\]@0: the record for connector '{name}' is not JSON"):
            declared_states(kafka.clients(), layout)
        record_declared(kafka.clients(), layout, DeclaredState.now(name, "paused", run_id="manual", reason="fix"))
        assert declared_states(kafka.clients(), layout) == {name: "PAUSED"}
    finally:
        admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=30)
