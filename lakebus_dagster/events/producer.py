"""``EventProducer``: validated envelopes to one Kafka topic, with no silent loss.

``confluent_kafka.Producer.produce`` only *queues* a message; whether it reached the broker is
known later, in a delivery report served by ``poll``/``flush``. A producer that ignores those
reports loses data without noticing, so every report is checked here and failures are collected
and raised from :meth:`EventProducer.flush` / :meth:`EventProducer.close` as a
:class:`DeliveryError` that carries the failed messages (value included, so they can be re-sent).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import partial
from types import TracebackType
from typing import Any, Protocol

import confluent_kafka

from .envelope import EnvelopeEncoder
from .errors import DeliveryError, DeliveryFailure
from .models import EventBase

KeyFunc = Callable[[Mapping[str, Any]], str | None]
"""Maps a validated payload to the message key (None: let the partitioner spread messages)."""

DeliveryCallback = Callable[[Any, Any], None]

#: Settings that make "delivered" mean "on every in-sync replica, exactly once, in order".
#: Overriding them would reintroduce loss or duplicates, so a conflicting value is refused.
REQUIRED_CONFIG: dict[str, tuple[object, ...]] = {
    "acks": ("all", "-1", -1),
    "enable.idempotence": (True, "true"),
}
#: Tunable defaults: zstd compresses the repetitive schema part of each envelope very well, and a
#: short linger batches bursts without noticeable latency.
DEFAULT_CONFIG: dict[str, object] = {
    "acks": "all",
    "enable.idempotence": True,
    "compression.type": "zstd",
    "linger.ms": 20,
}


class ProducerLike(Protocol):
    """The subset of ``confluent_kafka.Producer`` used here (lets tests inject a fake)."""

    def produce(
        self, topic: str, value: bytes, key: str | None, on_delivery: DeliveryCallback
    ) -> None: ...

    def poll(self, timeout: float) -> int: ...

    def flush(self, timeout: float) -> int: ...


def default_key(payload: Mapping[str, Any]) -> str | None:
    """``user_id`` (keeps a user's events in order on one partition), else ``order_id``.

    None when neither is set, which lets the partitioner spread the messages.
    """
    for name in ("user_id", "order_id"):
        value = payload.get(name)
        if value is not None:
            return str(value)
    return None


def producer_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` on top of :data:`DEFAULT_CONFIG`; raises if it weakens :data:`REQUIRED_CONFIG`."""
    for name, allowed in REQUIRED_CONFIG.items():
        if name in config and config[name] not in allowed:
            raise ValueError(
                f"producer config {name}={config[name]!r} is not allowed: EventProducer needs "
                f"{name}={allowed[0]!r} so that delivered events are neither lost nor duplicated"
            )
    return {**DEFAULT_CONFIG, **config}


class EventProducer:
    """Encodes events with an :class:`EnvelopeEncoder` and produces them to ``topic``.

    ``producer`` is either a ``confluent_kafka.Producer`` config dict (the producer is then owned,
    and closed by :meth:`close`) or a ready producer object (injected; flushed but not closed).
    """

    def __init__(
        self,
        topic: str,
        producer: Mapping[str, Any] | ProducerLike,
        *,
        encoder: EnvelopeEncoder | None = None,
        key: KeyFunc = default_key,
        queue_full_timeout: float = 60.0,
        queue_full_poll: float = 0.1,
    ) -> None:
        self._topic = topic
        self._owned: confluent_kafka.Producer | None = None
        self._producer: ProducerLike
        if isinstance(producer, Mapping):
            self._owned = self._producer = confluent_kafka.Producer(producer_config(producer))
        else:
            self._producer = producer
        self._encoder = EnvelopeEncoder() if encoder is None else encoder
        self._key = key
        self._queue_full_timeout = queue_full_timeout
        self._queue_full_poll = queue_full_poll
        self._failures: list[DeliveryFailure] = []
        #: one delivery callback per event name, made once rather than per message
        self._callbacks: dict[str, DeliveryCallback] = {}
        self._closed = False
        self.sent = 0
        self.delivered = 0
        self.failed = 0

    @property
    def topic(self) -> str:
        return self._topic

    def send(self, record: EventBase | Mapping[str, Any], event: str | None = None) -> None:
        """Validate, encode and queue one event; raises ``EventValidationError`` before queueing.

        When the local queue is full (``BufferError``) it serves delivery reports and retries for
        up to ``queue_full_timeout`` seconds, then re-raises the ``BufferError``.
        """
        if self._closed:
            raise RuntimeError("EventProducer is closed")
        name, payload, value = self._encoder.encode_parts(record, event)
        key = self._key(payload)
        on_delivery = self._callbacks.get(name)
        if on_delivery is None:
            on_delivery = self._callbacks[name] = partial(self._on_delivery, name)
        deadline: float | None = None
        while True:
            try:
                self._producer.produce(self._topic, value=value, key=key, on_delivery=on_delivery)
                break
            except BufferError:
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self._queue_full_timeout
                elif now >= deadline:
                    raise
                self._producer.poll(self._queue_full_poll)
        self.sent += 1
        self._producer.poll(0)

    def flush(self, timeout: float = 30.0) -> None:
        """Wait for every queued message; raise :class:`DeliveryError` if any failed or remain.

        The failures raised are handed over with the exception (and not raised again).
        """
        remaining = self._producer.flush(timeout)
        if remaining or self._failures:
            failures, self._failures = tuple(self._failures), []
            raise DeliveryError(failures, undelivered=remaining)

    def close(self, timeout: float = 30.0) -> None:
        """Flush (raising on failures) and, if the producer is owned, close it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self.flush(timeout)
        finally:
            if self._owned is not None:
                self._owned.close()

    def __enter__(self) -> EventProducer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _on_delivery(self, event: str, err: Any, msg: Any) -> None:
        if err is None:
            self.delivered += 1
            return
        self.failed += 1
        key = msg.key()
        self._failures.append(
            DeliveryFailure(
                event=event,
                key=key.decode("utf-8", "replace") if isinstance(key, bytes) else key,
                error=str(err),
                value=msg.value(),
            )
        )
