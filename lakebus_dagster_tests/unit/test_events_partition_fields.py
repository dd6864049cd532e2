"""The SDK checks what the lake depends on: ``log_date`` a real date, ``hour`` 00-23, ``ts`` plausible
epoch ms and not after its partition (late events allowed) - with the same error style as every field,
and the fast path agreeing with the reference path on each value."""

from __future__ import annotations

import json

import pytest

from lakebus_dagster.events import Bet, EnvelopeEncoder, EventValidationError, default_registry
from lakebus_dagster.events.fastpath import compile_fast_encoder
from lakebus_dagster.events.validation import CLOCK_SKEW_MS, HOUR_MS, MISSING, PayloadValidator

#: 2025-11-27 10:00:00 UTC
TEN = 1_764_237_600_000
GOOD = dict(category="biz", event="bet", log_date="2025-11-27", hour="10", plat_id=1, app_id=2, ts=TEN + 1234,
            schema_version=1, user_id=7, order_id="o1", amount=1.5, currency="BRL", game_id=3)


def encode(**changes):
    return EnvelopeEncoder().encode(Bet(**{**GOOD, **changes}))


@pytest.mark.parametrize(
    "changes, field, reason",
    [
        ({"log_date": "yesterday"}, "log_date", "'yesterday' is not a real date written YYYY-MM-DD"),
        ({"log_date": "2025-13-45"}, "log_date", "'2025-13-45' is not a real date"),
        ({"log_date": "2025-02-30"}, "log_date", "not a real date"),
        ({"log_date": "2025-1-05"}, "log_date", "not a real date"),
        ({"log_date": "20251127"}, "log_date", "not a real date"),
        ({"log_date": "2025-11-27 "}, "log_date", "not a real date"),
        ({"hour": "99"}, "hour", "'99' is not an hour of the day written '00'..'23'"),
        ({"hour": "24"}, "hour", "'24' is not an hour"),
        ({"hour": "7"}, "hour", "'7' is not an hour"),
        ({"hour": "-1"}, "hour", "not an hour"),
        ({"ts": TEN // 1000}, "ts", "(seconds, not milliseconds?)"),
        ({"ts": TEN * 1000}, "ts", "not epoch milliseconds between 2000-01-01 and 2100-01-01"),
        ({"ts": -1}, "ts", "not epoch milliseconds"),
        ({"ts": TEN + HOUR_MS + CLOCK_SKEW_MS}, "ts", "is after its partition log_date=2025-11-27 hour=10 ends"),
        ({"ts": TEN + 2 * HOUR_MS, "hour": "09"}, "ts", "2025-11-27 12:00:00 UTC"),
    ],
)
def test_a_bad_partition_field_is_named(changes, field, reason):
    with pytest.raises(EventValidationError) as info:
        encode(**changes)
    assert (info.value.event, info.value.field) == ("bet", field)
    assert str(info.value).startswith(f"event 'bet', field '{field}': ")
    assert reason in str(info.value)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"ts": TEN},  # the partition's first millisecond
        {"ts": TEN + HOUR_MS - 1},  # its last
        {"ts": TEN + HOUR_MS + CLOCK_SKEW_MS - 1},  # a producer clock slightly ahead
        {"ts": TEN - 3 * 24 * HOUR_MS},  # a late event: three days later, in today's partition
        {"log_date": "2024-02-29", "hour": "23", "ts": 1_709_251_199_000},  # leap day
        {"log_date": "2031-07-04", "hour": "00", "ts": 1_940_889_600_000},  # a date no other test used
    ],
)
def test_valid_partition_fields_encode_identically_on_both_paths(changes):
    record = {**GOOD, **changes}
    version = default_registry.get("bet", 1)
    values = [record.get(name, MISSING) for name in PayloadValidator(version).names]
    reference = PayloadValidator(version).validate(values)
    fast = compile_fast_encoder(version)(values)
    assert fast is not None, "valid partition fields take the fast path"
    assert fast[0] == reference and fast[1] == json.dumps(reference, ensure_ascii=False, separators=(",", ":"))
    assert json.loads(encode(**changes))["payload"] == reference


@pytest.mark.parametrize("changes", [{"log_date": "2025-02-30"}, {"hour": "24"}, {"ts": 5}, {"ts": TEN + 2 * HOUR_MS}])
def test_the_fast_path_leaves_every_bad_value_to_the_reference_path(changes):
    version = default_registry.get("bet", 1)
    record = {**GOOD, **changes}
    values = [record.get(name, MISSING) for name in PayloadValidator(version).names]
    assert compile_fast_encoder(version)(values) is None


def test_dict_records_get_the_same_checks():
    with pytest.raises(EventValidationError, match="field 'hour'"):
        EnvelopeEncoder().encode({**GOOD, "hour": "25"})
