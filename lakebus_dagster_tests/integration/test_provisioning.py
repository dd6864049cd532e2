"""provision_lakebus and the maintenance jobs against the real stack, run in process."""

from __future__ import annotations

from collections import Counter

import pytest
import requests
from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient, NewTopic

from lakebus_dagster.bus.layout import ICEBERG_SINK_CLASS
from lakebus_dagster.bus.provenance import OFFSET_COLUMN
from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster.definitions import defs
from lakebus_dagster.events import Bet, EventProducer
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.provision import ProvisioningError

from .helpers import TEST_COMMIT_INTERVAL_MS, committed_rows, wait_for

pytestmark = pytest.mark.integration


def _file_contains(path, needle: bytes, chunk: int = 1 << 20) -> bool:
    """Stream the file (service logs can be large) looking for ``needle`` across chunk borders."""
    tail = b""
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            if needle in tail + block:
                return True
            tail = block[-len(needle):]
    return False


def _resources(suffix: str) -> dict:
    return {**build_resources(), "layout": BusLayoutResource(name_suffix=suffix, commit_interval_ms=TEST_COMMIT_INTERVAL_MS)}


def _run(job_name: str, suffix: str, run_config: dict | None = None, raise_on_error: bool = True):
    job = defs.resolve_job_def(job_name)
    return job.execute_in_process(resources=_resources(suffix), run_config=run_config or {}, raise_on_error=raise_on_error)


def _sink_group_members(stack, connector: str) -> set[str]:
    """Member ids of the sink's consumer group ``connect-<name>`` once it is STABLE (else empty)."""
    admin = AdminClient({"bootstrap.servers": stack.kafka.bootstrap_servers})
    group = admin.describe_consumer_groups([f"connect-{connector}"])[f"connect-{connector}"].result(timeout=30)
    return {m.member_id for m in group.members} if group.state == ConsumerGroupState.STABLE else set()


def _outcomes(result, op: str) -> dict[str, str]:
    return {f"{o.kind}:{o.name}": o.action.value for o in result.output_for_node(op)}


@pytest.fixture
def provisioned(stack, run_id):
    layout = BusLayoutResource(name_suffix=run_id).layout()
    client = ConnectClient(stack.connect.urls[0])
    yield run_id, layout, client
    if client.exists(layout.connector_name):
        client.delete(layout.connector_name)
    client.close()


def test_provision_from_scratch_then_unchanged_then_restores_drift(provisioned, stack, wait_for_rows):
    run_id, layout, client = provisioned
    first = _run("provision_lakebus", run_id)
    topics = _outcomes(first, "ensure_topics")
    # bus, control, DLQ, connector states, replay ledger, offset ledger
    assert set(topics.values()) == {"created"} and len(topics) == 6, topics
    assert _outcomes(first, "ensure_connector") == {f"connector:{layout.connector_name}": "created"}
    assert set(_outcomes(first, "ensure_storage").values()) <= {"created", "unchanged"}

    # events land through the provisioned connector
    with EventProducer(layout.bus_topic.name, {"bootstrap.servers": stack.kafka.bootstrap_servers}) as producer:
        for i in range(5):
            producer.send(Bet(category="biz", event="bet", log_date="2025-11-25", hour="18", plat_id=1, app_id=10406,
                              ts=1732527602000 + i, schema_version=1, user_id=2001, order_id=f"p{i}", amount=1.5,
                              currency="BRL", game_id=777))
    wait_for_rows(load_catalog(stack), layout.routes["bet"], 5, connector=layout.connector_name)

    # second run: nothing changes, and the connector is not restarted (its task keeps its worker/state)
    second = _run("provision_lakebus", run_id)
    for op in ("ensure_storage", "ensure_topics", "ensure_connector"):
        assert set(_outcomes(second, op).values()) == {"unchanged"}, (op, _outcomes(second, op))

    # a hand edit is reported as a diff and restored
    live = client.get_config(layout.connector_name)
    client.put_config(layout.connector_name, {**live, "consumer.override.max.poll.records": "7"})
    third = _run("provision_lakebus", run_id)
    assert _outcomes(third, "ensure_connector") == {f"connector:{layout.connector_name}": "updated"}
    diff_md = next(e for e in third.all_node_events if e.step_key == "ensure_connector" and e.is_successful_output)
    meta = diff_md.event_specific_data.metadata
    diff_text = meta[f"diff connector {layout.connector_name}"].value
    assert "consumer.override.max.poll.records" in diff_text and "7" in diff_text
    assert client.get_config(layout.connector_name)["consumer.override.max.poll.records"] == str(layout.tuning.max_poll_records)
    # secrets stay placeholders in the live config, and never reach the run's metadata
    assert client.get_config(layout.connector_name)["iceberg.catalog.s3.secret-access-key"].startswith("${env:")
    import os
    secret = os.environ["LAKEBUS_S3_SECRET_ACCESS_KEY"]
    for event in third.all_events:
        assert secret not in str(event), "a secret value reached the run's events"
    # ... nor the service logs (the worker resolves ${env:...} without printing the value)
    for log in stack.logs_dir.glob("*.log"):
        assert not _file_contains(log, secret.encode()), f"the S3 secret appears in {log}"


def test_control_topic_with_three_partitions_is_refused(stack, run_id):
    layout = BusLayoutResource(name_suffix=run_id).layout()
    admin = AdminClient({"bootstrap.servers": stack.kafka.bootstrap_servers})
    admin.create_topics([NewTopic(layout.control_topic.name, 3, 1)])[layout.control_topic.name].result(timeout=30)
    result = _run("provision_lakebus", run_id, raise_on_error=False)
    assert not result.success
    failure = result.failure_data_for_node("ensure_topics")
    assert failure is not None
    message = failure.error.cause.message if failure.error.cause else failure.error.message
    assert layout.control_topic.name in message and "3 partitions" in message
    assert ProvisioningError.__name__ in (failure.error.cause.cls_name if failure.error.cause else failure.error.cls_name)
    # nothing was created past the refusal
    assert not ConnectClient(stack.connect.urls[0]).exists(layout.connector_name)
    md = admin.list_topics(timeout=10)
    assert layout.bus_topic.name not in md.topics


def test_maintenance_jobs_against_the_live_connector(provisioned, stack):
    run_id, layout, client = provisioned
    _run("provision_lakebus", run_id)
    name = layout.connector_name
    cfg = lambda op, **extra: {"ops": {op: {"config": {"connector": name, **extra}}}}  # noqa: E731

    client.wait_for_state(name, {"RUNNING"}, timeout=60)
    report = _run("connector_status_report", run_id, cfg("connector_status"))
    meta = next(e for e in report.all_node_events if e.step_key == "connector_status" and e.is_successful_output)
    meta = {k: v.value for k, v in meta.event_specific_data.metadata.items()}
    live = requests.get(f"{stack.connect.urls[0]}/connectors/{name}/status", timeout=10).json()  # Connect's own answer
    assert meta["state"] == live["connector"]["state"] == "RUNNING"
    assert f"| task 0 | RUNNING | {live['tasks'][0]['worker_id']} |" in meta["tasks"], meta["tasks"]
    assert meta["offsets"] == requests.get(f"{stack.connect.urls[0]}/connectors/{name}/offsets", timeout=10).json()["offsets"]

    _run("pause_connector", run_id, cfg("pause_connector_op"))
    assert client.status(name).state == "PAUSED"
    _run("resume_connector", run_id, cfg("resume_connector_op"))
    assert client.status(name).state == "RUNNING"
    _run("stop_connector", run_id, cfg("stop_connector_op"))
    assert client.status(name).state == "STOPPED"
    _run("resume_connector", run_id, cfg("resume_connector_op"))
    assert client.status(name).state == "RUNNING"
    # the restart really restarts the task: its consumer leaves the sink's group and a new one joins
    # (Kafka's own view — the connector was RUNNING before, so RUNNING afterwards proves nothing)
    before = wait_for(lambda: _sink_group_members(stack, name), f"{name}'s task consumer in its group", timeout=60)
    task_configs = client.tasks(name)
    _run("restart_connector", run_id, cfg("restart_connector_op", only_failed=False, include_tasks=True))
    after = wait_for(lambda: (m := _sink_group_members(stack, name)) and not (m & before) and m,
                     f"a new task consumer in {name}'s group (before: {sorted(before)})", timeout=60)
    assert len(after) == len(before) and client.status(name).in_states({"RUNNING"})
    # lakebus's sink class: the restarted connector produced the same task configurations (the Apache
    # sink's random transactional-id suffix made Connect rewrite them and restart every task again)
    assert client.get_config(name)["connector.class"] == ICEBERG_SINK_CLASS
    suffix = "iceberg.coordinator.transactional.suffix"
    assert client.tasks(name) == task_configs, (task_configs[0]["config"].get(suffix), client.tasks(name)[0]["config"].get(suffix))

    # produce 10 records, then move the start position to offset 4 and leave the connector STOPPED
    with EventProducer(layout.bus_topic.name, {"bootstrap.servers": stack.kafka.bootstrap_servers}) as producer:
        for i in range(10):
            producer.send(Bet(category="biz", event="bet", log_date="2025-11-25", hour="19", plat_id=1, app_id=1,
                              ts=1732531200000 + i, schema_version=1, user_id=7, order_id=f"m{i}", amount=2.0))
    offsets = _run("set_connector_offsets", run_id,
                   cfg("set_connector_offsets_op", mode="set", positions=[{"partition": 0, "offset": 4}], resume=False,
                       confirm=name))
    assert offsets.success
    live = client.get_offsets(name)
    assert live == [{"partition": {"kafka_topic": layout.bus_topic.name, "kafka_partition": 0}, "offset": {"kafka_offset": 4}}]
    assert client.status(name).state == "STOPPED"
    _run("resume_connector", run_id, cfg("resume_connector_op"))

    refused = _run("delete_connector", run_id, cfg("delete_connector_op", confirm="nope"), raise_on_error=False)
    assert not refused.success and client.exists(name)
    _run("delete_connector", run_id, cfg("delete_connector_op", confirm=name))
    assert not client.exists(name)
    assert requests.get(f"{stack.connect.urls[0]}/connectors/{name}", timeout=10).status_code == 404


def test_set_connector_offsets_rereads_rows_from_the_new_position(provisioned, stack, wait_for_rows):
    """produce N, N rows land; set the offsets back to k through the job: N - k rows land again, exactly."""
    n, k = 10, 4
    run_id, layout, client = provisioned
    name, table_name = layout.connector_name, layout.routes["bet"]
    _run("provision_lakebus", run_id)
    with EventProducer(layout.bus_topic.name, {"bootstrap.servers": stack.kafka.bootstrap_servers}) as producer:
        for i in range(n):
            producer.send(Bet(category="biz", event="bet", log_date="2025-11-25", hour="20", plat_id=1, app_id=1,
                              ts=1732564800000 + i, schema_version=1, user_id=8, order_id=f"o{i}", amount=3.0))
    catalog = load_catalog(stack)
    assert wait_for_rows(catalog, table_name, n, connector=name) == n
    # the sink's committed position has reached the end of the topic (what it will be moved back from)
    wait_for(lambda: client.get_offsets(name) == _position(layout, n), f"{name} committed up to offset {n}", timeout=60)

    result = _run("set_connector_offsets", run_id, {"ops": {"set_connector_offsets_op": {"config": {
        "connector": name, "confirm": name, "mode": "set", "positions": [{"partition": 0, "offset": k}],
        "wait_timeout_s": 90.0}}}})
    assert result.success and client.status(name).in_states({"RUNNING"})

    total = wait_for_rows(catalog, table_name, n + (n - k), connector=name)
    assert total == n + (n - k), f"{total} rows after moving back to {k}, expected {n + (n - k)}"
    # the oracle is the rows' own provenance: offsets k..n-1 twice, 0..k-1 once, nothing else
    wait_for(lambda: client.get_offsets(name) == _position(layout, n), f"{name} committed up to offset {n} again", timeout=60)
    offsets = Counter(catalog.load_table(table_name).scan(selected_fields=(OFFSET_COLUMN,)).to_arrow()[OFFSET_COLUMN].to_pylist())
    assert offsets == {o: 1 if o < k else 2 for o in range(n)}
    assert committed_rows(catalog, table_name) == n + (n - k), "rows kept arriving after the re-read"


def _position(layout, offset: int) -> list[dict]:
    return [{"partition": {"kafka_topic": layout.bus_topic.name, "kafka_partition": 0}, "offset": {"kafka_offset": offset}}]
