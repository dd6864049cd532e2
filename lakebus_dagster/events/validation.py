"""Strict per-record validation against a registered schema.

Everything the sink would choke on - or worse, accept and corrupt - is refused here, before a
byte is produced: a bad record in Kafka blocks or dead-letters the connector task for *every*
event on the topic. Checks are strict on purpose: ``True`` is not an int (Python thinks it is),
``NaN``/``inf`` are not JSON, a lone surrogate is not UTF-8, and a value beyond the column width
would overflow in the JVM.

The lake partitions on ``log_date``/``hour`` and the DWS tables aggregate by them, so they are
checked for meaning, not only type: ``log_date`` a real ``YYYY-MM-DD`` date, ``hour`` ``"00"``-``"23"``.
``ts`` (the event time, epoch milliseconds) must lie in 2000..2100 - which catches seconds or
microseconds sent as milliseconds - and must not be later than the end of its ``log_date``/``hour``
partition (UTC) plus :data:`CLOCK_SKEW_MS`: a service logs an event after it happens, never an hour
before. The other way round is allowed on purpose: a *late* event (``ts`` before its partition, e.g.
logged at 00:00:02 for a bet placed at 23:59:59, or re-sent days later) lands in the partition it was
logged in, and the nightly late-data sweep recomputes the day before. Models are checked when they
are encoded (``EventProducer.send``), not when they are constructed.

Money is never rounded: a ``decimal(p, s)`` field takes a ``Decimal`` (or an ``int``) that has at most
``s`` digits after the point and fits ``p`` digits; a ``float`` is refused, because ``0.1 + 0.2`` is not
``0.3`` and the lake must not guess which decimal a binary float meant. A ``Timestamp`` takes an aware
``datetime`` (a naive one names no instant) in whole milliseconds (what Connect's ``Timestamp``
carries), or epoch milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import date, datetime, timezone
from typing import Any, Final

from .errors import EventValidationError
from .registry import EventVersion
from .schema import ConnectField
from .types import ConnectType
from .typed_values import (
    TS_MAX_MS,
    TS_MIN_MS,
    check_timestamp,
    decimal_checker,
    check_event_time,
    has_event_time,
    type_name,
)

#: Placeholder for a key absent from a dict record (distinguishes "missing" from ``None``).
MISSING: Final = object()

Checker = Callable[[Any], Any]
"""Returns the (normalised) value or raises ``ValueError`` with the reason."""

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_FLOAT32_MAX = 3.4028234663852886e38


HOUR_MS: Final = 3_600_000
#: how far a producer's clock may run ahead of the one that chose ``log_date``/``hour``
CLOCK_SKEW_MS: Final = 300_000
#: ``"00"``..``"23"`` -> the hour's offset in the day, in ms
HOUR_OFFSET_MS: Final = {f"{h:02d}": h * HOUR_MS for h in range(24)}
#: valid ``log_date`` strings seen so far -> 00:00 UTC of that day in ms (the fast path reads it;
#: a date not in it yet goes through the reference path once, which adds it)
DAY_START_MS: dict[str, int] = {}
_DAY_CACHE_MAX = 100_000
_PARTITION_FIELDS = ("log_date", "hour", "ts")


def day_start_ms(value: str) -> int:
    """00:00 UTC of ``value`` (``YYYY-MM-DD``, a real date) in epoch ms; ``ValueError`` otherwise."""
    start = DAY_START_MS.get(value)
    if start is None:
        try:
            if len(value) != 10 or value[4] != "-" or value[7] != "-" or not value.replace("-", "").isdigit():
                raise ValueError
            day = date.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a real date written YYYY-MM-DD (the ODS partition column)") from None
        start = int(datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp()) * 1000
        if len(DAY_START_MS) < _DAY_CACHE_MAX:
            DAY_START_MS[value] = start
    return start


def _check_log_date(value: str) -> str:
    day_start_ms(value)
    return value


def _check_hour(value: str) -> str:
    if value not in HOUR_OFFSET_MS:
        raise ValueError(f"{value!r} is not an hour of the day written '00'..'23' (UTC; the ODS partition column)")
    return value


def _check_ts(value: int) -> int:
    if not TS_MIN_MS <= value < TS_MAX_MS:
        hint = " (seconds, not milliseconds?)" if 0 < value < TS_MIN_MS / 100 else ""
        raise ValueError(f"{value} is not epoch milliseconds between 2000-01-01 and 2100-01-01{hint}")
    return value


#: checks of meaning for the base fields, run after the type check
FIELD_RULES: dict[str, Callable[[Any], Any]] = {"log_date": _check_log_date, "hour": _check_hour, "ts": _check_ts}


def check_ts_in_partition(event: str, log_date: str, hour: str, ts: int) -> None:
    """``ts`` must not be later than the end of its partition (+ clock skew); late events are fine."""
    end = day_start_ms(log_date) + HOUR_OFFSET_MS[hour] + HOUR_MS
    if ts >= end + CLOCK_SKEW_MS:
        when = datetime.fromtimestamp(ts / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        raise EventValidationError(
            event, "ts",
            f"{ts} ({when} UTC) is after its partition log_date={log_date} hour={hour} ends (+{CLOCK_SKEW_MS // 60000} min "
            "clock skew): an event is logged after it happens; set log_date/hour from ts (UTC)",
        )


def _then(first: Checker, second: Callable[[Any], Any]) -> Checker:
    def check(value: Any) -> Any:
        return second(first(value))

    return check


def _int_checker(connect_type: ConnectType, bounds: tuple[int, int]) -> Checker:
    low, high = bounds

    def check(value: Any) -> int:
        if type(value) is not int:
            hint = " (bool is not accepted as an integer)" if isinstance(value, bool) else ""
            raise ValueError(f"expected {connect_type.value} (int), got {type_name(value)}{hint}")
        if not low <= value <= high:
            raise ValueError(f"{value} is out of {connect_type.value} range [{low}, {high}]")
        return value

    return check


def _float_checker(connect_type: ConnectType, max_abs: float) -> Checker:
    def check(value: Any) -> float:
        # ints are accepted (PEP 484 numeric tower) and emitted as floats; bools are not.
        if type(value) is not float and type(value) is not int:
            raise ValueError(f"expected {connect_type.value} (float), got {type_name(value)}")
        try:
            number = float(value)
        except OverflowError:
            raise ValueError(f"{value} is out of {connect_type.value} range") from None
        if not math.isfinite(number):
            raise ValueError(f"{number} is not allowed: JSON has no NaN/Infinity")
        if abs(number) > max_abs:
            raise ValueError(f"{number} is out of {connect_type.value} range")
        return number

    return check


def _check_string(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected string (str), got {type_name(value)}")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"not encodable as UTF-8 ({exc.reason} at index {exc.start})"
            ) from None
    return value


def _check_boolean(value: Any) -> bool:
    if type(value) is not bool:
        raise ValueError(f"expected boolean (bool), got {type_name(value)}")
    return value


def checker(field: ConnectField) -> Checker:
    """The type check of ``field``'s values."""
    if field.type is ConnectType.DECIMAL:
        assert field.decimal is not None
        return decimal_checker(field.decimal)
    return CHECKERS[field.type]


CHECKERS: dict[ConnectType, Checker] = {
    ConnectType.INT32: _int_checker(ConnectType.INT32, _INT32),
    ConnectType.INT64: _int_checker(ConnectType.INT64, _INT64),
    ConnectType.FLOAT32: _float_checker(ConnectType.FLOAT32, _FLOAT32_MAX),
    ConnectType.FLOAT64: _float_checker(ConnectType.FLOAT64, math.inf),
    ConnectType.STRING: _check_string,
    ConnectType.BOOLEAN: _check_boolean,
    ConnectType.TIMESTAMP: check_timestamp,
}


def has_rule(field: Any) -> bool:
    """Whether ``field`` gets a meaning check: a base field with its base type (str, str, int64)."""
    expected = {"log_date": ConnectType.STRING, "hour": ConnectType.STRING, "ts": ConnectType.INT64}
    return expected.get(field.name) is field.type


class PayloadValidator:
    """Validates the field values of one event version and builds the payload dict.

    The per-field checkers are resolved once per version, so validating a record is one pass
    over ``(name, checker, optional)`` tuples.
    """

    __slots__ = ("event", "version", "names", "_plan", "partitioned", "timed")

    def __init__(self, version: EventVersion) -> None:
        self.event = version.event
        self.version = version.version
        self.names: tuple[str, ...] = tuple(f.name for f in version.schema.fields)
        self._plan = tuple(
            (f.name, _then(checker(f), FIELD_RULES[f.name]) if has_rule(f) else checker(f), f.optional)
            for f in version.schema.fields
        )
        #: every event has the partition fields (EventBase); a bare test schema may not
        self.partitioned = all(name in self.names for name in _PARTITION_FIELDS)
        #: a typed ``event_time`` beside ``ts`` must name the same instant (two clocks would be two truths)
        self.timed = self.partitioned and has_event_time(version.schema.fields)

    def validate(self, values: Sequence[Any]) -> dict[str, Any]:
        """``values`` are in schema order (``MISSING`` for absent keys); returns the payload."""
        payload: dict[str, Any] = {}
        for (name, check, optional), value in zip(self._plan, values):
            if value is None or value is MISSING:
                if not optional:
                    state = "missing" if value is MISSING else "None"
                    raise EventValidationError(self.event, name, f"required field is {state}")
                payload[name] = None
                continue
            try:
                payload[name] = check(value)
            except ValueError as exc:
                raise EventValidationError(self.event, name, str(exc)) from None
        if payload["event"] != self.event:
            raise EventValidationError(
                self.event,
                "event",
                f"record says {payload['event']!r} but is encoded as {self.event!r}",
            )
        if payload["schema_version"] != self.version:
            raise EventValidationError(
                self.event,
                "schema_version",
                f"record says {payload['schema_version']} but its model is version {self.version}",
            )
        if self.partitioned and None not in (payload["log_date"], payload["hour"], payload["ts"]):
            check_ts_in_partition(self.event, payload["log_date"], payload["hour"], payload["ts"])
        if self.timed and payload["event_time"] is not None and payload["ts"] is not None:
            check_event_time(self.event, payload["event_time"], payload["ts"])
        return payload
