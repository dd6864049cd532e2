"""The ``generate_sample_events`` job in process, with a fake Kafka: counts, metadata, failures."""

from __future__ import annotations

import json
import time
from collections import Counter
from types import SimpleNamespace
from typing import Any, ClassVar

import dagster as dg
import pytest

from lakebus_dagster.defs.events import generate_sample_events
from lakebus_dagster.defs.events.jobs import PREVIEW_SIZE, SampleEventsConfig
from lakebus_dagster.defs.resources import BusLayoutResource, KafkaResource

#: the bus topic of the default layout (the op's default when config.topic is empty)
DEFAULT_TOPIC = BusLayoutResource().layout().bus_topic.name
from lakebus_dagster.events import generate_events

from .event_fakes import FakeProducer

OP = "send_sample_events"
RUN_CONFIG = {"count": 600, "seed": 3, "start_date": "2025-11-24", "days": 3, "users": 20,
              "event_weights": {"bet": 2.0, "recharge": 1.0}}


class TopicFakeProducer(FakeProducer):
    """A fake producer that also answers ``list_topics`` for a fixed set of existing topics."""

    def __init__(self, config: dict[str, Any], topics: set[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config = config
        self.topics = topics

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        error = None if topic in self.topics else "Broker: Unknown topic or partition"
        return SimpleNamespace(topics={topic: SimpleNamespace(error=error)})


class FakeKafka(KafkaResource):
    """``KafkaResource`` whose ``producer()`` returns a fake; Dagster rebuilds resources from their
    config, so the producers created are collected on the class, not on the instance."""

    existing_topics: list[str] = [DEFAULT_TOPIC]
    failing_keys: list[str] = []
    created: ClassVar[list[TopicFakeProducer]] = []

    def producer(self, **overrides: Any) -> Any:  # type: ignore[override]
        fake = TopicFakeProducer(
            {**self.client_config(), **overrides},
            set(self.existing_topics),
            fail=lambda key: key in self.failing_keys,
        )
        FakeKafka.created.append(fake)
        return fake


@pytest.fixture(autouse=True)
def _fresh_fakes() -> None:
    FakeKafka.created.clear()


def run(config: dict[str, Any], kafka: KafkaResource | None = None) -> dg.ExecuteInProcessResult:
    kafka = kafka or FakeKafka(bootstrap_servers="fake:9092")
    return generate_sample_events.execute_in_process(
        run_config={"ops": {OP: {"config": config}}},
        # a bus-changing job: it writes through the operations principal's client
        resources={"operations": kafka, "layout": BusLayoutResource()},
        raise_on_error=False,
    )


def output_metadata(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    (event,) = [e for e in result.all_node_events if e.event_type_value == "STEP_OUTPUT"]
    return {k: getattr(v, "value", v) for k, v in event.step_output_data.metadata.items()}


def test_job_sends_the_generated_events_and_reports_them() -> None:
    started = time.monotonic()
    result = run(RUN_CONFIG)
    wall_s = time.monotonic() - started
    assert result.success

    # the oracle is what reached the producer, counted here (not the SDK's own aggregates)
    (fake,) = FakeKafka.created
    assert {m.topic() for m in fake.produced} == {DEFAULT_TOPIC}
    payloads = [json.loads(m.value())["payload"] for m in fake.produced]
    assert len(payloads) == RUN_CONFIG["count"]
    per_event = Counter(p["event"] for p in payloads)
    assert set(per_event) == {"bet", "recharge"}
    # weights 2:1 over 600 events: each count far from the other side of the split
    assert 330 <= per_event["bet"] <= 470, per_event
    assert {p["log_date"] for p in payloads} == {"2025-11-24", "2025-11-25", "2025-11-26"}
    assert len({p["user_id"] for p in payloads}) <= RUN_CONFIG["users"]
    assert len({p["order_id"] for p in payloads}) == RUN_CONFIG["count"]
    # deterministic: the same config generates the same events (the job adds nothing, drops nothing)
    generated = generate_events(SampleEventsConfig(**RUN_CONFIG).generator_config())
    assert [p["order_id"] for p in payloads] == [e.order_id for e in generated]
    assert result.output_for_node(OP) == dict(per_event)
    # the SDK's safe producer settings reached the resource's producer()
    assert fake.config["acks"] == "all" and fake.config["enable.idempotence"] is True
    assert fake.config["compression.type"] == "zstd" and fake.config["bootstrap.servers"] == "fake:9092"

    meta = output_metadata(result)
    assert meta["per_event_counts"] == dict(per_event)
    assert (meta["sent"], meta["delivered"], meta["failed"]) == (600, 600, 0)
    assert meta["topic"] == DEFAULT_TOPIC
    # elapsed is measured inside this run, and the rate is sent / elapsed (both rounded for display)
    elapsed, rate = meta["elapsed_s"], meta["rate_events_per_s"]
    assert 0 < elapsed <= wall_s + 0.001, (elapsed, wall_s)
    low = 600 / (elapsed + 0.0005) - 0.05
    high = 600 / (elapsed - 0.0005) + 0.05 if elapsed > 0.0005 else float("inf")
    assert low <= rate <= high, (rate, elapsed)

    per_day = meta["per_day_counts"].splitlines()
    assert per_day[0] == "| log_date | bet | recharge | total |"
    days = Counter((p["log_date"], p["event"]) for p in payloads)
    for day in ("2025-11-24", "2025-11-25", "2025-11-26"):
        row = f"| {day} | {days[day, 'bet']} | {days[day, 'recharge']} | {days[day, 'bet'] + days[day, 'recharge']} |"
        assert row in per_day
    assert per_day[-1] == f"| **total** | {per_event['bet']} | {per_event['recharge']} | 600 |"

    preview = meta["preview"].splitlines()
    assert len(preview) == 2 + PREVIEW_SIZE
    assert preview[0].startswith("| category | event | log_date | hour |")
    first = payloads[0]
    assert f'"{first["order_id"]}"' in preview[2] and f'"{first["event"]}"' in preview[2]


def test_topic_is_configurable() -> None:
    kafka = FakeKafka(bootstrap_servers="fake:9092", existing_topics=["events-other"])
    assert run({"count": 5, "topic": "events-other"}, kafka).success
    assert {m.topic() for m in FakeKafka.created[0].produced} == {"events-other"}


def test_missing_topic_fails_before_sending_and_names_it() -> None:
    result = run({"count": 5, "topic": "nope"})
    assert not result.success
    assert "topic 'nope' is not available on fake:9092" in str(result.failure_data_for_node(OP).user_failure_data.description)
    assert FakeKafka.created[0].produced == []


def test_delivery_failures_fail_the_run_with_counts() -> None:
    kafka = FakeKafka(bootstrap_servers="fake:9092", failing_keys=[str(u) for u in range(2001, 2006)])
    result = run({"count": 200, "users": 10}, kafka)
    assert not result.success
    failure = result.failure_data_for_node(OP).user_failure_data
    assert "sending to topic 'events'" in failure.description and "delivery failure(s)" in failure.description
    meta = {k: v.value for k, v in failure.metadata.items()}
    # the oracle: the fake refused exactly the messages keyed by those five users
    refused = sum(m.key().decode() in kafka.failing_keys for m in FakeKafka.created[0].produced)
    assert refused > 0, "the sample must contain some of the failing users"
    assert (meta["sent"], meta["delivered"], meta["failed"]) == (200, 200 - refused, refused)


@pytest.mark.parametrize(
    ("changes", "field"),
    [({"start_date": "25.11.2025"}, "start_date"), ({"event_weights": {"deposit": 1.0}}, "deposit"),
     ({"hours": [24]}, "hours")],
)
def test_invalid_config_fails_naming_the_field(changes: dict[str, Any], field: str) -> None:
    result = run({"count": 5, **changes})
    assert not result.success
    assert field in result.failure_data_for_node(OP).user_failure_data.description
    assert FakeKafka.created == []
