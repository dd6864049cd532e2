"""Deterministic sample events, and the aggregates they should produce in Iceberg.

Everything is drawn from one ``random.Random(seed)`` in a fixed order, so a seed reproduces the
exact same events on any machine; an end-to-end test generates, sends, and compares the tables'
counts with :func:`expected_aggregates` of the same generation (no need to keep the events).
``ts`` always falls inside the event's ``log_date``/``hour`` (UTC), as the partitioning assumes.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from .models import SUCCESS_STATUS, BetV2, EventBase, RechargeV2
from .registry import default_registry

_HOUR_MS = 3_600_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def day_range(start: str, days: int) -> tuple[str, ...]:
    """``days`` consecutive ``YYYY-MM-DD`` strings from ``start``."""
    first = date.fromisoformat(start)
    return tuple((first + timedelta(days=i)).isoformat() for i in range(days))


@dataclass(frozen=True)
class GeneratorConfig:
    count: int = 1000
    seed: int = 7
    #: Relative weights of the events to generate (each must have a builder below).
    event_weights: Mapping[str, float] = field(
        default_factory=lambda: {"bet": 3.0, "recharge": 1.0}
    )
    days: tuple[str, ...] = ("2025-11-25",)
    hours: tuple[int, ...] = tuple(range(24))
    users: int = 1000
    first_user_id: int = 2001
    first_order_id: int = 10001
    currencies: tuple[str, ...] = ("BRL", "USD")
    game_ids: tuple[int, ...] = (777, 778, 779)
    plat_ids: tuple[int, ...] = (1,)
    app_ids: tuple[int, ...] = (10406,)
    #: Relative weights of recharge statuses; any status but ``success`` gets a ``reason``.
    recharge_statuses: Mapping[str, float] = field(
        default_factory=lambda: {SUCCESS_STATUS: 9.0, "failed": 1.0}
    )
    failure_reasons: tuple[str, ...] = ("insufficient_funds", "card_declined", "timeout")
    category: str = "biz"

    def __post_init__(self) -> None:
        if self.count < 0 or self.users < 1:
            raise ValueError("count must be >= 0 and users >= 1")
        unknown = set(self.event_weights) - set(_BUILDERS)
        if unknown:
            raise ValueError(
                f"no generator for event(s) {sorted(unknown)}; known: {sorted(_BUILDERS)}"
            )
        for name, weights in (("event_weights", self.event_weights),
                              ("recharge_statuses", self.recharge_statuses)):
            if not weights or any(w < 0 for w in weights.values()) or not sum(weights.values()):
                raise ValueError(f"{name} needs non-negative weights with a positive sum")
        for name in ("days", "hours", "currencies", "game_ids", "plat_ids", "app_ids",
                     "failure_reasons"):
            if not getattr(self, name):
                raise ValueError(f"{name} must not be empty")
        if any(not 0 <= h <= 23 for h in self.hours):
            raise ValueError(f"hours must be within 0..23, got {self.hours}")
        for day in self.days:
            date.fromisoformat(day)  # raises ValueError on a malformed date

    @classmethod
    def for_duration(cls, duration_s: float, rate: float, **kwargs: Any) -> GeneratorConfig:
        """A config whose ``count`` is ``duration_s × rate`` events."""
        return cls(count=round(duration_s * rate), **kwargs)


_Builder = Callable[[random.Random, GeneratorConfig, int], dict[str, Any]]


def _user_id(rng: random.Random, config: GeneratorConfig) -> int:
    return config.first_user_id + rng.randrange(config.users)


def _money(amount: float) -> dict[str, Any]:
    """An amount as version 2 carries it: exact in ``amount_decimal``, and in the version-1 double
    ``amount`` for readers of that column (both the same two-decimal number)."""
    return {"amount": amount, "amount_decimal": Decimal(f"{amount:.2f}")}


def _bet_fields(rng: random.Random, config: GeneratorConfig, seq: int) -> dict[str, Any]:
    return {
        "user_id": _user_id(rng, config),
        "order_id": str(config.first_order_id + seq),
        **_money(round(rng.uniform(1, 500), 2)),
        "currency": rng.choice(config.currencies),
        "game_id": rng.choice(config.game_ids),
    }


def _recharge_fields(rng: random.Random, config: GeneratorConfig, seq: int) -> dict[str, Any]:
    status = rng.choices(list(config.recharge_statuses), list(config.recharge_statuses.values()))[0]
    return {
        "status": status,
        "user_id": _user_id(rng, config),
        "order_id": str(config.first_order_id + seq),
        **_money(round(rng.uniform(10, 2000), 2)),
        "currency": rng.choice(config.currencies),
        "reason": None if status == SUCCESS_STATUS else rng.choice(config.failure_reasons),
    }


_BUILDERS: dict[str, tuple[type[EventBase], _Builder]] = {
    "bet": (BetV2, _bet_fields),
    "recharge": (RechargeV2, _recharge_fields),
}


def _hour_start_ms(day: str, hour: int) -> int:
    start = datetime.fromisoformat(day).replace(hour=hour, tzinfo=timezone.utc)
    return int(start.timestamp()) * 1000


def generate_events(config: GeneratorConfig) -> Iterator[EventBase]:
    """Yield ``config.count`` model instances, identical for identical configs."""
    rng = random.Random(config.seed)
    names = list(config.event_weights)
    weights = list(config.event_weights.values())
    hour_starts = {(d, h): _hour_start_ms(d, h) for d in config.days for h in config.hours}
    for seq in range(config.count):
        name = rng.choices(names, weights)[0]
        model, build = _BUILDERS[name]
        day, hour = rng.choice(config.days), rng.choice(config.hours)
        ts = hour_starts[day, hour] + rng.randrange(_HOUR_MS)
        yield model(
            category=config.category,
            event=name,
            log_date=day,
            hour=f"{hour:02d}",
            plat_id=rng.choice(config.plat_ids),
            app_id=rng.choice(config.app_ids),
            ts=ts,
            event_time=_EPOCH + timedelta(milliseconds=ts),
            schema_version=default_registry.for_model(model).version,
            **build(rng, config, seq),
        )


@dataclass
class ExpectedAggregates:
    """Row counts the generated events should produce, per table and per partition."""

    per_event: Counter[str] = field(default_factory=Counter)
    #: ``(event, log_date, hour)`` -> count.
    per_event_hour: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.per_event.values())

    def add(self, event: EventBase) -> None:
        self.per_event[event.event] += 1
        self.per_event_hour[event.event, event.log_date, event.hour] += 1


def expected_aggregates(events: Iterable[EventBase]) -> ExpectedAggregates:
    aggregates = ExpectedAggregates()
    for event in events:
        aggregates.add(event)
    return aggregates
