"""``lakebus generate`` against the real broker: a missing topic is one line naming it (no 30 s wait,
no raw UNKNOWN_TOPIC_OR_PART), and a real send to a scratch topic (never the bus topic) delivers
exactly the events it reports."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration
LAKEBUS = str(Path(sys.executable).parent / "lakebus")


def test_missing_topic_is_named_at_once(stack):
    topic = f"lakebus-cli-missing-{uuid.uuid4().hex[:8]}"
    start = time.monotonic()
    proc = subprocess.run([LAKEBUS, "generate", "--topic", topic, "--count", "2"], capture_output=True, text=True, timeout=60)
    assert time.monotonic() - start < 9
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"lakebus generate: error: topic {topic!r} (--topic) does not exist on {stack.kafka.bootstrap_servers}; create it first "
        "(`lakebus launch provision_lakebus` creates the bus topics) or name an existing topic"]


def test_generate_sends_to_a_scratch_topic(stack):
    topic = f"lakebus-cli-scratch-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": stack.kafka.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    try:
        proc = subprocess.run([LAKEBUS, "generate", "--topic", topic, "--count", "300", "--seed", "3"],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == ""  # no librdkafka log lines
        assert "done: sent 300, delivered 300, failed 0" in proc.stdout
        consumer = Consumer({"bootstrap.servers": stack.kafka.bootstrap_servers, "group.id": f"cli-{topic}"})
        try:
            assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 300)
        finally:
            consumer.close()
    finally:
        admin.delete_topics([topic])[topic].result(30)
