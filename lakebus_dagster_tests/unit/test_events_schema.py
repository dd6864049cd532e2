"""Schema derivation: the seed schemas exactly, type mapping, and refusal of unsupported types."""

from __future__ import annotations

import json
from dataclasses import dataclass, make_dataclass
from typing import Annotated, Optional, Union

import pytest

from lakebus_dagster.events import (
    Bet,
    BetV2,
    ConnectType,
    EventBase,
    Float32,
    Int32,
    Recharge,
    RechargeV2,
    SchemaError,
    default_registry,
    derive_schema,
)

BASE_FIELDS = [
    {"field": "category", "type": "string"},
    {"field": "event", "type": "string"},
    {"field": "log_date", "type": "string"},
    {"field": "hour", "type": "string"},
    {"field": "plat_id", "type": "int32"},
    {"field": "app_id", "type": "int32"},
    {"field": "ts", "type": "int64"},
    {"field": "schema_version", "type": "int32"},
]

SEED_BET_SCHEMA = json.loads(
    '{"type":"struct","name":"bet_record","fields":[{"field":"category","type":"string"},'
    '{"field":"event","type":"string"},{"field":"log_date","type":"string"},'
    '{"field":"hour","type":"string"},{"field":"plat_id","type":"int32"},'
    '{"field":"app_id","type":"int32"},{"field":"ts","type":"int64"},'
    '{"field":"schema_version","type":"int32"},{"field":"user_id","type":"int32","optional":true},'
    '{"field":"order_id","type":"string","optional":true},'
    '{"field":"amount","type":"double","optional":true},'
    '{"field":"currency","type":"string","optional":true},'
    '{"field":"game_id","type":"int32","optional":true}]}'
)


def test_bet_schema_matches_seed_exactly() -> None:
    schema = default_registry.get("bet", 1).schema.to_json()
    assert schema == SEED_BET_SCHEMA
    # Field order is part of the contract (base fields first, then declaration order).
    assert [f["field"] for f in schema["fields"]] == [f["field"] for f in SEED_BET_SCHEMA["fields"]]


def test_recharge_schema_matches_seed_exactly() -> None:
    optional = [
        ("status", "string"),
        ("user_id", "int32"),
        ("order_id", "string"),
        ("amount", "double"),
        ("currency", "string"),
        ("reason", "string"),
    ]
    assert default_registry.get("recharge", 1).schema.to_json() == {
        "type": "struct",
        "name": "recharge_record",
        "fields": BASE_FIELDS + [{"field": n, "type": t, "optional": True} for n, t in optional],
    }


def test_required_fields_omit_the_optional_key() -> None:
    fields = derive_schema("bet", Bet).to_json()["fields"]
    assert all("optional" not in f for f in fields[:8])


@dataclass(frozen=True, slots=True, kw_only=True)
class AllTypes(EventBase):
    a_bool: bool
    a_int: int
    a_int32: Int32
    a_float: float
    a_float32: Float32
    a_str: str
    opt_pipe: Int32 | None = None
    opt_typing: Optional[float] = None  # noqa: UP045 - both spellings must work
    opt_union: Union[str, None] = None  # noqa: UP007
    opt_inside_annotated: Annotated[Optional[int], ConnectType.INT32] = None  # noqa: UP045


def test_type_mapping() -> None:
    own = derive_schema("all_types", AllTypes).to_json()["fields"][8:]
    assert own == [
        {"field": "a_bool", "type": "boolean"},
        {"field": "a_int", "type": "int64"},
        {"field": "a_int32", "type": "int32"},
        {"field": "a_float", "type": "double"},
        {"field": "a_float32", "type": "float"},
        {"field": "a_str", "type": "string"},
        {"field": "opt_pipe", "type": "int32", "optional": True},
        {"field": "opt_typing", "type": "double", "optional": True},
        {"field": "opt_union", "type": "string", "optional": True},
        {"field": "opt_inside_annotated", "type": "int32", "optional": True},
    ]


def test_schema_name_is_event_record() -> None:
    assert derive_schema("all_types", AllTypes).name == "all_types_record"


@dataclass(frozen=True)
class Nested:
    x: int


def _model(annotation: object) -> type[EventBase]:
    """A model ``Broken`` with one field ``bad`` of the given (evaluated or string) annotation."""
    return make_dataclass(
        "Broken", [("bad", annotation)], bases=(EventBase,), frozen=True, slots=True, kw_only=True
    )


@pytest.mark.parametrize(
    "annotation",
    [
        Nested,
        list[int],
        dict[str, int],
        Optional[list[str]],  # noqa: UP045
        Union[int, str],  # noqa: UP007
        int | str | None,
        bytes,
        object,
        Annotated[str, ConnectType.INT32],  # marker on the wrong Python type
    ],
    ids=repr,
)
def test_unsupported_types_raise_naming_model_and_field(annotation: object) -> None:
    with pytest.raises(SchemaError) as exc_info:
        derive_schema("broken", _model(annotation))
    message = str(exc_info.value)
    assert "'broken'" in message and "Broken.bad" in message


def test_unresolvable_forward_reference_raises() -> None:
    with pytest.raises(SchemaError, match="cannot resolve type hints"):
        derive_schema("broken", _model("NoSuchType"))


def test_undecorated_subclass_is_refused() -> None:
    class Sneaky(Bet):
        extra: int  # not a dataclass field: would vanish silently

    with pytest.raises(SchemaError, match="must itself be decorated with @dataclass"):
        derive_schema("sneaky", Sneaky)


def test_non_model_is_refused() -> None:
    with pytest.raises(SchemaError, match="subclass of EventBase"):
        derive_schema("nested", Nested)
    with pytest.raises(SchemaError, match="subclass of EventBase"):
        derive_schema("base", EventBase)


def test_redeclared_base_field_is_refused() -> None:
    @dataclass(frozen=True, slots=True, kw_only=True)
    class Redeclared(EventBase):
        plat_id: str  # type: ignore[assignment]

    with pytest.raises(SchemaError, match=r"Redeclared\.plat_id redeclares base field 'plat_id'"):
        derive_schema("redeclared", Redeclared)


def test_recharge_model_is_the_registered_one() -> None:
    assert default_registry.get("recharge", 1).model is Recharge
    assert default_registry.get("bet", 1).model is Bet
    assert default_registry.get("recharge").model is RechargeV2
    assert default_registry.get("bet").model is BetV2


def test_version_2_types_money_and_time() -> None:
    """Version 2 adds the amount as a Connect Decimal and the event time as a Connect Timestamp."""
    for event in ("bet", "recharge"):
        added = default_registry.get(event).schema.to_json()["fields"][-2:]
        assert added == [
            {"field": "amount_decimal", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
             "parameters": {"scale": "2", "connect.decimal.precision": "18"}, "optional": True},
            {"field": "event_time", "type": "int64", "name": "org.apache.kafka.connect.data.Timestamp", "version": 1,
             "optional": True},
        ]
