"""Event models: frozen dataclasses, one per business event.

Why dataclasses and not pydantic: the models are plain carriers and the schema is derived from
their annotations. Validation lives in one place, the :class:`~.envelope.EnvelopeEncoder`, because
it must apply identically to model instances and to plain dicts (replays, other services' JSON) and
must be *strict* - pydantic's default lax mode would turn ``"7"`` or ``True`` into an ``int``, which
is precisely what the producer has to refuse. ``slots=True`` keeps instances small for the
generator, ``kw_only=True`` lets a subclass declare optional fields after the required base ones
and keeps call sites readable, and ``frozen=True`` makes an event immutable once built.

``dataclasses.fields()`` lists base-class fields first, then the subclass's in declaration order,
which is exactly the Connect field order the sink expects (base columns first).
"""

from __future__ import annotations

from dataclasses import dataclass

from .types import Int32, Money, Timestamp

#: the recharge ``status`` that means money in (the sample generator's and the DWS tables' meaning)
SUCCESS_STATUS = "success"


@dataclass(frozen=True, slots=True, kw_only=True)
class EventBase:
    """Fields every event carries; the sink routes on ``event`` and partitions on date/hour."""

    category: str
    event: str
    log_date: str
    hour: str
    plat_id: Int32
    app_id: Int32
    ts: int
    schema_version: Int32


@dataclass(frozen=True, slots=True, kw_only=True)
class Bet(EventBase):
    user_id: Int32 | None = None
    order_id: str | None = None
    amount: float | None = None
    currency: str | None = None
    game_id: Int32 | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Recharge(EventBase):
    status: str | None = None
    user_id: Int32 | None = None
    order_id: str | None = None
    amount: float | None = None
    currency: str | None = None
    reason: str | None = None


# Version 2 of the built-in events: money and time typed. ``amount`` (a double) and ``ts`` (epoch ms)
# stay: a version may only add optional fields (the sink cannot change a column's type), producers
# still on version 1 keep sending them, and ``ts`` is the base field the partition rules check.
# ``amount_decimal`` is the amount exactly (a Connect Decimal, an Iceberg decimal(38,2) column; the
# SDK and the strict converter hold it to 18 digits), ``event_time`` the same instant as ``ts`` as an
# Iceberg timestamptz. The DWS tables read ``amount_decimal`` and fall back to ``amount`` for rows of
# version 1.


@dataclass(frozen=True, slots=True, kw_only=True)
class BetV2(Bet):
    amount_decimal: Money | None = None
    event_time: Timestamp | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RechargeV2(Recharge):
    amount_decimal: Money | None = None
    event_time: Timestamp | None = None
