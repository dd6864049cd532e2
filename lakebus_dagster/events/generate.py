"""CLI: send deterministic sample events to Kafka.

    python -m lakebus_dagster.events.generate --bootstrap 127.0.0.1:19092 --topic events \\
        --count 10000 --rate 0 --seed 7

``--rate 0`` sends as fast as the producer accepts; ``--duration S --rate R`` sends ``S×R``
events paced at ``R``/s. Prints a progress line every ``--progress-percent`` % or
``--progress-seconds`` s (whichever comes first) and a summary with the expected per-event counts;
exits 1 if any event was not delivered.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TextIO

from lakebus_dagster.settings import load_settings

from .errors import DeliveryError
from .samples import ExpectedAggregates, GeneratorConfig, day_range, generate_events
from .models import EventBase
from .producer import EventProducer


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


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m lakebus_dagster.events.generate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--bootstrap", default=None, help="Kafka bootstrap servers (default: settings)")
    p.add_argument("--topic", default="events")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--count", type=int, default=None, help="number of events (default 10000)")
    size.add_argument("--duration", type=float, default=None, help="seconds; needs --rate > 0")
    p.add_argument("--rate", type=float, default=0.0, help="events/s, 0 = unthrottled")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--start-date", default=GeneratorConfig.days[0])
    p.add_argument("--days", type=int, default=1, help="number of consecutive log_dates")
    p.add_argument("--users", type=int, default=GeneratorConfig.users)
    p.add_argument("--progress-seconds", type=float, default=1.0)
    p.add_argument("--progress-percent", type=float, default=10.0)
    p.add_argument("-X", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="extra confluent_kafka producer setting (repeatable)")
    return p


def _producer_settings(bootstrap: str, overrides: Sequence[str]) -> dict[str, str]:
    settings = {"bootstrap.servers": bootstrap}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"-X expects KEY=VALUE, got {item!r}")
        settings[key] = value
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    options = dict(seed=args.seed, days=day_range(args.start_date, args.days), users=args.users)
    if args.duration is not None:
        if args.rate <= 0:
            raise SystemExit("--duration needs --rate > 0")
        config = GeneratorConfig.for_duration(args.duration, args.rate, **options)
    else:
        config = GeneratorConfig(count=10000 if args.count is None else args.count, **options)
    bootstrap = args.bootstrap or load_settings().bootstrap_servers
    producer = EventProducer(args.topic, _producer_settings(bootstrap, args.overrides))
    print(f"sending {config.count} events (seed {config.seed}) to {args.topic!r} at {bootstrap}")
    try:
        summary = send_events(
            generate_events(config), producer, total=config.count, rate=args.rate,
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


if __name__ == "__main__":
    sys.exit(main())
