"""``lakebus connectors NAME`` and ``lakebus status`` against the real Connect worker and Kafka (not
the unit tests' fake Connect server): the provisioned sink shows no drift, its lag per partition
equals Kafka's end offsets minus the sink group's committed offsets (read here with Kafka's own
admin API and watermarks), and a config changed by hand is reported as drift, key by key."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from lakebus_dagster.events import EventProducer, GeneratorConfig, generate_events
from lakebus_dagster.lake.catalog import load_catalog

from .helpers import committed_rows, provisioned_bus, wait_for

pytestmark = pytest.mark.integration
LAKEBUS = str(Path(sys.executable).parent / "lakebus")
COMMIT_INTERVAL_MS = 2000


def _cli(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([LAKEBUS, *argv], capture_output=True, text=True, timeout=120, env={**os.environ, **env})


def _send(bootstrap: str, topic: str, events) -> None:
    with EventProducer(topic, {"bootstrap.servers": bootstrap}) as producer:
        for e in events:
            producer.send(e)


def _kafka_lag(bootstrap: str, topic: str, group: str) -> tuple[int, int]:
    """(the group's committed offset, the end offset) of partition 0, from Kafka itself."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])])[group].result(10)
    committed = listed.topic_partitions[0].offset
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"test-{uuid.uuid4().hex[:6]}"})
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()
    return committed, end


def test_connectors_and_status_read_the_real_connector_and_kafka(stack):
    suffix = uuid.uuid4().hex[:8]
    events = list(generate_events(GeneratorConfig(count=65, seed=65, days=("2025-11-21",), hours=(3,))))
    env = {"LAKEBUS_BUS_SUFFIX": suffix, "LAKEBUS_SINK_COMMIT_INTERVAL_MS": str(COMMIT_INTERVAL_MS)}
    with provisioned_bus(stack, suffix, commit_interval_ms=COMMIT_INTERVAL_MS) as (_, layout, client):
        name, topic = layout.connector_name, layout.bus_topic.name
        catalog = load_catalog(stack)
        _send(stack.kafka.bootstrap_servers, topic, events[:40])
        wait_for(lambda: sum(committed_rows(catalog, t) for t in layout.tables) == 40, "40 rows landed")
        client.pause(name)
        client.wait_for_state(name, {"PAUSED"}, timeout=60)
        _send(stack.kafka.bootstrap_servers, topic, events[40:])

        committed, end = _kafka_lag(stack.kafka.bootstrap_servers, topic, f"connect-{name}")
        assert (committed, end) == (40, 65), "the sink group committed what landed; 25 more wait on the bus"
        shown = _cli(env, "connectors", name)
        assert shown.returncode == 0, shown.stderr
        assert "config     matches what provision_lakebus applies" in shown.stdout, shown.stdout
        assert f"state      PAUSED" in shown.stdout
        row = next(line.split() for line in shown.stdout.splitlines() if line.strip().startswith(topic))
        assert row == [topic, "0", str(committed), str(end), str(end - committed)], shown.stdout
        assert f"lag {end - committed} record(s) in total" in shown.stdout

        status = _cli(env, "status")
        assert status.returncode == 1, "a PAUSED connector is not healthy"
        assert f"connector      {name}: PAUSED" in status.stdout, status.stdout
        assert f"bus lag        {end - committed} record(s) not consumed yet ({committed}/{end} consumed" in status.stdout

        # a hand-made change on the live connector is drift, named key by key
        live = client.get_config(name)
        client.put_config(name, {**live, "consumer.override.max.poll.records": "123"})
        drifted = _cli(env, "connectors", name)
        assert "config     1 difference(s) from what provision_lakebus applies" in drifted.stdout, drifted.stdout
        assert f"  ~ consumer.override.max.poll.records: 123 -> {live['consumer.override.max.poll.records']}" in drifted.stdout
