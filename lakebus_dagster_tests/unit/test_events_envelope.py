"""Envelope encoding: the seed envelope, every validation refusal, and fast path == naive."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import re
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from lakebus_dagster.events import (
    Bet,
    EnvelopeEncoder,
    EventValidationError,
    GeneratorConfig,
    Recharge,
    UnknownEventError,
    default_registry,
    generate_events,
)

from .event_fakes import SEED_BET

SEED_ENVELOPE = (
    '{"schema":{"type":"struct","name":"bet_record","fields":[{"field":"category","type":"string"},'
    '{"field":"event","type":"string"},{"field":"log_date","type":"string"},{"field":"hour","type":"string"},'
    '{"field":"plat_id","type":"int32"},{"field":"app_id","type":"int32"},{"field":"ts","type":"int64"},'
    '{"field":"schema_version","type":"int32"},{"field":"user_id","type":"int32","optional":true},'
    '{"field":"order_id","type":"string","optional":true},{"field":"amount","type":"double","optional":true},'
    '{"field":"currency","type":"string","optional":true},{"field":"game_id","type":"int32","optional":true}]},'
    '"payload":{"category":"biz","event":"bet","log_date":"2025-11-25","hour":"18","plat_id":1,'
    '"app_id":10406,"ts":1732527602000,"schema_version":1,"user_id":2001,"order_id":"10001","amount":10,'
    '"currency":"BRL","game_id":777}}'
)

encoder = EnvelopeEncoder()


def _naive(event: str, payload: dict[str, Any], version: int | None = None) -> bytes:
    """The envelope written the obvious way: ``json.dumps``, with a decimal as its number at the
    field's scale (spliced in: ``json`` cannot write a Decimal) and a datetime as epoch ms."""
    version = payload["schema_version"] if version is None else version
    schema = default_registry.get(event, version).schema
    plain = {}
    for name, value in payload.items():
        field = schema.field(name)
        if isinstance(value, Decimal):
            value = f"<decimal {value.quantize(Decimal(1).scaleb(-field.decimal.scale)):f}>"
        elif isinstance(value, datetime):
            value = (value - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(milliseconds=1)
        plain[name] = value
    text = json.dumps({"schema": schema.to_json(), "payload": plain}, separators=(",", ":"), ensure_ascii=False)
    return re.sub(r'"<decimal (-?[0-9.]+)>"', r"\1", text).encode("utf-8")


def test_seed_bet_envelope_is_json_equal() -> None:
    encoded = encoder.encode(SEED_BET)
    assert isinstance(encoded, bytes)
    assert json.loads(encoded) == json.loads(SEED_ENVELOPE)


def test_dict_and_model_encode_identically() -> None:
    as_dict = dataclasses.asdict(SEED_BET)
    assert encoder.encode(as_dict) == encoder.encode(SEED_BET)
    assert encoder.encode(as_dict, "bet") == encoder.encode(SEED_BET, "bet")


def test_absent_optional_fields_are_null() -> None:
    as_dict = dataclasses.asdict(SEED_BET)
    del as_dict["game_id"]
    as_dict["currency"] = None
    payload = json.loads(encoder.encode(as_dict))["payload"]
    assert payload["game_id"] is None and payload["currency"] is None


def test_encode_event_exposes_validated_payload() -> None:
    encoded = encoder.encode_event(SEED_BET)
    assert encoded.event == "bet"
    assert encoded.payload["amount"] == 10.0 and type(encoded.payload["amount"]) is float
    assert encoded.value == _naive("bet", encoded.payload)


def _random_text(rng: random.Random) -> str:
    alphabet = "abcXYZ 09_-\"\\/\n\t\u00e9\u00e7\u00e3\u4e2d\u6587\U0001f600\u0000\u2028"
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))


def test_fast_path_equals_naive_encoding_for_many_random_events() -> None:
    rng = random.Random(1234)
    events = list(generate_events(GeneratorConfig(count=2000, seed=99)))
    for index, event in enumerate(events):
        changes: dict[str, Any] = {"category": _random_text(rng)}
        if index % 3 == 0:
            changes["currency"] = rng.choice([None, _random_text(rng)])
        if index % 5 == 0:
            changes["amount"] = rng.choice([None, 0.0, -0.0, 1e-300, 1.7e308, rng.random() * 1e9])
        event = dataclasses.replace(event, **changes)
        naive = _naive(event.event, dataclasses.asdict(event))
        fast = encoder.encode(event)
        assert json.loads(fast) == json.loads(naive)
        assert fast == naive  # same payload dict -> byte-identical


def _with(**changes: Any) -> dict[str, Any]:
    record = dataclasses.asdict(SEED_BET)
    record.update(changes)
    return record


def _without(name: str) -> dict[str, Any]:
    record = dataclasses.asdict(SEED_BET)
    del record[name]
    return record


@pytest.mark.parametrize(
    ("record", "field", "reason"),
    [
        (_without("log_date"), "log_date", "required field is missing"),
        (_with(ts=None), "ts", "required field is None"),
        (_with(plat_id="1"), "plat_id", "expected int32 (int), got str"),
        (_with(user_id=1.0), "user_id", "expected int32 (int), got float"),
        (_with(plat_id=True), "plat_id", "bool is not accepted as an integer"),
        (_with(ts=False), "ts", "bool is not accepted as an integer"),
        (_with(amount=True), "amount", "expected double (float), got bool"),
        (_with(amount="10"), "amount", "expected double (float), got str"),
        (_with(currency=1), "currency", "expected string (str), got int"),
        (_with(currency=b"BRL"), "currency", "expected string (str), got bytes"),
        (_with(user_id=2**31), "user_id", "out of int32 range"),
        (_with(user_id=-(2**31) - 1), "user_id", "out of int32 range"),
        (_with(ts=2**63), "ts", "out of int64 range"),
        (_with(amount=math.nan), "amount", "nan is not allowed"),
        (_with(amount=math.inf), "amount", "inf is not allowed"),
        (_with(amount=-math.inf), "amount", "-inf is not allowed"),
        (_with(amount=10**400), "amount", "out of double range"),
        (_with(order_id="ab\ud800c"), "order_id", "not encodable as UTF-8 (surrogates not allowed at index 2)"),
        (_with(category="\udfff"), "category", "not encodable as UTF-8"),
        # Without an explicit name the record's own event decides: bet fields are unknown to recharge.
        (_with(event="recharge"), "game_id", "unknown field(s) ['game_id'] not in schema"),
        (_with(schema_version=True), "schema_version", "bool is not accepted as an integer"),
        (_with(schema_version=3), "schema_version", "3 is not a registered version"),
        (_with(schema_version="1"), "schema_version", "'1' is not a registered version"),
        (_with(schema_version=[1]), "schema_version", "[1] is not a registered version"),
        (_with(event="withdraw"), "event", "event is not registered (registered: bet, recharge)"),
        (_with(event=None), "event", "no event name given"),
        (_with(gameid=777), "gameid", "unknown field(s) ['gameid'] not in schema"),
    ],
)
def test_invalid_dict_records_are_refused(record: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(EventValidationError) as exc_info:
        encoder.encode(record)
    error = exc_info.value
    assert error.field == field
    assert reason in error.reason
    assert f"field {field!r}" in str(error)


@pytest.mark.parametrize(
    ("changes", "field", "reason"),
    [
        ({"user_id": True}, "user_id", "bool is not accepted"),
        ({"amount": math.nan}, "amount", "nan is not allowed"),
        ({"event": "recharge"}, "event", "record says 'recharge' but is encoded as 'bet'"),
        ({"schema_version": 2}, "schema_version", "record says 2 but its model is version 1"),
        ({"hour": None}, "hour", "required field is None"),
    ],
)
def test_invalid_model_records_are_refused(changes: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(EventValidationError) as exc_info:
        encoder.encode(dataclasses.replace(SEED_BET, **changes))
    assert (exc_info.value.event, exc_info.value.field) == ("bet", field)
    assert reason in exc_info.value.reason


def test_explicit_event_name_must_match_record() -> None:
    with pytest.raises(EventValidationError, match="field 'event'.*record says 'bet'.*'recharge'"):
        encoder.encode(dataclasses.asdict(SEED_BET), "recharge")
    with pytest.raises(EventValidationError, match="Bet is registered as 'bet'"):
        encoder.encode(SEED_BET, "recharge")
    with pytest.raises(UnknownEventError, match="'withdraw'"):
        encoder.encode(dataclasses.asdict(SEED_BET), "withdraw")


def test_unregistered_model_is_refused() -> None:
    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Unregistered(Bet):
        pass

    with pytest.raises(UnknownEventError, match="'Unregistered' is not a registered event model"):
        encoder.encode(Unregistered(**dataclasses.asdict(SEED_BET)))
    with pytest.raises(UnknownEventError, match="'int' is not a registered event model"):
        encoder.encode(42)  # type: ignore[arg-type]


def test_non_ascii_strings_are_kept_as_utf8() -> None:
    event = dataclasses.replace(SEED_BET, currency="R$ \u00e7\u4e2d\U0001f600")
    encoded = encoder.encode(event)
    assert "R$ \u00e7\u4e2d\U0001f600".encode() in encoded
    assert json.loads(encoded)["payload"]["currency"] == "R$ \u00e7\u4e2d\U0001f600"


def test_recharge_encodes() -> None:
    recharge = Recharge(
        category="biz", event="recharge", log_date="2025-11-25", hour="18", plat_id=1,
        app_id=10406, ts=1732527602000, schema_version=1, status="failed", user_id=2001,
        order_id="10002", amount=50.5, currency="BRL", reason="card_declined",
    )
    document = json.loads(encoder.encode(recharge))
    assert document["schema"]["name"] == "recharge_record"
    assert document["payload"] == dataclasses.asdict(recharge)
