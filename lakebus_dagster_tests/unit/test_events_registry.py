"""Registry: routes, version rules and the schema-evolution refusals."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from lakebus_dagster.events import (
    Bet,
    EnvelopeEncoder,
    EventBase,
    EventRegistry,
    Int32,
    SchemaError,
    UnknownEventError,
    default_registry,
    routes,
    table_name,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Deposit(EventBase):
    user_id: Int32
    amount: float | None = None
    channel: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DepositV2(Deposit):
    """Compatible: adds an optional field."""

    bonus: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DepositWithoutChannel(EventBase):
    user_id: Int32
    amount: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DepositAmountAsString(EventBase):
    user_id: Int32
    amount: str | None = None
    channel: str | None = None
    bonus: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DepositChannelRequired(EventBase):
    user_id: Int32
    amount: float | None = None
    channel: str
    bonus: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DepositUserOptional(EventBase):
    user_id: Int32 | None = None
    amount: float | None = None
    channel: str | None = None
    bonus: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DepositNewRequired(Deposit):
    bonus: float


@dataclass(frozen=True, slots=True, kw_only=True)
class DepositSame(Deposit):
    pass


@pytest.fixture
def registry() -> EventRegistry:
    registry = EventRegistry()
    registry.register("deposit", Deposit)
    return registry


def test_default_routes() -> None:
    assert routes() == {"bet": "demo.dwd_biz_bet", "recharge": "demo.dwd_biz_recharge"}
    assert default_registry.routes(namespace="prod") == {
        "bet": "prod.dwd_biz_bet",
        "recharge": "prod.dwd_biz_recharge",
    }
    assert table_name("bet") == "demo.dwd_biz_bet"


def test_lookups(registry: EventRegistry) -> None:
    v1 = registry.get("deposit")
    assert (v1.event, v1.version, v1.model, v1.schema.name) == ("deposit", 1, Deposit, "deposit_record")
    assert registry.for_model(Deposit) is v1
    assert registry.events() == ("deposit",)
    with pytest.raises(UnknownEventError, match="'withdraw'.*not registered"):
        registry.get("withdraw")
    with pytest.raises(UnknownEventError, match="schema_version"):
        registry.get("deposit", 2)
    with pytest.raises(UnknownEventError, match="not a registered event model"):
        registry.for_model(Bet)


def test_evolution_with_optional_field_is_accepted(registry: EventRegistry) -> None:
    v2 = registry.register("deposit", DepositV2, version=2)
    assert v2.schema.to_json()["fields"][-1] == {"field": "bonus", "type": "double", "optional": True}
    assert [v.version for v in registry.versions("deposit")] == [1, 2]
    assert registry.get("deposit") is v2
    assert registry.get("deposit", 1).model is Deposit

    # Old producers keep encoding with the version-1 schema; new ones get version 2.
    encoder = EnvelopeEncoder(registry)
    base = dict(category="biz", event="deposit", log_date="2025-11-25", hour="18",
                plat_id=1, app_id=10406, ts=1732527602000, user_id=7)
    old = json.loads(encoder.encode(Deposit(**base, schema_version=1, amount=5.0)))
    new = json.loads(encoder.encode(DepositV2(**base, schema_version=2, bonus=1.5)))
    assert old["schema"] == registry.get("deposit", 1).schema.to_json()
    assert "bonus" not in old["payload"]
    assert new["schema"]["fields"][-1]["field"] == "bonus"
    assert new["payload"]["bonus"] == 1.5
    # ... and as plain dicts, selected by their schema_version.
    assert json.loads(encoder.encode({**base, "schema_version": 1}))["schema"] == old["schema"]


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (DepositWithoutChannel, "field 'channel' was removed: the Iceberg sink cannot drop a column"),
        (DepositAmountAsString, "field 'amount' changes type double -> string"),
        (DepositChannelRequired, "field 'channel' becomes required"),
        (DepositUserOptional, "field 'user_id' becomes optional"),
        (DepositNewRequired, "new field 'bonus' must be optional"),
        (DepositSame, "must add at least one optional field"),
    ],
)
def test_incompatible_versions_are_refused(
    registry: EventRegistry, model: type[EventBase], message: str
) -> None:
    with pytest.raises(SchemaError, match="event 'deposit': incompatible new version") as exc_info:
        registry.register("deposit", model, version=2)
    assert message in str(exc_info.value)
    assert registry.get("deposit").version == 1  # nothing registered


def test_all_problems_are_reported_together(registry: EventRegistry) -> None:
    with pytest.raises(SchemaError) as exc_info:
        registry.register("deposit", DepositWithoutChannel, version=2)
    message = str(exc_info.value)
    assert "'channel' was removed" in message and "at least one optional field" in message


@pytest.mark.parametrize("version", [1, 3, 0, "2", True])
def test_version_must_be_previous_plus_one(registry: EventRegistry, version: object) -> None:
    with pytest.raises(SchemaError, match="expected 2 .latest is 1.; versions go up by exactly 1"):
        registry.register("deposit", DepositV2, version=version)  # type: ignore[arg-type]


def test_new_event_starts_at_version_1() -> None:
    with pytest.raises(SchemaError, match="expected 1 .it is not registered yet."):
        EventRegistry().register("deposit", Deposit, version=2)


def test_model_registered_once(registry: EventRegistry) -> None:
    with pytest.raises(SchemaError, match="already registered as 'deposit' version 1"):
        registry.register("deposit_copy", Deposit)


@pytest.mark.parametrize("name", ["", "Bet", "bet-v2", "1bet", "bet.x", None])
def test_event_name_must_be_a_table_identifier(name: object) -> None:
    with pytest.raises(SchemaError, match="name must match"):
        EventRegistry().register(name, Deposit)  # type: ignore[arg-type]


def test_unsupported_type_refused_at_registration() -> None:
    @dataclass(frozen=True, slots=True, kw_only=True)
    class WithNested(EventBase):
        items: list[int] | None = None

    registry = EventRegistry()
    with pytest.raises(SchemaError, match=r"event 'cart': field WithNested\.items: unsupported type"):
        registry.register("cart", WithNested)
    assert registry.events() == ()
