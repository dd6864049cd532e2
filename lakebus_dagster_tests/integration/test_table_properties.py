"""The metadata-bounding table properties on the real stack: the sink creates ODS tables with them,
the catalog then keeps at most ``previous-versions-max`` old ``metadata.json`` files however many
commits the sink makes, and provisioning gives them to tables created before they existed.

The expected values are written out here, not imported from bus/table_properties.py.
"""

from __future__ import annotations

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster.definitions import defs
from lakebus_dagster.events import Bet, EventProducer
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.lake.dws import dws_namespace

from .helpers import metadata_json_files, wait_for

#: any profile (it counts one table's metadata files): in the default stack's integration stage (the
#: cluster stage carried it to balance make test's lanes until its failover test grew, stop 14)
pytestmark = [pytest.mark.integration]

BOUNDS = {
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "50",
    "history.expire.max-snapshot-age-ms": "1080000",
    "history.expire.min-snapshots-to-keep": "100",
    "commit.retry.num-retries": "10",
}
#: sink commits (snapshots) to wait for: more than previous-versions-max + 1, so without the
#: catalog deleting old versions there would be more metadata.json files than the bound allows
COMMITS = 65
#: the current file + 50 previous versions, + a few for a commit in flight while we list
MAX_METADATA_FILES = 50 + 1 + 4
#: a 1 s commit interval for this bus (not the tests' 2 s): 65 commits in ~65 s instead of ~130 s
COMMIT_INTERVAL_MS = 1000
COMMITS_DEADLINE_S = 420.0


def _run(suffix: str):
    resources = {**build_resources(), "layout": BusLayoutResource(name_suffix=suffix, commit_interval_ms=COMMIT_INTERVAL_MS)}
    return defs.resolve_job_def("provision_lakebus").execute_in_process(resources=resources)


def _storage(result) -> dict[str, tuple[str, str]]:
    return {f"{o.kind}:{o.name}": (o.action.value, o.details) for o in result.output_for_node("ensure_storage")}


def _storage_metadata(result) -> dict:
    event = next(e for e in result.all_node_events if e.step_key == "ensure_storage" and e.is_successful_output)
    return {k: v.value for k, v in event.event_specific_data.metadata.items()}


def _bet(i: int) -> Bet:
    return Bet(category="biz", event="bet", log_date="2025-11-25", hour="18", plat_id=1, app_id=10406,
               ts=1732527602000 + i, schema_version=1, user_id=2001, order_id=f"tp{i}", amount=1.5,
               currency="BRL", game_id=777)


def _metadata_files(stack, location: str) -> list[str]:
    """Keys of ``<location>/metadata/*.metadata.json`` on the stack's S3."""
    return list(metadata_json_files(stack, location))


@pytest.fixture
def connector_cleanup(stack, run_id):
    layout = BusLayoutResource(name_suffix=run_id).layout()
    yield layout
    client = ConnectClient(stack.connect.urls[0])
    if client.exists(layout.connector_name):
        client.delete(layout.connector_name)
    client.close()


def test_sink_created_tables_carry_the_bounds_and_keep_metadata_bounded(stack, run_id, connector_cleanup, wait_for_rows):
    layout = connector_cleanup
    bet_table = layout.routes["bet"]
    first = _run(run_id)
    # not created yet: reported, and left to the sink's auto-create props
    assert _storage(first)[f"table:{bet_table}"] == ("unchanged", "not created yet: gets the properties at creation")

    catalog = load_catalog(stack)
    with EventProducer(layout.bus_topic.name, {"bootstrap.servers": stack.kafka.bootstrap_servers}) as producer:
        producer.send(_bet(0))
        producer.flush()
        wait_for_rows(catalog, bet_table, 1, connector=layout.connector_name)
        live = catalog.load_table(bet_table).properties
        assert {k: live.get(k) for k in BOUNDS} == BOUNDS, live

        # keep data flowing so that every commit interval makes a snapshot (the sink skips empty commits)
        sent = 1

        def enough_commits() -> int | bool:
            nonlocal sent
            producer.send(_bet(sent))
            producer.flush()
            sent += 1
            n = len(catalog.load_table(bet_table).snapshots())
            return n >= COMMITS and n

        snapshots = wait_for(enough_commits, f"{COMMITS} sink commits on {bet_table}", COMMITS_DEADLINE_S, interval=0.5)

    table = catalog.load_table(bet_table)
    files = _metadata_files(stack, table.location())
    assert files, f"no metadata.json under {table.location()}/metadata/ (wrong prefix?)"
    assert len(files) <= MAX_METADATA_FILES, (
        f"{len(files)} metadata.json files after {snapshots} snapshots: the catalog did not delete old versions "
        f"(rest-catalog.log: 'Encountered failure when deleting batch' = the object store refused the bulk delete)"
    )
    assert len(table.metadata.metadata_log) <= 50

    # the sink-created table already matches: provisioning reports it unchanged
    assert _storage(_run(run_id))[f"table:{bet_table}"][0] == "unchanged"


def test_tables_created_before_the_bounds_get_them_on_the_next_provisioning(stack, run_id, connector_cleanup):
    layout = connector_cleanup
    catalog = load_catalog(stack)
    ods_namespace = layout.namespaces[0]
    old_ods = layout.routes["recharge"]  # the sink never writes it here: no recharge is sent
    old_dws = f"{dws_namespace(ods_namespace)}.dws_biz_bet_hour"
    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False))
    for name in (old_ods, old_dws):
        catalog.create_namespace_if_not_exists(name.split(".", 1)[0])
        catalog.create_table(name, schema, properties={"owner": "before-the-bounds"})
        assert not set(BOUNDS) & set(catalog.load_table(name).properties)

    first = _run(run_id)
    outcomes = _storage(first)
    metadata = _storage_metadata(first)
    for name in (old_ods, old_dws):
        action, details = outcomes[f"table:{name}"]
        assert action == "updated", (name, action, details)
        for key, value in BOUNDS.items():
            assert f"{key}: (unset) -> {value}" in details
        assert "write.metadata.previous-versions-max" in metadata[f"diff table {name}"]
        live = catalog.load_table(name).properties  # read back from the catalog
        assert {k: live.get(k) for k in BOUNDS} == BOUNDS and live["owner"] == "before-the-bounds"
    assert outcomes[f"table:{layout.routes['bet']}"][0] == "unchanged"  # not created yet

    second = _storage(_run(run_id))
    assert {action for action, _ in second.values()} == {"unchanged"}, second
