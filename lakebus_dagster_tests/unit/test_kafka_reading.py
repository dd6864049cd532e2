"""Offsets reads ride out what a broker answers right after a leader moved (a fake consumer)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from lakebus_dagster.kafka import reading
from lakebus_dagster.kafka.reading import end_offsets, is_transient, offsets_for_times


class _Consumer:
    """Fails its offsets requests with ``errors`` (in order), then answers."""

    def __init__(self, *errors: KafkaError) -> None:
        self.errors = list(errors)
        self.calls = 0

    def _maybe_fail(self) -> None:
        self.calls += 1
        if self.errors:
            raise KafkaException(self.errors.pop(0))

    def offsets_for_times(self, partitions, timeout):
        self._maybe_fail()
        return [TopicPartition(tp.topic, tp.partition, 7) for tp in partitions]

    def list_topics(self, topic, timeout):
        class _Md:
            error = None
            partitions = {0: None, 1: None}
        return type("Meta", (), {"topics": {topic: _Md()}})()

    def get_watermark_offsets(self, tp, timeout):
        self._maybe_fail()
        return 0, 100 + tp.partition


@pytest.fixture(autouse=True)
def _no_waiting(monkeypatch):
    # tenacity sleeps through its own `sleep` attribute: make the backoff instant
    monkeypatch.setattr(offsets_for_times.retry, "sleep", lambda _s: None)
    monkeypatch.setattr(end_offsets.retry, "sleep", lambda _s: None)


def test_a_just_restarted_brokers_answer_is_retried():
    """The error the failover benchmark met after a broker rejoined: "Leader epoch is newer than
    broker epoch" (not marked retriable by librdkafka)."""
    consumer = _Consumer(KafkaError(KafkaError.UNKNOWN_LEADER_EPOCH, "Failed to get offsets"),
                         KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))
    found = offsets_for_times(consumer, [TopicPartition("events", 0, 1_000)])
    assert [(tp.partition, tp.offset) for tp in found] == [(0, 7)] and consumer.calls == 3
    consumer = _Consumer(KafkaError(KafkaError.LEADER_NOT_AVAILABLE))
    assert end_offsets(consumer, "events") == {0: 100, 1: 101}


@pytest.mark.parametrize("error", [KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "denied"),
                                   # a timeout already waited its whole timeout: not waited again
                                   KafkaError(KafkaError._TIMED_OUT, "denied", retriable=True)])
def test_other_errors_are_raised_at_once(error):
    consumer = _Consumer(error)
    with pytest.raises(KafkaException, match="denied"):
        offsets_for_times(consumer, [TopicPartition("events", 0, 1_000)])
    assert consumer.calls == 1
    assert not is_transient(ValueError("x")) and not is_transient(KafkaException("no KafkaError inside"))


def test_a_transient_error_that_lasts_is_raised_after_the_retry_window(monkeypatch):
    clock = iter(range(0, 1000, 5))  # tenacity reads the time through time.monotonic
    monkeypatch.setattr("time.monotonic", lambda: float(next(clock)))
    consumer = _Consumer(*[KafkaError(KafkaError.UNKNOWN_LEADER_EPOCH, "still moving")] * 50)
    with pytest.raises(KafkaException, match="still moving"):
        offsets_for_times(consumer, [TopicPartition("events", 0, 1_000)])
    assert 2 <= consumer.calls <= int(reading.TRANSIENT_RETRY_S / 5) + 2
