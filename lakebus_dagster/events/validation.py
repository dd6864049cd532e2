"""Strict per-record validation against a registered schema.

Everything the sink would choke on - or worse, accept and corrupt - is refused here, before a
byte is produced: a bad record in Kafka blocks or dead-letters the connector task for *every*
event on the topic. Checks are strict on purpose: ``True`` is not an int (Python thinks it is),
``NaN``/``inf`` are not JSON, a lone surrogate is not UTF-8, and a value beyond the column width
would overflow in the JVM.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Final

from .errors import EventValidationError
from .registry import EventVersion
from .types import ConnectType

#: Placeholder for a key absent from a dict record (distinguishes "missing" from ``None``).
MISSING: Final = object()

Checker = Callable[[Any], Any]
"""Returns the (normalised) value or raises ``ValueError`` with the reason."""

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_FLOAT32_MAX = 3.4028234663852886e38


def _type_name(value: object) -> str:
    return type(value).__name__


def _int_checker(connect_type: ConnectType, bounds: tuple[int, int]) -> Checker:
    low, high = bounds

    def check(value: Any) -> int:
        if type(value) is not int:
            hint = " (bool is not accepted as an integer)" if isinstance(value, bool) else ""
            raise ValueError(f"expected {connect_type.value} (int), got {_type_name(value)}{hint}")
        if not low <= value <= high:
            raise ValueError(f"{value} is out of {connect_type.value} range [{low}, {high}]")
        return value

    return check


def _float_checker(connect_type: ConnectType, max_abs: float) -> Checker:
    def check(value: Any) -> float:
        # ints are accepted (PEP 484 numeric tower) and emitted as floats; bools are not.
        if type(value) is not float and type(value) is not int:
            raise ValueError(f"expected {connect_type.value} (float), got {_type_name(value)}")
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
        raise ValueError(f"expected string (str), got {_type_name(value)}")
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
        raise ValueError(f"expected boolean (bool), got {_type_name(value)}")
    return value


CHECKERS: dict[ConnectType, Checker] = {
    ConnectType.INT32: _int_checker(ConnectType.INT32, _INT32),
    ConnectType.INT64: _int_checker(ConnectType.INT64, _INT64),
    ConnectType.FLOAT32: _float_checker(ConnectType.FLOAT32, _FLOAT32_MAX),
    ConnectType.FLOAT64: _float_checker(ConnectType.FLOAT64, math.inf),
    ConnectType.STRING: _check_string,
    ConnectType.BOOLEAN: _check_boolean,
}


class PayloadValidator:
    """Validates the field values of one event version and builds the payload dict.

    The per-field checkers are resolved once per version, so validating a record is one pass
    over ``(name, checker, optional)`` tuples.
    """

    __slots__ = ("event", "version", "names", "_plan")

    def __init__(self, version: EventVersion) -> None:
        self.event = version.event
        self.version = version.version
        self.names: tuple[str, ...] = tuple(f.name for f in version.schema.fields)
        self._plan = tuple((f.name, CHECKERS[f.type], f.optional) for f in version.schema.fields)

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
        return payload
