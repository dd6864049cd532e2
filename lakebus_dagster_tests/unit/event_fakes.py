"""Test doubles for the event SDK: a fake ``confluent_kafka.Producer`` and a sample record."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError

from lakebus_dagster.events import Bet

SEED_BET = Bet(
    category="biz",
    event="bet",
    log_date="2025-11-25",
    hour="18",
    plat_id=1,
    app_id=10406,
    ts=1732527602000,
    schema_version=1,
    user_id=2001,
    order_id="10001",
    amount=10,
    currency="BRL",
    game_id=777,
)


class FakeMessage:
    def __init__(self, topic: str, key: str | None, value: bytes) -> None:
        self._topic, self._key, self._value = topic, key, value

    def topic(self) -> str:
        return self._topic

    def key(self) -> bytes | None:
        return None if self._key is None else self._key.encode()

    def value(self) -> bytes:
        return self._value


class FakeProducer:
    """Queues messages and serves delivery reports from ``poll``/``flush``, like librdkafka.

    ``fail(key)`` returning True makes that message's delivery report an error; the first
    ``queue_full`` produce calls raise ``BufferError``; ``stuck`` is what ``flush`` reports as
    still queued.
    """

    def __init__(
        self,
        fail: Callable[[str | None], bool] = lambda key: False,
        queue_full: int = 0,
        stuck: int = 0,
    ) -> None:
        self.fail = fail
        self.queue_full = queue_full
        self.stuck = stuck
        self.produced: list[FakeMessage] = []
        self.poll_timeouts: list[float] = []
        self._pending: list[tuple[Callable[[Any, Any], None], FakeMessage]] = []

    def produce(
        self,
        topic: str,
        value: bytes | None = None,
        key: str | None = None,
        on_delivery: Callable[[Any, Any], None] | None = None,
    ) -> None:
        if self.queue_full:
            self.queue_full -= 1
            raise BufferError("Local: Queue full")
        assert value is not None and on_delivery is not None
        msg = FakeMessage(topic, key, value)
        self.produced.append(msg)
        self._pending.append((on_delivery, msg))

    def _serve(self) -> int:
        served, self._pending = self._pending, []
        for callback, msg in served:
            err = KafkaError(KafkaError._MSG_TIMED_OUT) if self.fail(msg._key) else None
            callback(err, msg)
        return len(served)

    def poll(self, timeout: float = -1) -> int:
        self.poll_timeouts.append(timeout)
        return self._serve()

    def flush(self, timeout: float = -1) -> int:
        self._serve()
        return self.stuck
