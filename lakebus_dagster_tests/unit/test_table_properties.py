"""The metadata-bounding table properties (bus/table_properties.py): on the sink's auto-created ODS
tables, in the DWS tables' DDL, and reconciled onto existing tables by provisioning — against a
real pyiceberg ``SqlCatalog`` on SQLite (no services).

The expected values are written out here, not imported from the module under test: a changed
value must change this file too.
"""

from __future__ import annotations

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from lakebus_dagster.bus.desired import sink_connector_config
from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.bus.table_properties import METADATA_BOUNDS
from lakebus_dagster.defs.provisioning.jobs import _lake_tables
from lakebus_dagster.defs.resources import IcebergCatalogResource
from lakebus_dagster.lake.dws import BET_HOUR, USER_DAY, create_table_sql
from lakebus_dagster.provision import Action
from lakebus_dagster.provision.storage import reconcile_table_properties

#: what every new lake table is created with, and what provisioning reconciles (the last five)
EXPECTED_BOUNDS = {
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "50",
    "history.expire.max-snapshot-age-ms": "1080000",
    "history.expire.min-snapshots-to-keep": "100",
    "commit.retry.num-retries": "10",
}
EXPECTED_FORMAT = {"format-version": "2", "write.parquet.compression-codec": "zstd"}

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False))


def _sink_config() -> dict[str, str]:
    catalog = IcebergCatalogResource(
        catalog_uri="http://catalog:8181", warehouse="s3://lake/", s3_endpoint="http://s3:9000",
        region="us-east-1", access_key_id="unused", secret_access_key="unused",
    )
    return sink_connector_config(BusLayout.default(), catalog)


def test_the_sink_creates_ods_tables_with_the_format_and_the_metadata_bounds():
    cfg = _sink_config()
    auto = {k.removeprefix("iceberg.tables.auto-create-props."): v for k, v in cfg.items()
            if k.startswith("iceberg.tables.auto-create-props.")}
    assert auto == {**EXPECTED_FORMAT, **EXPECTED_BOUNDS}


def test_dws_tables_are_created_with_the_format_and_the_metadata_bounds():
    for spec in (BET_HOUR, USER_DAY):
        sql = create_table_sql(spec, "lake.demo_dws.x")
        for key, value in {**EXPECTED_FORMAT, **EXPECTED_BOUNDS}.items():
            assert f"'{key}'='{value}'" in sql, (spec.name, key)
        assert "'write.merge.mode'='copy-on-write'" in sql  # the DWS-only properties stay


def test_provisioning_reconciles_exactly_the_bounds():
    """format-version is table metadata, not a property one can set later: never reconciled."""
    assert dict(METADATA_BOUNDS) == EXPECTED_BOUNDS


def test_provisioning_covers_every_ods_and_dws_table_of_the_bus():
    assert _lake_tables(BusLayout.default().routes) == [
        "demo.dwd_biz_bet", "demo.dwd_biz_recharge",
        "demo_dws.dws_biz_bet_hour", "demo_dws.dws_biz_recharge_hour", "demo_dws.dws_user_day",
    ]
    # a bus routing only bets has only the bet ODS table and the DWS table built from it
    assert _lake_tables({"bet": "x.dwd_biz_bet"}) == ["x.dwd_biz_bet", "x_dws.dws_biz_bet_hour"]


@pytest.fixture
def catalog(tmp_path) -> SqlCatalog:
    cat = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    cat.create_namespace("ods")
    return cat


def _by_name(outcomes) -> dict[str, tuple[Action, str]]:
    return {o.name: (o.action, o.details) for o in outcomes}


def test_reconcile_sets_the_properties_once_then_reports_unchanged(catalog):
    catalog.create_table("ods.old", SCHEMA, properties={"owner": "someone"})
    first = reconcile_table_properties(catalog, ["ods.old"], EXPECTED_BOUNDS)
    assert [(o.kind, o.name, o.action) for o in first] == [("table", "ods.old", Action.UPDATED)]
    assert set(first[0].changes) == {f"{k}: (unset) -> {v}" for k, v in EXPECTED_BOUNDS.items()}
    assert "write.metadata.previous-versions-max" in first[0].diff_markdown
    live = catalog.load_table("ods.old").properties  # read back from the catalog, not the outcome
    assert {k: live.get(k) for k in EXPECTED_BOUNDS} == EXPECTED_BOUNDS
    assert live["owner"] == "someone"  # other properties are left alone

    versions_before = len(catalog.load_table("ods.old").metadata.metadata_log)
    second = reconcile_table_properties(catalog, ["ods.old"], EXPECTED_BOUNDS)
    assert [(o.name, o.action) for o in second] == [("ods.old", Action.UNCHANGED)]
    assert len(catalog.load_table("ods.old").metadata.metadata_log) == versions_before  # no commit at all


def test_a_table_not_created_yet_is_reported_not_created(catalog):
    outcomes = _by_name(reconcile_table_properties(catalog, ["ods.absent", "nons.absent"], EXPECTED_BOUNDS))
    assert outcomes == {
        "ods.absent": (Action.UNCHANGED, "not created yet: gets the properties at creation"),
        "nons.absent": (Action.UNCHANGED, "not created yet: gets the properties at creation"),
    }
    assert not catalog.table_exists("ods.absent")  # reconciling creates nothing


def test_one_wrong_value_changes_exactly_that_key(catalog):
    catalog.create_table("ods.drifted", SCHEMA, properties={**EXPECTED_BOUNDS, "write.metadata.previous-versions-max": "7"})
    catalog.create_table("ods.right", SCHEMA, properties=EXPECTED_BOUNDS)
    outcomes = reconcile_table_properties(catalog, ["ods.right", "ods.drifted"], EXPECTED_BOUNDS)
    assert [(o.name, o.action, o.changes) for o in outcomes] == [
        ("ods.drifted", Action.UPDATED, ("write.metadata.previous-versions-max: 7 -> 50",)),
        ("ods.right", Action.UNCHANGED, ()),
    ]
    assert catalog.load_table("ods.drifted").properties["write.metadata.previous-versions-max"] == "50"


def test_the_bounds_keep_at_most_fifty_previous_metadata_files(catalog, tmp_path):
    """The keys are the ones an Iceberg implementation reads: pyiceberg's own commit path honours
    them like the Java catalog does (a misspelt key would leave every metadata.json behind)."""
    table = catalog.create_table("ods.busy", SCHEMA, properties=EXPECTED_BOUNDS)
    for i in range(60):
        with table.transaction() as tx:
            tx.set_properties(step=str(i))
    files = list((tmp_path / "wh").rglob("*.metadata.json"))
    assert len(files) == 51, len(files)  # the current one + 50 previous versions
