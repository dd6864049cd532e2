"""EventProducer against a fake confluent_kafka.Producer: keys, delivery errors, queue-full retry."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import pytest

from lakebus_dagster.events import (
    DeliveryError,
    EventProducer,
    EventValidationError,
    Recharge,
    default_key,
)
from lakebus_dagster.events.producer import DEFAULT_CONFIG, producer_config

from .event_fakes import SEED_BET, FakeProducer


def _bet(**changes: Any) -> Any:
    return dataclasses.replace(SEED_BET, **changes)


def test_sends_encoded_envelope_to_topic() -> None:
    fake = FakeProducer()
    producer = EventProducer("events", fake)
    producer.send(SEED_BET)
    producer.flush()
    (msg,) = fake.produced
    assert msg.topic() == "events"
    assert json.loads(msg.value())["payload"]["order_id"] == "10001"
    assert (producer.sent, producer.delivered, producer.failed) == (1, 1, 0)


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({}, "2001"),
        ({"user_id": None}, "10001"),
        ({"user_id": None, "order_id": None}, None),
    ],
)
def test_default_key_selection(changes: dict[str, Any], key: str | None) -> None:
    fake = FakeProducer()
    EventProducer("events", fake).send(_bet(**changes))
    assert fake.produced[0]._key == key


def test_default_key_works_on_dicts_and_custom_key_function() -> None:
    assert default_key({"order_id": "o-1"}) == "o-1"
    fake = FakeProducer()

    def by_game(payload: Mapping[str, Any]) -> str | None:
        return f"game-{payload['game_id']}"

    producer = EventProducer("events", fake, key=by_game)
    producer.send(dataclasses.asdict(SEED_BET), "bet")
    assert fake.produced[0]._key == "game-777"


def test_invalid_event_is_never_produced() -> None:
    fake = FakeProducer()
    with pytest.raises(EventValidationError, match="'user_id'"):
        EventProducer("events", fake).send(_bet(user_id=2**40))
    assert fake.produced == []


def test_failed_deliveries_raise_from_flush_with_the_messages() -> None:
    fake = FakeProducer(fail=lambda key: key == "2002")
    producer = EventProducer("events", fake)
    for user_id in (2001, 2002, 2003):
        producer.send(_bet(user_id=user_id))
    with pytest.raises(DeliveryError) as exc_info:
        producer.flush()
    (failure,) = exc_info.value.failures
    assert (failure.event, failure.key) == ("bet", "2002")
    assert "_MSG_TIMED_OUT" in failure.error
    assert json.loads(failure.value)["payload"]["user_id"] == 2002
    assert "1 delivery failure(s): bet key='2002'" in str(exc_info.value)
    assert (producer.sent, producer.delivered, producer.failed) == (3, 2, 1)
    producer.flush()  # the failures were handed over with the exception


def test_failed_deliveries_raise_from_close_and_context_manager() -> None:
    fake = FakeProducer(fail=lambda key: True)
    with pytest.raises(DeliveryError, match="1 delivery failure"):
        with EventProducer("events", fake) as producer:
            producer.send(SEED_BET)
    with pytest.raises(RuntimeError, match="closed"):
        producer.send(SEED_BET)
    producer.close()  # idempotent


def test_messages_left_in_queue_raise() -> None:
    producer = EventProducer("events", FakeProducer(stuck=2))
    producer.send(SEED_BET)
    with pytest.raises(DeliveryError, match="2 message.s. still queued") as exc_info:
        producer.flush(timeout=0.5)
    assert exc_info.value.undelivered == 2


def test_buffer_error_polls_and_retries() -> None:
    fake = FakeProducer(queue_full=3)
    producer = EventProducer("events", fake, queue_full_poll=0.25)
    producer.send(SEED_BET)
    assert len(fake.produced) == 1
    assert fake.poll_timeouts == [0.25, 0.25, 0.25, 0]  # three waits, then the usual poll(0)
    producer.flush()


def test_buffer_error_gives_up_after_timeout() -> None:
    fake = FakeProducer(queue_full=10**9)
    producer = EventProducer("events", fake, queue_full_timeout=0.05, queue_full_poll=0)
    with pytest.raises(BufferError):
        producer.send(SEED_BET)
    assert producer.sent == 0


def test_delivery_reports_are_served_on_send() -> None:
    fake = FakeProducer()
    producer = EventProducer("events", fake)
    recharge = Recharge(
        category="biz", event="recharge", log_date="2025-11-25", hour="18", plat_id=1,
        app_id=10406, ts=1732527602000, schema_version=1, status="success", order_id="r-1",
    )
    producer.send(recharge)
    producer.send(SEED_BET)
    assert producer.delivered == 2  # poll(0) after each produce serves pending reports
    assert [m._key for m in fake.produced] == ["r-1", "2001"]


def test_config_defaults_and_safety() -> None:
    config = producer_config({"bootstrap.servers": "b:9092", "linger.ms": 5})
    assert config == {**DEFAULT_CONFIG, "bootstrap.servers": "b:9092", "linger.ms": 5}
    assert config["acks"] == "all" and config["enable.idempotence"] is True
    assert config["compression.type"] == "zstd"
    with pytest.raises(ValueError, match="acks=1 is not allowed"):
        producer_config({"acks": 1})
    with pytest.raises(ValueError, match="enable.idempotence=False"):
        EventProducer("events", {"enable.idempotence": False})


def test_config_dict_builds_a_real_producer() -> None:
    # librdkafka connects lazily: constructing (and closing an empty producer) needs no broker.
    producer = EventProducer("events", {"bootstrap.servers": "127.0.0.1:1"})
    assert producer.topic == "events"
    producer.close(timeout=1)
