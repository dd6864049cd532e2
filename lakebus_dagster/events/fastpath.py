"""A generated per-version function that validates *and* serialises the common record in one pass.

Why: producing is bounded by Python time per event, and the reference path
(:meth:`~.validation.PayloadValidator.validate` then ``json`` on the payload dict) costs one
checker call per field plus a second walk of the dict in the JSON encoder - about 9 µs for a bet,
more than librdkafka needs to ship the message. Like ``dataclasses`` and ``attrs``, the SDK
generates, once per event version, straight-line code with the field checks inlined and the JSON
written by one f-string (keys are constants; values go through the same primitives the ``json``
encoder uses, so the bytes are identical).

The fast path only *accepts*: it handles exactly the values that need no normalisation - ``str``
that is ASCII, ``int`` in range, finite ``float`` (in range), ``bool``, ``None`` - and returns
``None`` for anything else (a non-ASCII string, an ``int`` in a float field, a str subclass, any
invalid value). The caller then runs the reference path, which either encodes the record or
raises the precise :class:`~.errors.EventValidationError`. So every error message, and every
unusual-but-valid value, still goes through one implementation; a gap in the fast path can cost
speed, never correctness; ``test_events_fastpath.py`` compares both paths value by value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from .registry import EventVersion
from .schema import ConnectField
from .types import ConnectType
from .typed_values import EVENT_TIME, json_writer
from .validation import (
    _FLOAT32_MAX,
    _INT32,
    _INT64,
    CLOCK_SKEW_MS,
    DAY_START_MS,
    has_event_time,
    HOUR_MS,
    HOUR_OFFSET_MS,
    MISSING,
    TS_MAX_MS,
    TS_MIN_MS,
    day_start_ms,
    has_rule,
)

FastEncode = Callable[[Sequence[Any]], tuple[dict[str, Any], str] | None]
"""``values`` in schema order -> ``(payload, payload_json)``, or None to use the reference path."""

# The primitive the json module's encoder applies to str with ensure_ascii=False (C-accelerated).
_ENCODE_STR = json.encoder.encode_basestring  # type: ignore[attr-defined]

_INT_BOUNDS = {ConnectType.INT32: _INT32, ConnectType.INT64: _INT64}
#: float64 accepts -inf < v < inf, float32 -max <= v <= max; NaN fails every comparison.
_FLOAT_RANGE = {
    ConnectType.FLOAT64: "-_INF < {v} < _INF",
    ConnectType.FLOAT32: "-_F32 <= {v} <= _F32",
}


def _accept_and_encode(field: ConnectField, var: str) -> tuple[str, str]:
    """``(condition, json_expression)`` for a non-null value held in the local ``var``.

    ``condition`` is true only for values the reference path would pass through unchanged, and
    ``json_expression`` is then exactly what ``json`` writes for them (its C encoder uses
    ``int.__repr__`` and ``float.__repr__``, which is what an f-string gives for exact int/float).
    """
    if field.type is ConnectType.STRING:
        return f"type({var}) is str and {var}.isascii()", f"_str({var})"
    if field.type in _INT_BOUNDS:
        low, high = _INT_BOUNDS[field.type]
        return f"type({var}) is int and {low} <= {var} <= {high}", var
    if field.type in _FLOAT_RANGE:
        return f"type({var}) is float and {_FLOAT_RANGE[field.type].format(v=var)}", f"_repr({var})"
    if field.type is ConnectType.BOOLEAN:
        return f"type({var}) is bool", f"('true' if {var} else 'false')"
    if field.type in (ConnectType.DECIMAL, ConnectType.TIMESTAMP):
        # the field's writer (typed_values.json_writer, the reference path's too) both judges and writes the value
        return f"(_t := {_writer_name(field)}({var})) is not None", "_t"
    raise AssertionError(f"field {field.name!r}: no fast path for {field.type!r}")  # pragma: no cover


def _writer_name(field: ConnectField) -> str:
    return f"_w_{field.name}"


def _new_day(value: str) -> int | None:
    """A ``log_date`` not seen yet: its day start (now cached), or None if it is not a real date."""
    try:
        return day_start_ms(value)
    except ValueError:
        return None


def _namespace(fields: Sequence[ConnectField]) -> dict[str, Any]:
    """The names the generated function reads: the encoders, the partition rules' tables, and a
    writer per decimal and timestamp field."""
    namespace: dict[str, Any] = {
        "_str": _ENCODE_STR,
        "_repr": float.__repr__,
        "_MISSING": MISSING,
        "_INF": float("inf"),
        "_F32": _FLOAT32_MAX,
        "_DAYS": DAY_START_MS,
        "_new_day": _new_day,
        "_HOURS": HOUR_OFFSET_MS,
        "_TS_MIN": TS_MIN_MS,
        "_TS_MAX": TS_MAX_MS,
        "_TS_LIMIT": HOUR_MS + CLOCK_SKEW_MS,
    }
    for field in fields:
        if (write := json_writer(field)) is not None:
            namespace[_writer_name(field)] = write
    return namespace


def compile_fast_encoder(version: EventVersion) -> FastEncode:
    """Generate the fast path for one event version (see the module docstring).

    Field names are Python identifiers (they come from dataclass fields), so they need no quoting
    inside the generated JSON template.
    """
    fields = version.schema.fields
    var = {f.name: f"v{i}" for i, f in enumerate(fields)}
    lines = ["def fast_encode(values):", f"    {', '.join(var.values())} = values"]
    for field in fields:
        v = var[field.name]
        accept, encode = _accept_and_encode(field, v)
        if field.optional:
            lines += [
                f"    if {v} is None or {v} is _MISSING:",
                f"        {v}, j{v} = None, 'null'",
                f"    elif {accept}:",
                f"        j{v} = {encode}",
                "    else:",
                "        return None",
            ]
        else:
            lines += [f"    if not ({accept}):", "        return None", f"    j{v} = {encode}"]
    # the partition fields' meaning (validation.py): a date already seen valid, an hour 00..23, a
    # plausible ts not after the partition's end; anything else -> the reference path explains
    rules = [f for f in fields if has_rule(f)]
    if len(rules) == 3 and not any(f.optional for f in rules):
        d, h, t = var["log_date"], var["hour"], var["ts"]
        lines += [
            f"    day = _DAYS.get({d})",
            "    if day is None:",
            f"        day = _new_day({d})",
            f"    off = _HOURS.get({h})",
            f"    if day is None or off is None or not (_TS_MIN <= {t} < _TS_MAX) or {t} >= day + off + _TS_LIMIT:",
            "        return None",
        ]
    else:
        assert not rules, f"{version.event}: partition fields must all be required or absent"  # EventBase has them
    if rules and has_event_time(fields):
        e, t = var[EVENT_TIME], var["ts"]
        lines += [f"    if {e} is not None and int(j{e}) != {t}:", "        return None"]
    # the record must say which event and version it is encoded as (the reference path explains)
    lines += [
        f"    if {var['event']} != {version.event!r} or {var['schema_version']} != {version.version}:",
        "        return None",
    ]
    payload = ", ".join(f"{name!r}: {v}" for name, v in var.items())
    template = ",".join(f'"{name}":{{j{v}}}' for name, v in var.items())
    lines.append(f"    return {{{payload}}}, f'{{{{{template}}}}}'")
    namespace = _namespace(fields)
    source = "\n".join(lines)
    exec(compile(source, f"<fast_encode {version.event} v{version.version}>", "exec"), namespace)
    return namespace["fast_encode"]
