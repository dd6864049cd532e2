"""The bus scales through its layout: provision_lakebus grows the bus topic's partitions and the
sink's tasks with them, refuses to shrink, and changes nothing on a rerun (real stack, in process).
"""

from __future__ import annotations

from collections import Counter

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster.definitions import defs
from lakebus_dagster.events import Bet
from lakebus_dagster.events.envelope import EnvelopeEncoder
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.provision import ProvisioningError

from .helpers import TEST_COMMIT_INTERVAL_MS, wait_for

pytestmark = pytest.mark.integration


def _provision(run_id: str, partitions: int, raise_on_error: bool = True):
    layout = BusLayoutResource(name_suffix=run_id, commit_interval_ms=TEST_COMMIT_INTERVAL_MS, bus_partitions=partitions)
    job = defs.resolve_job_def("provision_lakebus")
    return job.execute_in_process(resources={**build_resources(), "layout": layout}, raise_on_error=raise_on_error)


def _outcomes(result, op: str) -> dict[str, str]:
    return {o.name: o.action.value for o in result.output_for_node(op)}


def _bets(first: int, n: int) -> list[Bet]:
    # distinct users -> distinct keys, so the default partitioner spreads them over every partition
    return [
        Bet(category="biz", event="bet", log_date="2025-11-25", hour="18", plat_id=1, app_id=10406,
            ts=1732527602000 + i, schema_version=1, user_id=5000 + i, order_id=f"s{i}", amount=1.0,
            currency="BRL", game_id=7)
        for i in range(first, first + n)
    ]


def _send(stack, topic: str, events: list[Bet]) -> Counter:
    """Produce and return how many messages each partition acknowledged (the test's own oracle)."""
    per_partition: Counter = Counter()

    def delivered(err, msg):
        assert err is None, err
        per_partition[msg.partition()] += 1

    encoder = EnvelopeEncoder()
    producer = Producer({"bootstrap.servers": stack.kafka.bootstrap_servers, "enable.idempotence": True, "acks": "all"})
    for event in events:
        producer.produce(topic, key=str(event.user_id), value=encoder.encode(event), on_delivery=delivered)
    assert producer.flush(30) == 0
    return per_partition


@pytest.fixture
def scaled(stack, run_id):
    layout = BusLayoutResource(name_suffix=run_id).layout()
    client = ConnectClient(stack.connect.urls[0])
    yield layout, client
    if client.exists(layout.connector_name):
        client.delete(layout.connector_name)
    client.close()


def test_grow_partitions_raises_tasks_refuses_shrink(scaled, stack, run_id):
    layout, client = scaled
    bus, connector = layout.bus_topic.name, layout.connector_name
    admin = AdminClient({"bootstrap.servers": stack.kafka.bootstrap_servers})
    partitions = lambda: len(admin.list_topics(bus, timeout=10).topics[bus].partitions)  # noqa: E731

    first = _provision(run_id, 1)
    assert _outcomes(first, "ensure_topics")[bus] == "created"
    assert partitions() == 1 and client.get_config(connector)["tasks.max"] == "1"
    sent = _send(stack, bus, _bets(0, 20))
    assert sent == {0: 20}

    # declare 3: the topic grows, tasks.max follows, one task per partition
    grown = _provision(run_id, 3)
    topics = _outcomes(grown, "ensure_topics")
    assert topics[bus] == "updated", topics
    assert topics[layout.control_topic.name] == "unchanged"
    assert _outcomes(grown, "ensure_connector") == {connector: "updated"}
    assert partitions() == 3
    assert len(admin.list_topics(layout.control_topic.name, timeout=10).topics[layout.control_topic.name].partitions) == 1
    assert client.get_config(connector)["tasks.max"] == "3"
    status = wait_for(lambda: (s := client.status(connector)) and len(s.tasks) == 3
                      and all(t.state == "RUNNING" for t in s.tasks) and s, f"{connector}: 3 tasks RUNNING", 90)
    assert [t.id for t in sorted(status.tasks, key=lambda t: t.id)] == [0, 1, 2]

    sent += _send(stack, bus, _bets(20, 60))
    assert set(sent) == {0, 1, 2}, sent  # the events really went to all three partitions

    # every event lands exactly once, from the partition it was acknowledged on
    table = layout.routes["bet"]
    catalog = load_catalog(stack)

    def landed():
        failed = [t for t in client.status(connector).tasks if t.state == "FAILED"]
        assert not failed, f"{connector} task FAILED: {failed[0].trace_summary}"
        try:
            rows = catalog.load_table(table).scan(selected_fields=("order_id", "_kafka_partition", "_kafka_offset")).to_arrow()
        except Exception:  # noqa: BLE001 - the table appears with the first commit
            return None
        return rows if rows.num_rows >= 80 else None

    rows = wait_for(landed, f"80 rows in {table}", timeout=150).to_pylist()
    assert len(rows) == 80
    assert sorted(r["order_id"] for r in rows) == sorted(f"s{i}" for i in range(80))
    assert len({(r["_kafka_partition"], r["_kafka_offset"]) for r in rows}) == 80
    assert Counter(r["_kafka_partition"] for r in rows) == sent

    # declare 2: refused with topic, live and declared counts; nothing changes
    config_before = client.get_config(connector)
    refused = _provision(run_id, 2, raise_on_error=False)
    assert not refused.success
    failure = refused.failure_data_for_node("ensure_topics")
    error = failure.error.cause or failure.error
    assert error.cls_name == ProvisioningError.__name__
    assert bus in error.message and "3 partitions live" in error.message and "declares 2" in error.message, error.message
    assert partitions() == 3
    assert client.get_config(connector) == config_before
    assert not [e for e in refused.all_node_events if e.step_key == "ensure_connector" and e.is_successful_output]

    # rerun with the declared 3: unchanged everywhere
    again = _provision(run_id, 3)
    for op in ("ensure_storage", "ensure_topics", "ensure_connector"):
        assert set(_outcomes(again, op).values()) == {"unchanged"}, (op, _outcomes(again, op))
