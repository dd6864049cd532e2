"""``generate_sample_events`` with the real ``KafkaResource``: every generated event is on the topic."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from lakebus_dagster.bus.layout import TopicSpec
from lakebus_dagster.defs.events import generate_sample_events
from lakebus_dagster.defs.events.jobs import SampleEventsConfig
from lakebus_dagster.defs.resources import BusLayoutResource, KafkaResource
from lakebus_dagster.events import generate_events

from .helpers import consume_all, temporary_topics

pytestmark = pytest.mark.integration


def test_job_produces_exactly_the_generated_events(stack, run_id):
    topic = f"events-job-{run_id}"
    config = {"count": 1500, "seed": 5, "days": 2, "users": 50, "topic": topic}
    generated = list(generate_events(SampleEventsConfig(**config).generator_config()))

    with temporary_topics(stack.kafka.bootstrap_servers, [TopicSpec(topic)]):
        result = generate_sample_events.execute_in_process(
            run_config={"ops": {"send_sample_events": {"config": config}}},
            # the sample generator changes the bus: it sends with the operations principal's resource
            resources={"operations": KafkaResource(bootstrap_servers=stack.kafka.bootstrap_servers),
                       "kafka": KafkaResource(bootstrap_servers=stack.kafka.bootstrap_servers), "layout": BusLayoutResource()},
        )
        assert result.success
        # the topic holds exactly config["count"] records (consume_all checks the end offset)
        values = consume_all(stack.kafka.bootstrap_servers, topic, config["count"], group_id=f"job-{run_id}")

    # oracles: the config's numbers and what the topic holds, counted here
    payloads = [json.loads(v)["payload"] for v in values]
    per_event = Counter(p["event"] for p in payloads)
    assert result.output_for_node("send_sample_events") == dict(per_event), "the job reports what reached the topic"
    assert set(per_event) == {"bet", "recharge"}
    assert len({p["order_id"] for p in payloads}) == config["count"], "no duplicates"
    assert len({p["log_date"] for p in payloads}) == config["days"]
    assert len({p["user_id"] for p in payloads}) <= config["users"]
    # deterministic: the records are the seed's events, in order
    assert [p["order_id"] for p in payloads] == [e.order_id for e in generated]
    assert Counter((p["event"], p["log_date"], p["hour"]) for p in payloads) == Counter(
        (e.event, e.log_date, e.hour) for e in generated
    )
