"""``generate_sample_events``: deterministic sample events to the bus, from the Dagster UI.

The job is the event SDK's CLI (``python -m lakebus_dagster.events.generate``) as a Dagster op:
the same generator, the same ``send_events`` loop (pacing, progress lines, the final delivery
check) - only the configuration comes from run config, the producer from the ``kafka`` resource
and the progress goes to the run log. A seed reproduces the same events, so a run's metadata
(per-event and per-day counts) is also what the lake tables should gain from it.
"""

# No ``from __future__ import annotations`` here: Dagster reads the op's parameter annotations
# at decoration time to find the config class and the resource, and cannot resolve strings.
import io
import json
import logging
from itertools import chain, islice
from typing import Any

import dagster as dg
from confluent_kafka import KafkaException
from pydantic import Field

from lakebus_dagster.defs.kafka_roles import OPERATIONS_TAGS
from lakebus_dagster.defs.resources import BusLayoutResource, KafkaResource
from lakebus_dagster.events import (
    DeliveryError,
    EnvelopeEncoder,
    EventProducer,
    GeneratorConfig,
    day_range,
    generate_events,
)
from lakebus_dagster.events.generate import send_events
from lakebus_dagster.events.producer import producer_config

from .report import run_metadata

_DEFAULTS = GeneratorConfig()
#: How many of the first envelopes' payloads the run metadata shows.
PREVIEW_SIZE = 5
#: Progress goes to the run log every 10 % or every 10 s, whichever comes first.
PROGRESS_PERCENT = 10.0
PROGRESS_SECONDS = 10.0
#: How long to wait for the topic's metadata before giving up on the cluster.
METADATA_TIMEOUT_S = 15.0


class SampleEventsConfig(dg.Config):
    """What to generate and where to send it; defaults follow the SDK's ``GeneratorConfig``."""

    count: int = Field(default=10_000, ge=0, description="number of events to send")
    rate: float = Field(default=0.0, ge=0, description="events per second; 0 = as fast as possible")
    seed: int = Field(default=_DEFAULTS.seed, description="same seed, same events")
    start_date: str = Field(default=_DEFAULTS.days[0], description="first log_date, YYYY-MM-DD")
    days: int = Field(default=1, ge=1, description="number of consecutive log_dates")
    hours: list[int] = Field(default=list(_DEFAULTS.hours), description="hours of day (0-23) to spread events over")
    users: int = Field(default=_DEFAULTS.users, ge=1, description="distinct user_ids")
    event_weights: dict[str, float] = Field(
        default=dict(_DEFAULTS.event_weights), description="relative weight of each event name"
    )
    topic: str = Field(
        default="", description="Kafka topic (must exist); empty = the bus layout's bus topic"
    )

    def generator_config(self) -> GeneratorConfig:
        """The SDK's generator config; raises ``ValueError`` naming the offending field."""
        try:
            days = day_range(self.start_date, self.days)
        except ValueError:
            raise ValueError(f"start_date={self.start_date!r} is not a YYYY-MM-DD date") from None
        return GeneratorConfig(
            count=self.count,
            seed=self.seed,
            event_weights=dict(self.event_weights),
            days=days,
            hours=tuple(self.hours),
            users=self.users,
        )


class _LogLines(io.TextIOBase):
    """A text stream that hands each complete line to a logger: ``send_events`` *prints* progress."""

    def __init__(self, log: logging.Logger | dg.DagsterLogManager) -> None:
        super().__init__()
        self._log = log
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *lines, self._pending = (self._pending + text).split("\n")
        for line in filter(None, lines):
            self._log.info(line)
        return len(text)


def _require_topic(producer: Any, topic: str, bootstrap_servers: str) -> None:
    """Fail before sending when ``topic`` does not exist.

    The broker does not auto-create topics, and librdkafka would otherwise keep every message
    queued until ``message.timeout.ms`` (5 minutes) and only then report them all as failed.
    """
    try:
        info = producer.list_topics(topic, timeout=METADATA_TIMEOUT_S).topics.get(topic)
    except KafkaException as exc:
        raise dg.Failure(f"cannot read metadata of topic {topic!r} from {bootstrap_servers}: {exc}") from exc
    if info is None or info.error is not None:
        reason = "not in the cluster metadata" if info is None else str(info.error)
        raise dg.Failure(
            f"topic {topic!r} is not available on {bootstrap_servers} ({reason}); "
            "create it first (provisioning, or the `topic` config of this op)"
        )


@dg.op(
    description="Generate deterministic sample events and send them to the bus topic with the event SDK.",
    out=dg.Out(dict, description="events sent, per event name"),
)
def send_sample_events(
    context: dg.OpExecutionContext, config: SampleEventsConfig, operations: KafkaResource, layout: BusLayoutResource
) -> dg.Output[dict]:
    kafka = operations  # a bus-changing job: the operations principal (kafka/acls.py)
    try:
        generator_config = config.generator_config()
    except ValueError as exc:
        raise dg.Failure(f"invalid op config: {exc}") from exc
    topic = config.topic or layout.layout().bus_topic.name
    # The SDK's safe defaults (acks=all, idempotence, zstd) under the resource's own settings; a
    # resource that tried to weaken acks/idempotence is refused by producer_config.
    raw = kafka.producer(**producer_config(kafka.client_config()))
    _require_topic(raw, topic, kafka.bootstrap_servers)
    encoder = EnvelopeEncoder()
    producer = EventProducer(topic, raw, encoder=encoder)

    events = generate_events(generator_config)
    head = list(islice(events, PREVIEW_SIZE))
    pace = f"{config.rate:g} events/s" if config.rate > 0 else "as fast as possible"
    context.log.info(
        f"sending {config.count} events (seed {config.seed}, {config.days} day(s) from "
        f"{config.start_date}) to {topic!r} at {kafka.bootstrap_servers}, {pace}"
    )
    try:
        summary = send_events(
            chain(head, events),
            producer,
            total=config.count,
            rate=config.rate,
            out=_LogLines(context.log),
            progress_seconds=PROGRESS_SECONDS,
            progress_percent=PROGRESS_PERCENT,
        )
    except DeliveryError as exc:
        raise dg.Failure(
            f"sending to topic {topic!r}: {exc}",
            metadata={"sent": producer.sent, "delivered": producer.delivered, "failed": producer.failed},
        ) from exc
    context.log.info(
        f"done: {summary.delivered} delivered, {summary.failed} failed in {summary.elapsed_s:.2f}s "
        f"({summary.rate:,.0f} events/s)"
    )
    # what the bus carries (decimals and timestamps as their JSON numbers)
    preview = [json.loads(encoder.encode(event))["payload"] for event in head]
    return dg.Output(
        dict(sorted(summary.aggregates.per_event.items())),
        metadata=run_metadata(summary, topic=topic, preview=preview),
    )


@dg.job(
    description="Send deterministic sample events (bet, recharge, ...) to the bus topic; the same seed sends the same events.",
    tags={"domain": "events", **OPERATIONS_TAGS},
)
def generate_sample_events() -> None:
    send_sample_events()
