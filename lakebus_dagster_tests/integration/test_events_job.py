"""``generate_sample_events`` with the real ``KafkaResource``: every generated event is on the topic."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from lakebus_dagster.bus.layout import TopicSpec
from lakebus_dagster.defs.events import generate_sample_events
from lakebus_dagster.defs.events.jobs import SampleEventsConfig
from lakebus_dagster.defs.resources import BusLayoutResource, KafkaResource
from lakebus_dagster.events import expected_aggregates, generate_events

from .helpers import consume_all, temporary_topics

pytestmark = pytest.mark.integration


def test_job_produces_exactly_the_generated_events(stack, run_id):
    topic = f"events-job-{run_id}"
    config = {"count": 1500, "seed": 5, "days": 2, "users": 50, "topic": topic}
    expected = expected_aggregates(generate_events(SampleEventsConfig(**config).generator_config()))

    with temporary_topics(stack.bootstrap_servers, [TopicSpec(topic)]):
        result = generate_sample_events.execute_in_process(
            run_config={"ops": {"send_sample_events": {"config": config}}},
            resources={"kafka": KafkaResource(bootstrap_servers=stack.bootstrap_servers), "layout": BusLayoutResource()},
        )
        assert result.success
        values = consume_all(stack.bootstrap_servers, topic, expected.total, group_id=f"job-{run_id}")

    payloads = [json.loads(v)["payload"] for v in values]
    assert Counter(p["event"] for p in payloads) == expected.per_event
    assert Counter((p["event"], p["log_date"], p["hour"]) for p in payloads) == expected.per_event_hour
    assert len({p["order_id"] for p in payloads}) == expected.total
