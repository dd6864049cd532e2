"""Money and time values: the checks and JSON forms of ``decimal(p, s)`` and ``Timestamp`` fields.

Why their own module: ``json`` cannot write a ``Decimal`` as a number nor a ``datetime`` as epoch
milliseconds, so these types need one writer that the fast path and the reference path share, and
the writer is also the verdict: a value is accepted exactly when it can be written unchanged (a
decimal that would need rounding, a naive or sub-millisecond datetime cannot).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from decimal import Context, Decimal
from typing import Any, Final

from .errors import EventValidationError
from .schema import ConnectField
from .types import ConnectType, DecimalSpec

Checker = Callable[[Any], Any]

#: epoch milliseconds of 2000-01-01 and 2100-01-01 (UTC): a plausible instant (``ts``'s range too)
TS_MIN_MS: Final = 946_684_800_000
TS_MAX_MS: Final = 4_102_444_800_000


def type_name(value: object) -> str:
    """A value's type as error messages name it (every checker of the SDK)."""
    return type(value).__name__


def decimal_text(spec: DecimalSpec) -> Callable[[Any], str | None]:
    """``value`` -> its JSON number written with exactly ``spec.scale`` decimals (``12.30``), or None
    when it is not a finite ``Decimal``/``int`` that fits ``spec`` without rounding.

    The one formatter of decimals: the fast path, the reference path and the checker's verdict all
    come from it, so a value is accepted exactly when it can be written unchanged.
    """
    quantum = Decimal(1).scaleb(-spec.scale)
    limit = Decimal(10) ** (spec.precision - spec.scale)

    # str() writes a Decimal whose exponent is -scale in plain notation while scale <= 6 (Python's
    # rule: scientific only for a positive exponent or an adjusted exponent below -6)
    plain = spec.scale <= 6

    def text(value: Any) -> str | None:
        if type(value) is int:
            value = Decimal(value)
        elif type(value) is not Decimal:
            return None
        elif plain and value.as_tuple().exponent == -spec.scale:  # the common case: already at the scale
            return str(value) if value.copy_abs() < limit else None
        if not value.is_finite() or value.copy_abs() >= limit:
            return None
        exact = value if value.as_tuple().exponent == -spec.scale else value.quantize(quantum, context=_EXACT)
        return format(exact, "f") if exact == value else None

    return text


#: wide enough for any decimal(38, s) (the default context rounds at 28 digits)
_EXACT = Context(prec=80)


def decimal_checker(spec: DecimalSpec) -> Checker:
    text = decimal_text(spec)
    limit = Decimal(10) ** (spec.precision - spec.scale)

    def check(value: Any) -> Any:
        if text(value) is not None:
            return value
        if isinstance(value, float):
            raise ValueError(f"expected {spec} (decimal.Decimal), got float {value!r}: a binary float is not an "
                             "exact amount; pass decimal.Decimal('12.34') (or an int)")
        if isinstance(value, bool) or type(value) not in (int, Decimal):
            raise ValueError(f"expected {spec} (decimal.Decimal), got {type_name(value)}")
        if not Decimal(value).is_finite():
            raise ValueError(f"{value} is not allowed: a {spec} is a finite number")
        if Decimal(value).copy_abs() >= limit:
            raise ValueError(f"{value} does not fit {spec}: at most {spec.precision - spec.scale} digits before "
                             "the point")
        raise ValueError(f"{value} has more than {spec.scale} digits after the point ({spec}); it is not "
                         "rounded here: round it where the amount is decided")

    return check


def timestamp_ms(value: Any) -> int | None:
    """``value`` -> epoch milliseconds (an aware ``datetime`` in whole ms, or an ``int`` in 2000..2100),
    or None when it is not one. The fast path and the reference path write this number."""
    if type(value) is int:
        return value if TS_MIN_MS <= value < TS_MAX_MS else None
    if type(value) is not datetime or value.tzinfo is None or value.utcoffset() is None or value.microsecond % 1000:
        return None
    ms = (value - _EPOCH) // _ONE_MS
    return ms if TS_MIN_MS <= ms < TS_MAX_MS else None


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_MS = datetime.resolution * 1000


def timestamp_text(value: Any) -> str | None:
    """``value``'s epoch milliseconds as JSON writes them, or None (:func:`timestamp_ms`)."""
    ms = timestamp_ms(value)
    return None if ms is None else str(ms)


def json_writer(field: ConnectField) -> Callable[[Any], str | None] | None:
    """How a value of ``field`` is written in the payload's JSON, for the types the ``json`` module
    cannot write itself (None: ``json`` writes it). The writer answers None for a value it cannot
    write unchanged: the fast path then falls back to the reference path, whose checker says why."""
    if field.type is ConnectType.DECIMAL:
        assert field.decimal is not None
        return decimal_text(field.decimal)
    if field.type is ConnectType.TIMESTAMP:
        return timestamp_text
    return None


def check_timestamp(value: Any) -> Any:
    if timestamp_ms(value) is not None:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, datetime)):
        raise ValueError(f"expected timestamp (an aware datetime or epoch ms), got {type_name(value)}")
    if isinstance(value, int):
        raise ValueError(f"{value} is not epoch milliseconds between 2000-01-01 and 2100-01-01")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{value.isoformat()} is a naive datetime, which names no instant; give it a tzinfo "
                         "(e.g. timezone.utc)")
    if value.microsecond % 1000:
        raise ValueError(f"{value.isoformat()} has microseconds; a Connect Timestamp holds whole milliseconds "
                         "and the SDK does not truncate: drop them where the time is taken")
    raise ValueError(f"{value.isoformat()} is not between 2000-01-01 and 2100-01-01")


def has_event_time(fields: Sequence[ConnectField]) -> bool:
    """Whether a version has a typed ``event_time`` (version 2 of the built-in events) beside ``ts``."""
    return any(f.name == EVENT_TIME and f.type is ConnectType.TIMESTAMP for f in fields)


#: the typed event time of version 2 of the built-in events
EVENT_TIME = "event_time"


def check_event_time(event: str, event_time: Any, ts: int) -> None:
    """``event_time`` is ``ts`` typed: the same instant, to the millisecond."""
    ms = timestamp_ms(event_time)
    if ms != ts:
        raise EventValidationError(event, EVENT_TIME, f"{ms} ms is not the instant of ts ({ts}); event_time is ts "
                                   "as a timestamp and must be equal to it")


