"""Version 2 of the built-in events types money and time: amounts are exact decimals (never a float,
never rounded), the event time an aware instant in whole milliseconds equal to ``ts``."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from lakebus_dagster.event_declaration import parse_events
from lakebus_dagster.events import (
    BetV2,
    EnvelopeEncoder,
    EventRegistry,
    EventValidationError,
    SchemaError,
    decimal,
    default_registry,
)
from lakebus_dagster.events.declared import event_model
from lakebus_dagster.events.models import Bet

AT = datetime(2026, 11, 29, 10, 5, 7, 123000, tzinfo=timezone.utc)
TS = 1795946707123
ENCODER = EnvelopeEncoder()


def bet(**changes) -> BetV2:
    base = BetV2(category="biz", event="bet", log_date="2026-11-29", hour="10", plat_id=1, app_id=2, ts=TS,
                 schema_version=2, user_id=7, amount_decimal=Decimal("12.30"), event_time=AT)
    return dataclasses.replace(base, **changes)


def payload(record) -> dict:
    return json.loads(ENCODER.encode(record), parse_float=Decimal)["payload"]


def test_the_amount_travels_as_its_exact_number_and_the_time_as_epoch_ms():
    sent = payload(bet())
    assert sent["amount_decimal"] == Decimal("12.30") and sent["event_time"] == TS
    assert b'"amount_decimal":12.30,' in ENCODER.encode(bet())


@pytest.mark.parametrize(("value", "written"), [
    (Decimal("12.3"), "12.30"), (Decimal("12.340"), "12.34"), (5, "5.00"), (Decimal("-0.01"), "-0.01"),
    (Decimal("1E+2"), "100.00"), (Decimal("9999999999999999.99"), "9999999999999999.99"),
])
def test_exact_amounts_are_written_at_the_fields_scale(value, written):
    assert f'"amount_decimal":{written},'.encode() in ENCODER.encode(bet(amount_decimal=value))


@pytest.mark.parametrize(("value", "reason"), [
    (12.3, "got float 12.3: a binary float is not an exact amount"),
    (Decimal("12.345"), "12.345 has more than 2 digits after the point (decimal(18,2)); it is not rounded"),
    (Decimal("10000000000000000"), "does not fit decimal(18,2): at most 16 digits before the point"),
    (Decimal("NaN"), "NaN is not allowed"),
    (Decimal("Infinity"), "Infinity is not allowed"),
    (True, "got bool"),
    ("12.30", "got str"),
])
def test_an_amount_that_is_not_exact_or_does_not_fit_is_refused(value, reason):
    with pytest.raises(EventValidationError, match="field 'amount_decimal'") as refused:
        ENCODER.encode(bet(amount_decimal=value))
    assert reason in str(refused.value)


@pytest.mark.parametrize(("value", "reason"), [
    (AT.replace(tzinfo=None), "is a naive datetime, which names no instant"),
    (AT + timedelta(microseconds=1), "has microseconds; a Connect Timestamp holds whole milliseconds"),
    (TS + 1, "is not the instant of ts"),
    (AT + timedelta(hours=1), "is not the instant of ts"),
    ("2026-11-29T10:05:07Z", "got str"),
])
def test_an_event_time_that_is_not_an_instant_in_ms_equal_to_ts_is_refused(value, reason):
    with pytest.raises(EventValidationError, match="field 'event_time'") as refused:
        ENCODER.encode(bet(event_time=value))
    assert reason in str(refused.value)


def test_epoch_ms_and_any_time_zone_name_the_same_instant():
    other_zone = AT.astimezone(timezone(timedelta(hours=8)))
    assert ENCODER.encode(bet(event_time=TS)) == ENCODER.encode(bet(event_time=other_zone)) == ENCODER.encode(bet())


def test_a_mapping_and_the_model_encode_to_the_same_bytes():
    """Dicts (replays, other services' JSON) take the reference path, models the generated one."""
    record = bet()
    assert ENCODER.encode(dataclasses.asdict(record)) == ENCODER.encode(record)
    odd = bet(amount_decimal=7, event_time=TS)  # values only the reference path handles
    assert ENCODER.encode(dataclasses.asdict(odd)) == ENCODER.encode(odd)


def test_a_bare_json_payload_keeps_its_digits_when_it_gets_its_envelope():
    """What a DLQ replay wraps: the payload's JSON text, not a model. ``json`` alone would read
    ``12.30`` as a binary float, which the validator refuses for money."""
    record = bet(amount=12.3, amount_decimal=Decimal("9999999999999999.99"))
    envelope = ENCODER.encode(record)
    bare = envelope[envelope.index(b'"payload":') + len(b'"payload":'):-1]  # as a producer without the SDK writes it
    assert b"9999999999999999.99" in bare and ENCODER.encode_json_payload(bare) == ENCODER.encode(record)
    with pytest.raises(EventValidationError, match="amount_decimal"):
        ENCODER.encode_json_payload(bare.replace(b"9999999999999999.99", b"12.345"))
    for not_bare in (b"[1]", ENCODER.encode(record), b'{"amount": 1}'):
        with pytest.raises(ValueError, match="not a bare event payload"):
            ENCODER.encode_json_payload(not_bare)


def test_version_1_still_encodes_with_its_double_and_long():
    old = Bet(category="biz", event="bet", log_date="2026-11-29", hour="10", plat_id=1, app_id=2, ts=TS,
              schema_version=1, amount=12.3)
    sent = json.loads(ENCODER.encode(old))
    assert sent["payload"]["amount"] == 12.3 and "amount_decimal" not in sent["payload"]
    assert default_registry.get("bet", 1).model is Bet


def test_a_decimal_needs_its_precision_and_scale_and_a_changed_scale_is_a_new_type():
    from lakebus_dagster.events import EventBase

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Loose(EventBase):
        amount: Decimal | None = None

    with pytest.raises(SchemaError, match="a Decimal needs its precision and scale"):
        EventRegistry().register("loose", Loose)
    with pytest.raises(SchemaError, match=r"decimal\(40, 2\)"):
        decimal(40, 2)

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Cents(EventBase):
        amount: decimal(18, 2) | None = None

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Mills(EventBase):
        amount: decimal(18, 3) | None = None
        note: str | None = None

    registry = EventRegistry()
    registry.register("pay", Cents)
    with pytest.raises(SchemaError, match=r"changes type decimal\(18,2\) -> decimal\(18,3\)"):
        registry.register("pay", Mills, version=2)


def test_a_declared_event_may_carry_money_and_time():
    declared = parse_events({"withdrawal": {"fields": {"amount": "decimal(12, 4)", "paid_at": "timestamp"}}})
    registry = EventRegistry()
    registry.register("withdrawal", event_model(declared[0]))
    encoder = EnvelopeEncoder(registry)
    record = {"category": "biz", "event": "withdrawal", "log_date": "2026-11-29", "hour": "10", "plat_id": 1,
              "app_id": 2, "ts": TS, "schema_version": 1, "amount": Decimal("0.1234"), "paid_at": AT}
    assert b'"amount":0.1234,"paid_at":1795946707123}' in encoder.encode(record)
    with pytest.raises(EventValidationError, match="more than 4 digits after the point"):
        encoder.encode({**record, "amount": Decimal("0.12345")})
