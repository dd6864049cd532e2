"""Producing events to the broker: what the SDK costs over raw librdkafka, and what zstd saves.

(a) **Throughput.** ``EventProducer.send`` of model instances (validate + encode + key + produce +
delivery report) against a bare ``confluent_kafka.Producer`` producing the *same* pre-encoded
bytes and keys, with the *same* producer config (the SDK's: acks=all, idempotence, zstd,
linger.ms=20). Both include the final flush, i.e. "every message acknowledged by the broker".
Raw and SDK runs alternate (and swap which goes first), each into a fresh one-partition topic,
and medians are reported, so a burst of load from something else on the machine hits both sides
alike. Target: SDK >= 0.8x raw.

(b) **Size on disk.** After an SDK run of ``n`` events, the topic's partition log on the broker
(``<state>/data/kafka/<topic>-0/*.log``; confluent-kafka has no ``describe_log_dirs``) divided by
``n``, against the mean raw envelope size. The topic has ``compression.type=producer``, so the
broker stores the producer's zstd batches as they are. Target: <= 15 % of the raw envelope.

The event lists are built before timing and moved out of the garbage collector's sight
(``gc.freeze``): otherwise every full collection would rescan ~200k benchmark fixtures that a
real service, whose events are short-lived, never holds.

    python benchmarks/bench_events_produce.py [N]     (needs the local stack: make stack-up)
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from lakebus_dagster.events import EnvelopeEncoder, EventBase, EventProducer, GeneratorConfig, default_key, generate_events
from lakebus_dagster.events.producer import producer_config
from lakebus_dagster.settings import Settings
from lakebus_dagster.stack.local_settings import load_stack_settings

Message = tuple[bytes, str | None]


class _Topics:
    """One-partition benchmark topics with unique names, all deleted when the benchmark ends."""

    def __init__(self, admin: AdminClient, prefix: str) -> None:
        self._admin = admin
        self._prefix = prefix
        self.created: list[str] = []

    def new(self, label: str) -> str:
        name = f"{self._prefix}-{label}-{len(self.created)}"
        spec = NewTopic(name, 1, 1, config={"compression.type": "producer"})
        for topic, future in self._admin.create_topics([spec]).items():
            try:
                future.result(timeout=30)
            except Exception as exc:
                raise RuntimeError(f"creating benchmark topic {topic!r} failed: {exc}") from exc
        self.created.append(name)
        return name

    def delete_all(self) -> None:
        if self.created:
            for future in self._admin.delete_topics(self.created).values():
                future.result(timeout=30)


@contextmanager
def _benchmark_topics(bootstrap: str) -> Iterator[_Topics]:
    topics = _Topics(AdminClient({"bootstrap.servers": bootstrap}), f"bench-produce-{uuid.uuid4().hex[:8]}")
    try:
        yield topics
    finally:
        topics.delete_all()


@contextmanager
def _frozen_gc() -> Iterator[None]:
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@dataclass(frozen=True)
class Timing:
    """Wall-clock rate, and the calling thread's CPU time per event (librdkafka's threads excluded).

    The CPU figure is what the SDK adds in Python; unlike the rate it barely moves when other
    processes compete for the cores, so it tells "the SDK got slower" from "the machine was busy".
    """

    events_per_s: float
    cpu_us_per_event: float


@contextmanager
def _timed(n: int, out: list[Timing]) -> Iterator[None]:
    wall, cpu = time.perf_counter(), time.thread_time()
    yield
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    out.append(Timing(n / wall, 1e6 * cpu / n))


def _produce_raw(topic: str, messages: Sequence[Message], config: dict[str, Any], out: list[Timing]) -> None:
    """The canonical confluent-kafka loop: produce, serve callbacks with poll(0), wait when full."""
    producer = Producer(config)
    with _timed(len(messages), out):
        for value, key in messages:
            while True:
                try:
                    producer.produce(topic, value, key)
                    break
                except BufferError:
                    producer.poll(0.01)
            producer.poll(0)
        remaining = producer.flush(60)
    if remaining:
        raise RuntimeError(f"raw producer: {remaining} message(s) to {topic!r} still queued after flush")


def _produce_sdk(topic: str, events: Sequence[EventBase], config: dict[str, Any], out: list[Timing]) -> None:
    producer = EventProducer(topic, config)
    with _timed(len(events), out), producer:  # close() flushes and raises on any failure
        for event in events:
            producer.send(event)


def _message_count(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-check"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return high - low
    finally:
        consumer.close()


def partition_log_bytes(settings: Settings, topic: str, partition: int = 0) -> int:
    """Bytes of the partition's log segments in the local broker's log dir."""
    directory = settings.data_dir / "kafka" / f"{topic}-{partition}"
    segments = list(directory.glob("*.log"))
    if not segments:
        raise RuntimeError(
            f"no log segments for {topic!r} in {directory}: the size benchmark needs the local "
            "stack's broker (LAKEBUS_STATE_DIR must point at its state)"
        )
    return sum(Path(s).stat().st_size for s in segments)


def run(n: int = 100_000, repeats: int = 5) -> dict[str, float]:
    """Measure (a) and (b) with ``n`` generated events, ``repeats`` raw/SDK pairs."""
    settings = load_stack_settings()
    config = producer_config({"bootstrap.servers": settings.kafka.bootstrap_servers})
    events = list(generate_events(GeneratorConfig(count=n, seed=7)))
    encoder = EnvelopeEncoder()
    encoded = [encoder.encode_event(event) for event in events]
    messages: list[Message] = [(e.value, default_key(e.payload)) for e in encoded]
    envelope_mean = statistics.fmean(len(value) for value, _ in messages)
    del encoded

    raw: list[Timing] = []
    sdk: list[Timing] = []
    with _benchmark_topics(settings.kafka.bootstrap_servers) as topics, _frozen_gc():
        for i in range(repeats):
            raw_topic, sdk_topic = topics.new("raw"), topics.new("sdk")
            if i % 2:
                _produce_sdk(sdk_topic, events, config, sdk)
            _produce_raw(raw_topic, messages, config, raw)
            if not i % 2:
                _produce_sdk(sdk_topic, events, config, sdk)
            for topic in (raw_topic, sdk_topic):
                count = _message_count(settings.kafka.bootstrap_servers, topic)
                if count != n:
                    raise RuntimeError(f"topic {topic!r} holds {count} messages, expected {n}")
        log_bytes = partition_log_bytes(settings, sdk_topic)

    raw_rate = statistics.median(t.events_per_s for t in raw)
    sdk_rate = statistics.median(t.events_per_s for t in sdk)
    per_event = log_bytes / n
    return {
        "n": n,
        "repeats": repeats,
        "raw_events_per_s": raw_rate,
        "sdk_events_per_s": sdk_rate,
        "sdk_vs_raw_ratio": sdk_rate / raw_rate,
        "raw_cpu_us_per_event": statistics.median(t.cpu_us_per_event for t in raw),
        "sdk_cpu_us_per_event": statistics.median(t.cpu_us_per_event for t in sdk),
        "envelope_bytes_mean": envelope_mean,
        "log_bytes_per_event": per_event,
        "log_vs_envelope_ratio": per_event / envelope_mean,
    }


def main(argv: Sequence[str]) -> None:
    r = run(int(argv[0]) if argv else 100_000)
    print(
        f"n={r['n']:,} x{r['repeats']}: raw {r['raw_events_per_s']:,.0f}/s, SDK {r['sdk_events_per_s']:,.0f}/s, "
        f"ratio {r['sdk_vs_raw_ratio']:.2f} (target >= 0.8); on disk {r['log_bytes_per_event']:.1f} B/event vs "
        f"{r['envelope_bytes_mean']:.0f} B envelope = {100 * r['log_vs_envelope_ratio']:.1f} % (target <= 15 %)"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
