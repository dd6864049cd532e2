"""Change capture declared in the config file (``capture:``): parsing, errors naming the field, the
demo's declaration by default, the assets built from a declaration (two databases, keys other than
``id``, lineage captured table → change table → current state), and ``cdc_current_state_sensor``'s
decision (snapshots seen vs cursor → run requests) and its shipped status."""

from __future__ import annotations

from dataclasses import replace

import dagster as dg
import pytest
import yaml

from lakebus_dagster import config_file
from lakebus_dagster.cdc import demo
from lakebus_dagster.cdc.capture import CaptureError
from lakebus_dagster.capture_declaration import DeclarationError, DeclaredTable, capture_mappings, parse_capture
from lakebus_dagster.defs.asset_keys import cdc_change_key, cdc_current_key, cdc_source_key
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.cdc.sensors import decide

TWO = {"databases": [
    {"name": "shop", "schemas": {"app": {"users": {"key": ["id"], "changed_at": "updated_at"},
                                         "orders": {"key": "id", "changed_at": "updated_at"}}}},
    {"name": "billing", "host": "billing-db.internal", "port": 5433, "database": "billing", "user": "cdc_billing",
     "password_var": "LAKEBUS_BILLING_DB_PASSWORD", "schemas": {
         "ledger": {"invoices": {"key": ["tenant", "invoice_no"], "changed_at": "modified"}},
         "crm": {"accounts": {"key": "account_code"}}}},
]}


def _settings(tmp_path, body, enabled=True):
    from lakebus_dagster.settings import load_settings

    path = tmp_path / "lakebus.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    loaded = config_file.read(path)
    settings = load_settings()
    return replace(settings, deployment_file=loaded, capture=replace(settings.capture, enabled=enabled)), loaded


def test_a_declaration_parses_databases_schemas_tables_keys_and_change_time_columns():
    shop, billing = parse_capture(TWO)
    assert shop.tables == (DeclaredTable("app", "users", ("id",), "updated_at"), DeclaredTable("app", "orders", ("id",), "updated_at"))
    assert billing.schemas == ("ledger", "crm") and billing.port == 5433 and billing.password_var == "LAKEBUS_BILLING_DB_PASSWORD"
    assert billing.tables[0].key == ("tenant", "invoice_no") and billing.tables[1].changed_at == ""
    # a database with two schemas is two captures, each with its own slot and source
    mappings = capture_mappings((shop, billing), host="h", port=1, database="d", user="u", namespace="prod_cdc")
    assert [(m["name"], m["schema"], m["host"], m["database"]) for m in mappings] == [
        ("shop", "app", "h", "d"), ("billing_ledger", "ledger", "billing-db.internal", "billing"),
        ("billing_crm", "crm", "billing-db.internal", "billing")]
    assert mappings[1]["keys"] == {"invoices": "tenant,invoice_no"} and mappings[1]["changed_at"] == {"invoices": "modified"}


@pytest.mark.parametrize("body, field", [
    ({"database": []}, "capture.database "),
    ({"databases": []}, "capture.databases "),
    ({"databases": [{"schemas": {"app": {"t": {"key": "id"}}}}]}, "capture.databases[0].name "),
    ({"databases": [{"name": "Shop", "schemas": {"app": {"t": {"key": "id"}}}}]}, "capture.databases[0].name="),
    ({"databases": [{"name": "s", "port": 70000, "schemas": {"app": {"t": {"key": "id"}}}}]}, "capture.databases[0].port="),
    ({"databases": [{"name": "s", "password": "x", "schemas": {"app": {"t": {"key": "id"}}}}]}, "capture.databases[0].password "),
    ({"databases": [{"name": "s", "password_var": "secret!", "schemas": {"app": {"t": {"key": "id"}}}}]},
     "capture.databases[0].password_var="),
    ({"databases": [{"name": "s", "schemas": {"app": {"t": {"changed_at": "ts"}}}}]}, "capture.databases[0].schemas.app.t.key "),
    ({"databases": [{"name": "s", "schemas": {"app": {"t": {"key": []}}}}]}, "capture.databases[0].schemas.app.t.key="),
    ({"databases": [{"name": "s", "schemas": {"app": {"t": {"key": "id", "changed": "ts"}}}}]},
     "capture.databases[0].schemas.app.t.changed "),
    ({"databases": [{"name": "s", "schemas": {"app": {"t": {"key": "id", "changed_at": "Ts"}}}}]},
     "capture.databases[0].schemas.app.t.changed_at="),
    ({"databases": [{"name": "s", "schemas": {"app": {"lakebus_heartbeat": {"key": "id"}}}}]},
     "capture.databases[0].schemas.app.lakebus_heartbeat "),
    ({"databases": [{"name": "s", "schemas": {"app": {"t": {"key": "id"}}}},
                    {"name": "s", "schemas": {"app": {"u": {"key": "id"}}}}]}, "capture.databases[1].name="),
    ({"databases": [{"name": "s", "schemas": {"app": {"t": {"key": "id"}}}},
                    {"name": "r", "schemas": {"app": {"t": {"key": "id"}}}}]}, "capture.databases[1].schemas.app.t "),
])
def test_a_bad_declaration_is_refused_naming_the_field(body, field):
    with pytest.raises(DeclarationError) as caught:
        parse_capture(body)
    assert str(caught.value).startswith(field), str(caught.value)


def test_the_config_file_reports_a_bad_capture_section_as_one_problem_naming_the_field(tmp_path):
    path = tmp_path / "lakebus.yaml"
    path.write_text("capture:\n  databases:\n    - name: shop\n      schemas: {app: {users: {key: [Id]}}}\n")
    loaded = config_file.read(path)
    assert loaded.capture is None and len(loaded.problems) == 1
    assert "capture.databases[0].schemas.app.users.key[0]='Id'" in loaded.problems[0]


def test_without_a_capture_section_the_demo_declaration_applies(tmp_path):
    settings, loaded = _settings(tmp_path, {"maintenance": {"retention_days": 3}})
    assert loaded.capture is None
    (spec,) = ChangeCaptureResource.from_settings(settings).specs()
    assert (spec.name, spec.schema, spec.tables) == ("shop", demo.SCHEMA, demo.TABLES)
    assert spec.key_of("orders") == ("id",) and dict(spec.changed_at)["users"] == "updated_at"
    # the example file declares the same capture as the demo default
    from pathlib import Path

    example = config_file.read(Path(__file__).resolve().parents[2] / "lakebus.example.yaml")
    assert example.capture == parse_capture(demo.DECLARATION)


def test_assets_follow_the_declaration_two_databases_and_keys_other_than_id(tmp_path):
    from lakebus_dagster.definitions import build_definitions

    settings, _ = _settings(tmp_path, {"capture": TWO})
    resource = ChangeCaptureResource.from_settings(settings)
    specs = resource.specs()
    assert [s.name for s in specs] == ["shop", "billing_ledger", "billing_crm"]
    assert resource.spec_for("ledger", "invoices").key_of("invoices") == ("tenant", "invoice_no")
    assert specs[1].source_config()["database.password"] == "${env:LAKEBUS_BILLING_DB_PASSWORD}"
    with pytest.raises(CaptureError, match="app.payments is not a captured table"):
        resource.spec_for("app", "payments")
    defs = build_definitions(settings)
    dg.Definitions.validate_loadable(defs)
    graph = defs.get_repository_def().asset_graph
    for capture, schema, table in (("shop", "app", "users"), ("shop", "app", "orders"), ("billing_ledger", "ledger", "invoices"),
                                   ("billing_crm", "crm", "accounts")):
        current, change, source = cdc_current_key(schema, table), cdc_change_key(schema, table), cdc_source_key(capture, schema, table)
        assert graph.get(current).parent_keys == {change}, current
        assert graph.get(change).parent_keys == {source}, change
        assert graph.get(current).is_materializable and not graph.get(change).is_materializable
    job = defs.resolve_job_def("cdc_current_state")
    assert set(job.asset_layer.executable_asset_keys) == {cdc_current_key(s, t) for s, t in (
        ("app", "users"), ("app", "orders"), ("ledger", "invoices"), ("crm", "accounts"))}
    # the sensor ships on with capture on, and is absent with it off
    assert defs.resolve_sensor_def("cdc_current_state_sensor").default_status == dg.DefaultSensorStatus.RUNNING
    off, _ = _settings(tmp_path, {"capture": TWO}, enabled=False)
    assert "cdc_current_state_sensor" not in {s.name for s in build_definitions(off).get_repository_def().sensor_defs}


def test_the_sensor_requests_a_run_for_each_change_table_with_a_new_snapshot_and_one_in_flight_at_most():
    seen = {"ns.pg_app_users": 11, "ns.pg_app_orders": 20, "ns.pg_app_new": None}
    # first tick: every table with a snapshot
    requests, cursor = decide(seen, {}, set())
    assert requests == [("ns.pg_app_orders", 20), ("ns.pg_app_users", 11)]
    assert cursor == {"ns.pg_app_users": 11, "ns.pg_app_orders": 20}
    # nothing new: nothing
    assert decide(seen, cursor, set()) == ([], cursor)
    # users got a snapshot while its run is in flight: wait, the cursor keeps the old id; orders goes
    newer = {**seen, "ns.pg_app_users": 12, "ns.pg_app_orders": 21}
    requests, after = decide(newer, cursor, {"ns.pg_app_users"})
    assert requests == [("ns.pg_app_orders", 21)] and after["ns.pg_app_users"] == 11
    # the run finished: the next tick asks for users
    requests, after = decide(newer, after, set())
    assert requests == [("ns.pg_app_users", 12)] and after == {"ns.pg_app_users": 12, "ns.pg_app_orders": 21}
    # a table no longer declared leaves the cursor
    assert decide({"ns.pg_app_orders": 21}, after, set()) == ([], {"ns.pg_app_orders": 21})


def test_the_sensor_tick_reads_the_catalog_and_skips_tables_in_flight():
    import json

    from lakebus_dagster.defs.cdc.sensors import CHANGE_TABLE_TAG, cdc_current_state_sensor
    from lakebus_dagster.defs.resources import IcebergCatalogResource

    class Snap:
        def __init__(self, sid):
            self.snapshot_id = sid

    class Table:
        def __init__(self, sid):
            self.sid = sid

        def current_snapshot(self):
            return Snap(self.sid) if self.sid else None

    class Catalog:
        def load_table(self, name):
            return Table({"demo_cdc.pg_app_users": 5, "demo_cdc.pg_app_orders": 7}[name])

    class FakeIceberg(IcebergCatalogResource):
        def load(self):
            return Catalog()

    instance = dg.DagsterInstance.ephemeral()
    resources = {"capture": ChangeCaptureResource(enabled=True), "iceberg": FakeIceberg(
        catalog_uri="http://catalog.invalid", warehouse="s3://w/", s3_endpoint="http://s3.invalid", access_key_id="k",
        secret_access_key="s")}
    with dg.build_sensor_context(instance=instance, resources=resources) as ctx:
        result = cdc_current_state_sensor(ctx)
        cursor = ctx.cursor
    assert sorted(r.tags[CHANGE_TABLE_TAG] for r in result) == ["demo_cdc.pg_app_orders", "demo_cdc.pg_app_users"]
    assert [r.asset_selection for r in result if r.tags[CHANGE_TABLE_TAG].endswith("users")] == [[cdc_current_key("app", "users")]]
    assert json.loads(cursor) == {"demo_cdc.pg_app_orders": 7, "demo_cdc.pg_app_users": 5}
    with dg.build_sensor_context(instance=instance, resources=resources, cursor=cursor) as ctx:
        assert isinstance(cdc_current_state_sensor(ctx), dg.SkipReason)
