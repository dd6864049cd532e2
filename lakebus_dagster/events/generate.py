"""CLI: send deterministic sample events (:mod:`.samples`) to a Kafka topic.

    lakebus generate --topic events --count 10000 --seed 7
    python -m lakebus_dagster.events.generate --bootstrap 127.0.0.1:19092 --topic events --count 10000

``--topic`` has no default: the bus topic is production data, so writing to it is always named.
Without ``--rate`` events go as fast as the producer accepts; ``--duration S --rate R`` sends
``S×R`` events paced at ``R``/s. Before sending, the topic's metadata is read with a 5 s timeout,
so an unreachable broker or a missing topic fails at once with one line (instead of librdkafka
retrying for minutes). Prints a progress line every ``--progress-percent`` % or
``--progress-seconds`` s (whichever comes first) and a summary with the expected per-event counts;
exits 1 if any event was not delivered.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from lakebus_dagster.errors import CliError
from lakebus_dagster.kafka.clients import KafkaClients, quiet_kafka_logger
from lakebus_dagster.settings import load_settings

from .errors import DeliveryError
from .samples import ExpectedAggregates, GeneratorConfig, day_range, generate_events
from .models import EventBase
from .producer import EventProducer, producer_config


@dataclass(frozen=True)
class RunSummary:
    sent: int
    delivered: int
    failed: int
    elapsed_s: float
    aggregates: ExpectedAggregates

    @property
    def rate(self) -> float:
        return self.sent / self.elapsed_s if self.elapsed_s > 0 else 0.0


class _Progress:
    def __init__(self, total: int, out: TextIO, every_s: float, every_percent: float) -> None:
        self._total = total
        self._out = out
        self._every_s = every_s
        self._step = max(1, round(total * every_percent / 100))
        self._start = self._last = time.monotonic()
        self._next_count = self._step

    def update(self, sent: int) -> None:
        now = time.monotonic()
        if sent >= self._next_count or now - self._last >= self._every_s:
            self._last = now
            self._next_count = (sent // self._step + 1) * self._step
            elapsed = now - self._start
            percent = 100 * sent / self._total if self._total else 100.0
            rate = sent / elapsed if elapsed > 0 else 0.0
            print(
                f"sent {sent}/{self._total} ({percent:.0f}%), {rate:,.0f} events/s", file=self._out
            )


def send_events(
    events: Iterable[EventBase],
    producer: EventProducer,
    *,
    total: int,
    rate: float = 0.0,
    out: TextIO = sys.stdout,
    progress_seconds: float = 1.0,
    progress_percent: float = 10.0,
) -> RunSummary:
    """Send ``events`` (paced at ``rate``/s when > 0) and close the producer.

    Raises :class:`DeliveryError` from the final close if any event was not delivered.
    """
    progress = _Progress(total, out, progress_seconds, progress_percent)
    aggregates = ExpectedAggregates()
    start = time.monotonic()
    with producer:
        for i, event in enumerate(events):
            if rate > 0:
                delay = start + i / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            producer.send(event)
            aggregates.add(event)
            progress.update(i + 1)
    return RunSummary(
        producer.sent, producer.delivered, producer.failed, time.monotonic() - start, aggregates
    )


#: how long the pre-flight metadata request may take before the broker counts as unreachable
METADATA_TIMEOUT_S = 5.0

EXAMPLES = """\
  lakebus generate --topic events-test --count 1000              # a test topic (it must exist)
  lakebus generate --topic events --count 20000 --start-date 2025-11-25 --days 2
  lakebus generate --topic events --duration 60 --rate 500       # 30,000 events paced at 500/s
"""


def check_topic(bootstrap: str, topic: str, settings: dict[str, Any], timeout: float = METADATA_TIMEOUT_S) -> None:
    """Raise :class:`CliError` unless ``bootstrap`` answers within ``timeout`` and has ``topic``."""
    from confluent_kafka import KafkaException

    try:  # the settings the EventProducer will use, so a setting librdkafka refuses fails here, in one line
        probe = KafkaClients(settings).producer(**producer_config(settings), logger=quiet_kafka_logger())
    except KafkaException as exc:  # an unknown or invalid -X setting
        raise CliError(f"producer settings (-X) refused by librdkafka: {exc.args[0].str() if exc.args else exc}") from None
    try:
        metadata = probe.list_topics(topic, timeout=timeout)
    except KafkaException as exc:
        if str(settings.get("security.protocol", "PLAINTEXT")) != "PLAINTEXT":
            from lakebus_dagster.kafka import login_failure_message, refused_login

            if (reason := refused_login(settings, timeout_s=3.0)) is not None:
                raise CliError(login_failure_message(settings, reason)) from None
        raise CliError(f"Kafka at {bootstrap} (--bootstrap) is unreachable: no metadata within {timeout:g}s "
                       f"({exc.args[0].str() if exc.args else exc}); is the stack up? `lakebus stack status`") from None
    finally:
        probe.flush(0)
    info = metadata.topics.get(topic)
    if info is None or info.error is not None:
        raise CliError(f"topic {topic!r} (--topic) does not exist on {bootstrap}; create it first "
                       "(`lakebus launch provision_lakebus` creates the bus topics) or name an existing topic")


def configure(p: argparse.ArgumentParser) -> None:
    """The generator's options (shared by ``lakebus generate`` and ``python -m``)."""
    from lakebus_dagster.argtypes import iso_date, key_value, percent, positive_float, positive_int

    p.add_argument("--topic", default=None, help="the Kafka topic to write to (required; it must exist)")
    p.add_argument("--bootstrap", default=None, help="Kafka bootstrap servers (default: the settings, LAKEBUS_KAFKA_*)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--count", type=positive_int, default=None, help="number of events, >= 1 (default 10000)")
    size.add_argument("--duration", type=positive_float, default=None, help="seconds, > 0; needs --rate")
    p.add_argument("--rate", type=positive_float, default=None, help="events/s, > 0 (default: as fast as possible)")
    p.add_argument("--seed", type=int, default=7, help="same seed, same events (default 7)")
    p.add_argument("--start-date", type=iso_date, default=GeneratorConfig.days[0], help="first log_date, YYYY-MM-DD")
    p.add_argument("--days", type=positive_int, default=1, help="number of consecutive log_dates, >= 1")
    p.add_argument("--users", type=positive_int, default=GeneratorConfig.users, help="distinct user_ids, >= 1")
    p.add_argument("--progress-seconds", type=positive_float, default=1.0, help="a progress line at least every S seconds (default 1)")
    p.add_argument("--progress-percent", type=percent, default=10.0, help="a progress line every P %% of the events (default 10)")
    p.add_argument("-X", dest="overrides", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                   help="extra confluent_kafka producer setting (repeatable)")
    p.set_defaults(func=run)


def _parser() -> argparse.ArgumentParser:
    from lakebus_dagster.commandline import parser

    p = parser("python -m lakebus_dagster.events.generate", __doc__, EXAMPLES)
    configure(p)
    return p


def check_date_range(start_date: str, days: int) -> None:
    """The log_dates ``start_date`` + ``days`` - 1 must exist (Python's calendar ends at 9999-12-31)."""
    from datetime import date, timedelta

    try:
        date.fromisoformat(start_date) + timedelta(days=days - 1)
    except OverflowError:
        raise CliError(f"--start-date {start_date} with --days {days} runs past 9999-12-31, the last date there is; "
                       "choose an earlier --start-date or fewer --days") from None


def run(args: argparse.Namespace) -> int:
    check_date_range(args.start_date, args.days)
    if not args.topic:
        raise CliError("--topic is required: name the topic to write to (the production bus topic is `events`; "
                       "a bare generate never writes to it)")
    if args.duration is not None and args.rate is None:
        raise CliError("--duration needs --rate (events/s > 0)")
    rate = args.rate or 0.0
    options = dict(seed=args.seed, days=day_range(args.start_date, args.days), users=args.users)
    if args.duration is not None:
        config = GeneratorConfig.for_duration(args.duration, rate, **options)
    else:
        config = GeneratorConfig(count=10000 if args.count is None else args.count, **options)
    client_config = load_settings().kafka.client_config()  # lakebus's principal, when the cluster is secured
    bootstrap = args.bootstrap or client_config["bootstrap.servers"]
    settings = {**client_config, "bootstrap.servers": bootstrap, **dict(args.overrides)}
    check_topic(bootstrap, args.topic, settings)
    producer = EventProducer(args.topic, {**settings, "logger": quiet_kafka_logger()})
    print(f"sending {config.count} events (seed {config.seed}) to {args.topic!r} at {bootstrap}")
    try:
        summary = send_events(
            generate_events(config), producer, total=config.count, rate=rate,
            progress_seconds=args.progress_seconds, progress_percent=args.progress_percent,
        )
    except DeliveryError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    print(
        f"done: sent {summary.sent}, delivered {summary.delivered}, failed {summary.failed} "
        f"in {summary.elapsed_s:.2f}s ({summary.rate:,.0f} events/s)"
    )
    for event, count in sorted(summary.aggregates.per_event.items()):
        print(f"  {event}: {count}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from lakebus_dagster.commandline import run_command

    return run_command(_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
