"""The config file's ``events:`` section: a team's event type is one entry, checked with one line per
problem, and becomes a model the registry, the routes, the sink's guard and the encoder all use."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lakebus_dagster.bus.desired import sink_connector_config
from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.config_file import read
from lakebus_dagster.defs.resources import IcebergCatalogResource
from lakebus_dagster.event_declaration import BASE_FIELDS, FIELD_TYPES, parse_events
from lakebus_dagster.events import Bet, EnvelopeEncoder, EventRegistry, EventValidationError, Recharge, SchemaError
from lakebus_dagster.events.declared import register_declared
from lakebus_dagster.events.models import EventBase
from lakebus_dagster.events.types import ConnectType

WITHDRAWAL = {"withdrawal": {"fields": {"user_id": "int32", "order_id": "string", "amount": "double", "fee": "float",
                                        "seq": "int64", "approved": "boolean"}}}


def _registry(declared=WITHDRAWAL) -> EventRegistry:
    registry = EventRegistry()
    registry.register("bet", Bet)
    registry.register("recharge", Recharge)
    register_declared(registry, parse_events(declared))
    return registry


def test_the_declarable_types_are_the_connect_types_and_the_base_fields_are_events():
    assert set(FIELD_TYPES) - {"decimal(p,s)"} == {t.value for t in ConnectType} - {"decimal"}
    assert BASE_FIELDS == tuple(EventBase.__dataclass_fields__)


def test_a_declared_event_has_its_schema_route_guard_and_encoding():
    registry = _registry()
    version = registry.get("withdrawal")
    assert version.version == 1 and version.model.__name__ == "Withdrawal"
    own = {f.name: (f.type.value, f.optional) for f in version.schema.fields if f.name not in BASE_FIELDS}
    assert own == {"user_id": ("int32", True), "order_id": ("string", True), "amount": ("double", True),
                   "fee": ("float", True), "seq": ("int64", True), "approved": ("boolean", True)}
    layout = BusLayout.default(routes=registry.routes("demo"))
    cfg = sink_connector_config(layout, IcebergCatalogResource(
        catalog_uri="http://c", warehouse="s3://w/", s3_endpoint="http://s", access_key_id="a", secret_access_key="b"),
        registry=registry)
    assert cfg["iceberg.table.demo.dwd_biz_withdrawal.route-regex"] == "^withdrawal$"
    assert "withdrawal" in json.dumps(cfg)  # the guard's contract names it
    event = version.model(category="biz", event="withdrawal", log_date="2025-11-27", hour="10", plat_id=1, app_id=2,
                          ts=1764237600000, schema_version=1, user_id=7, amount=2.5, approved=True)
    payload = json.loads(EnvelopeEncoder(registry).encode(event))["payload"]
    assert payload["amount"] == 2.5 and payload["approved"] is True and payload["order_id"] is None


def test_a_declared_field_is_validated_like_a_built_in_one():
    registry = _registry()
    bad = registry.get("withdrawal").model(category="biz", event="withdrawal", log_date="2025-11-27", hour="10",
                                           plat_id=1, app_id=2, ts=1764237600000, schema_version=1, user_id="7")
    with pytest.raises(EventValidationError, match="user_id"):
        EnvelopeEncoder(registry).encode(bad)


@pytest.mark.parametrize(("body", "message"), [
    ({"Withdrawal": {"fields": {"a": "string"}}}, r"events\.Withdrawal: an event name must match"),
    ({"withdrawal": {"fields": {}}}, r"events\.withdrawal\.fields must name at least one field"),
    ({"withdrawal": {"fields": {"amount": "decimal"}}}, r"events\.withdrawal\.fields\.amount: type 'decimal' is not one of"),
    ({"withdrawal": {"fields": {"ts": "int64"}}}, r"events\.withdrawal\.fields\.ts: a base field of every event"),
    ({"withdrawal": {"fields": {"Amount": "double"}}}, r"events\.withdrawal\.fields\.Amount: a field name must match"),
    ({"withdrawal": {"columns": {"a": "string"}}}, r"events\.withdrawal must be \{fields:"),
    (["withdrawal"], r"events must be a mapping"),
])
def test_every_bad_declaration_is_one_line_naming_its_key(body, message):
    with pytest.raises(ValueError, match=message):
        parse_events(body)


def test_a_declaration_cannot_redefine_a_built_in_event():
    with pytest.raises(SchemaError, match=r"events\.bet is already an event of lakebus"):
        _registry({"bet": {"fields": {"x": "string"}}})


def test_the_config_file_carries_the_declaration_and_names_a_problem(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("events:\n  withdrawal:\n    fields: {amount: double}\n")
    assert read(good).events == parse_events({"withdrawal": {"fields": {"amount": "double"}}})
    bad = tmp_path / "bad.yaml"
    bad.write_text("events:\n  withdrawal:\n    fields: {amount: money}\n")
    loaded = read(bad)
    assert loaded.events == () and len(loaded.problems) == 1
    assert f"{bad}: events.withdrawal.fields.amount: type 'money'" in loaded.problems[0]


def test_the_code_location_loaded_from_the_file_has_the_event_its_route_and_its_ods_asset(tmp_path):
    """In a fresh process, as a deployment loads it (the registry is built when it is imported)."""
    config = tmp_path / "lakebus.yaml"
    config.write_text("events:\n  withdrawal:\n    fields: {user_id: int32, amount: double}\n")
    probe = ("import warnings; warnings.simplefilter('ignore')\n"
             "from lakebus_dagster.definitions import defs\n"
             "from lakebus_dagster.bus.layout import BusLayout\n"
             "keys = {k.to_user_string() for k in defs.get_repository_def().asset_graph.get_all_asset_keys()}\n"
             "print(BusLayout.default().routes['withdrawal'], 'ods/dwd_biz_withdrawal' in keys)\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "LAKEBUS_CONFIG": str(config), "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["demo.dwd_biz_withdrawal", "True"], proc.stdout


def test_the_example_files_commented_declaration_is_valid(tmp_path):
    from pathlib import Path

    example = (Path(__file__).parents[2] / "lakebus.example.yaml").read_text()
    block = example[example.index("# events:"):].splitlines()
    uncommented = "\n".join(line[2:] for line in block if line.startswith("# "))
    path = tmp_path / "events.yaml"
    path.write_text(uncommented + "\n")
    loaded = read(path)
    assert loaded.problems == () and [e.name for e in loaded.events] == ["withdrawal"], loaded
