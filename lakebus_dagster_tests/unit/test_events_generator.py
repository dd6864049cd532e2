"""Sample generator: determinism, consistency with the schema, aggregates, and the CLI."""

from __future__ import annotations

import io
import json
from collections import Counter
from datetime import datetime, timezone

import pytest

from lakebus_dagster.events import (
    Bet,
    EnvelopeEncoder,
    EventProducer,
    GeneratorConfig,
    Recharge,
    day_range,
    expected_aggregates,
    generate_events,
)
from lakebus_dagster.events import generate as cli
from lakebus_dagster.events.generate import send_events

from .event_fakes import FakeProducer

CONFIG = GeneratorConfig(
    count=3000,
    seed=7,
    days=day_range("2025-11-24", 3),
    hours=(0, 9, 18, 23),
    users=50,
    event_weights={"bet": 2.0, "recharge": 1.0},
)


def test_same_seed_same_events_different_seed_different_events() -> None:
    first = list(generate_events(CONFIG))
    assert first == list(generate_events(CONFIG))
    other = GeneratorConfig(**{**CONFIG.__dict__, "seed": 8})
    assert first != list(generate_events(other))


def test_events_respect_the_config_and_encode() -> None:
    encoder = EnvelopeEncoder()
    events = list(generate_events(CONFIG))
    assert len(events) == 3000
    assert len({e.order_id for e in events}) == 3000  # type: ignore[attr-defined]
    for event in events:
        encoder.encode(event)  # every generated event passes validation
        assert event.log_date in CONFIG.days and int(event.hour) in CONFIG.hours
        moment = datetime.fromtimestamp(event.ts / 1000, tz=timezone.utc)
        assert moment.strftime("%Y-%m-%d") == event.log_date
        assert moment.strftime("%H") == event.hour
        assert 2001 <= event.user_id < 2051  # type: ignore[attr-defined]
        if isinstance(event, Recharge):
            assert (event.reason is None) == (event.status == "success")
        else:
            assert isinstance(event, Bet) and event.game_id in CONFIG.game_ids
    counts = Counter(e.event for e in events)
    assert 0.6 < counts["bet"] / 3000 < 0.73  # weights 2:1
    assert {e.status for e in events if isinstance(e, Recharge)} == {"success", "failed"}


def test_expected_aggregates() -> None:
    events = list(generate_events(CONFIG))
    aggregates = expected_aggregates(events)
    assert aggregates.total == 3000
    assert aggregates.per_event == Counter(e.event for e in events)
    assert sum(aggregates.per_event_hour.values()) == 3000
    for (event, day, hour), count in aggregates.per_event_hour.items():
        assert count == sum(
            1 for e in events if (e.event, e.log_date, e.hour) == (event, day, hour)
        )
    # Deterministic: the same numbers every run, so a lake test can compare with them.
    assert aggregates == expected_aggregates(generate_events(CONFIG))


def test_day_range_and_duration() -> None:
    assert day_range("2025-12-30", 3) == ("2025-12-30", "2025-12-31", "2026-01-01")
    assert GeneratorConfig.for_duration(2.5, 400, seed=1).count == 1000


@pytest.mark.parametrize(
    "kwargs",
    [
        {"count": -1},
        {"users": 0},
        {"event_weights": {"withdraw": 1.0}},
        {"event_weights": {"bet": 0.0}},
        {"recharge_statuses": {}},
        {"currencies": ()},
        {"hours": (24,)},
        {"days": ("2025-13-01",)},
    ],
)
def test_invalid_config(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        GeneratorConfig(**kwargs)  # type: ignore[arg-type]


def test_send_events_reports_progress_and_summary() -> None:
    fake = FakeProducer()
    out = io.StringIO()
    config = GeneratorConfig(count=200, seed=3)
    summary = send_events(
        generate_events(config), EventProducer("events", fake), total=200, out=out,
        progress_seconds=3600, progress_percent=25,
    )
    assert (summary.sent, summary.delivered, summary.failed) == (200, 200, 0)
    # the summary's counts against what the producer was handed (the envelopes' payloads), not the product's own count
    sent = Counter((p["event"], p["log_date"], p["hour"]) for p in (json.loads(m.value())["payload"] for m in fake.produced))
    assert summary.aggregates.total == 200 and dict(summary.aggregates.per_event_hour) == dict(sent)
    lines = out.getvalue().splitlines()
    assert [line.split(",")[0] for line in lines] == [
        "sent 50/200 (25%)", "sent 100/200 (50%)", "sent 150/200 (75%)", "sent 200/200 (100%)"
    ]
    assert len(fake.produced) == 200


def test_cli_main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    created: list[tuple[str, dict[str, str]]] = []

    def fake_event_producer(topic: str, settings: dict[str, str]) -> EventProducer:
        created.append((topic, settings))
        return EventProducer(topic, FakeProducer())

    monkeypatch.setattr(cli, "EventProducer", fake_event_producer)
    monkeypatch.setattr(cli, "check_topic", lambda bootstrap, topic, settings: None)  # no broker in unit tests
    argv = ["--bootstrap", "127.0.0.1:19092", "--topic", "events", "--count", "500", "--seed", "7",
            "-X", "linger.ms=5"]
    assert cli.main(argv) == 0
    assert [(topic, {k: v for k, v in settings.items() if k != "logger"}) for topic, settings in created] == [
        ("events", {"bootstrap.servers": "127.0.0.1:19092", "security.protocol": "PLAINTEXT", "linger.ms": "5"})]
    assert created[0][1]["logger"] is cli.quiet_kafka_logger()  # librdkafka's retries print nothing
    output = capsys.readouterr().out
    # what was handed to the producer, counted from the envelopes themselves
    per_event = Counter(e.event for e in generate_events(GeneratorConfig(count=500, seed=7)))
    assert "done: sent 500, delivered 500, failed 0" in output
    assert sum(per_event.values()) == 500 and set(per_event) == {"bet", "recharge"}
    for event, count in per_event.items():
        assert f"  {event}: {count}" in output


def test_cli_exits_1_on_delivery_failure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        cli, "EventProducer",
        lambda topic, settings: EventProducer(topic, FakeProducer(fail=lambda key: True)),
    )
    monkeypatch.setattr(cli, "check_topic", lambda bootstrap, topic, settings: None)
    assert cli.main(["--bootstrap", "x:1", "--topic", "t", "--count", "3"]) == 1
    assert "FAILED: 3 delivery failure(s)" in capsys.readouterr().err


def test_cli_duration_needs_rate(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--bootstrap", "x:1", "--topic", "t", "--duration", "5"]) == 2
    assert "--duration needs --rate" in capsys.readouterr().err
