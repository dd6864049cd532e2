"""The generated fast path agrees with the reference path (validator + json) on every value."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from typing import Any

import pytest

from lakebus_dagster.events import (
    EnvelopeEncoder,
    EventBase,
    EventRegistry,
    EventValidationError,
    Float32,
    GeneratorConfig,
    Int32,
    default_registry,
    generate_events,
)
from lakebus_dagster.events.fastpath import compile_fast_encoder
from lakebus_dagster.events.validation import MISSING, PayloadValidator

_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AllTypes(EventBase):
    """One field of every supported type, required and optional."""

    flag: bool
    small: Int32
    big: int
    single: Float32
    double: float
    text: str
    o_flag: bool | None = None
    o_small: Int32 | None = None
    o_big: int | None = None
    o_single: Float32 | None = None
    o_double: float | None = None
    o_text: str | None = None


REGISTRY = EventRegistry()
VERSION = REGISTRY.register("all_types", AllTypes)

INT32_EDGES = [0, -1, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1]
INT64_EDGES = [0, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 10**30]
F32_MAX = 3.4028234663852886e38
FLOAT_EDGES = [0.0, -0.0, 1e-300, 1.7e308, F32_MAX, -F32_MAX, F32_MAX * 1.0000001, math.inf, -math.inf,
               math.nan, 0.1, 1 / 3, 10, -7, 10**400]


class Text(str):
    """A str subclass: valid, but not an exact str (the reference path handles it)."""


TEXTS = ["", "BRL", 'q"uote\\', "ctl\n\t\u0000", "\u00e9t\u00e9", "\u4e2d\U0001f600", "lone\ud800", Text("sub"),
         "\u2028"]
OTHER = [None, True, False, b"bytes", "7", 7, 7.5, [1]]


def reference(values: list[Any]) -> tuple[dict[str, Any], str] | tuple[type, str]:
    """What the reference path returns for ``values``, or the error it raises."""
    try:
        payload = PayloadValidator(VERSION).validate(values)
    except EventValidationError as exc:
        return type(exc), str(exc)
    return payload, _JSON.encode(payload)


def candidates(field_type: str) -> list[Any]:
    return {
        "boolean": [True, False, 0, 1],
        "int32": INT32_EDGES + [True, 1.0],
        "int64": INT64_EDGES + [False, 2.0],
        "float": FLOAT_EDGES + [True],
        "double": FLOAT_EDGES + [False],
        "string": TEXTS,
    }[field_type] + OTHER


def base_values() -> dict[str, Any]:
    return {"category": "biz", "event": "all_types", "log_date": "2025-11-25", "hour": "18", "plat_id": 1,
            "app_id": 10406, "ts": 1732527602000, "schema_version": 1, "flag": True, "small": 1, "big": 2,
            "single": 1.5, "double": 2.5, "text": "t"}


# ``event`` and ``schema_version`` select the schema of a dict record, so their errors come from the
# registry lookup (test_events_envelope.py); the fast path's part for them is tested below.
VALUE_FIELDS = [f for f in VERSION.schema.fields if f.name not in ("event", "schema_version")]


@pytest.mark.parametrize("field", VALUE_FIELDS, ids=lambda f: f.name)
def test_every_value_of_every_field_matches_the_reference(field) -> None:
    fast = compile_fast_encoder(VERSION)
    names = [f.name for f in VERSION.schema.fields]
    values_for_field = candidates(field.type.value) + ([MISSING] if field.optional else [])
    for value in values_for_field:
        record = {**base_values(), field.name: value}
        values = [record.get(name, MISSING) for name in names]
        expected = reference(values)
        result = fast(values)
        if result is not None:  # the fast path may decline, but when it answers it must agree
            assert result == expected, (field.name, value)
            assert json.dumps(result[0], ensure_ascii=False, separators=(",", ":")) == result[1]
        # ... and the encoder (fast path + fallback) always equals the reference
        encoder = EnvelopeEncoder(REGISTRY)
        if isinstance(expected[0], type):
            with pytest.raises(expected[0]) as exc_info:
                encoder.encode(record)
            assert str(exc_info.value) == expected[1], (field.name, value)
        else:
            assert encoder.encode_event(record).payload == expected[0]
            assert encoder.encode(record) == encoder_prefix() + expected[1].encode() + b"}"


def encoder_prefix() -> bytes:
    return b'{"schema":' + _JSON.encode(VERSION.schema.to_json()).encode() + b',"payload":'


def test_wrong_event_or_version_is_left_to_the_reference_path() -> None:
    fast = compile_fast_encoder(VERSION)
    names = [f.name for f in VERSION.schema.fields]
    for change in ({"event": "bet"}, {"schema_version": 2}):
        record = {**base_values(), **change}
        assert fast([record.get(name, MISSING) for name in names]) is None


def test_random_records_encode_identically_on_both_paths() -> None:
    rng = random.Random(42)
    fast = compile_fast_encoder(VERSION)
    fields = VERSION.schema.fields
    for _ in range(3000):
        record = base_values()
        for field in rng.sample(fields[8:], 3):
            record[field.name] = rng.choice(candidates(field.type.value))
        values = [record.get(f.name, MISSING) for f in fields]
        result = fast(values)
        if result is not None:
            assert result == reference(values)


def test_generated_events_take_the_fast_path() -> None:
    """The generator's events (what the benchmarks time) never need the reference path."""
    for event in generate_events(GeneratorConfig(count=500, seed=3)):
        version = default_registry.for_model(type(event))
        values = [getattr(event, f.name) for f in version.schema.fields]
        assert compile_fast_encoder(version)(values) is not None, event
