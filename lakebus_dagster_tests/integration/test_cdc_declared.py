"""Change capture declared in the config file, on the real stack: a capture of the test's own
(``shop_<run id>``) declared with one table; provisioned; then a second table (keyed by a text
column, not ``id``) added to the declaration and provisioning run again on the running capture —
the publication and the source's include list gain it and an incremental snapshot of that table
only brings its rows. Its current-state table exists right after provisioning (empty), then follows
the change table with nothing launched by hand: ``cdc_current_state_sensor`` evaluated by Dagster's
own tick machinery (``evaluate_tick``, as the daemon does) requests the run, which the test executes
as the daemon would. Every wait is a poll against a deadline.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace

import dagster as dg
import pytest
import yaml

from lakebus_dagster import config_file
from lakebus_dagster.cdc import demo
from lakebus_dagster.definitions import build_definitions
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.cdc.sensors import CDC_CURRENT_SENSOR, CHANGE_TABLE_TAG
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster.lake.catalog import load_catalog

from .helpers import TEST_COMMIT_INTERVAL_MS, wait_for
from .test_cdc_postgres import DEADLINE_S, _changes, remove_capture
from .test_cdc_watch import _sql

pytestmark = [pytest.mark.integration, pytest.mark.cdc]


def _declared(stack, tmp_path, run_id: str, tables: dict) -> tuple:
    """Settings whose config file declares ``tables`` (name -> {key, changed_at}) in the test's capture;
    the code location built from them; its capture resource (the test's commit interval)."""
    path = tmp_path / f"lakebus-{len(tables)}.yaml"
    path.write_text(yaml.safe_dump({"capture": {"databases": [
        {"name": f"shop_{run_id}", "namespace": f"demo_cdc_{run_id}", "schemas": {demo.SCHEMA: tables}}]}}))
    loaded = config_file.read(path)
    assert loaded.problems == (), loaded.problems
    settings = replace(stack, deployment_file=loaded)
    base = ChangeCaptureResource.from_settings(settings)
    resource = ChangeCaptureResource(**{**base.model_dump(), "commit_interval_ms": TEST_COMMIT_INTERVAL_MS})
    return build_definitions(settings), resource


def test_a_table_added_to_the_declaration_is_captured_and_its_current_state_follows_by_itself(stack, run_id, tmp_path):
    first, second = f"decl_a_{run_id}", f"decl_b_{run_id}"
    _sql(stack, (f"CREATE TABLE {demo.SCHEMA}.{first} (id bigint PRIMARY KEY, note text, updated_at timestamptz NOT NULL DEFAULT now())",),
         (f"CREATE TABLE {demo.SCHEMA}.{second} (sku text PRIMARY KEY, qty int NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())",),
         *[(f"ALTER TABLE {demo.SCHEMA}.{t} OWNER TO {demo.OWNER_ROLE}",) for t in (first, second)],
         *[(f"GRANT SELECT ON {demo.SCHEMA}.{t} TO {stack.capture.user}",) for t in (first, second)],
         (f"INSERT INTO {demo.SCHEMA}.{first} (id, note) VALUES (1, 'a'), (2, 'b')",),
         (f"INSERT INTO {demo.SCHEMA}.{second} (sku, qty) VALUES ('sku-1', 1), ('sku-2', 2), ('sku-3', 3)",))
    layout = BusLayoutResource(name_suffix=run_id, commit_interval_ms=TEST_COMMIT_INTERVAL_MS)
    one, resource = _declared(stack, tmp_path, run_id, {first: {"key": ["id"], "changed_at": "updated_at"}})
    spec = resource.spec()
    try:
        result = one.resolve_job_def("provision_change_capture").execute_in_process(
            resources={**build_resources(), "capture": resource, "layout": layout})
        assert result.success
        catalog = load_catalog(stack)
        wait_for(lambda: len(_changes(catalog, spec.change_table(first))) >= 2, f"{first}'s snapshot", DEADLINE_S)
        assert catalog.table_exists(spec.current_table(first)), "provisioning creates the current-state table"

        # the second table declared (keyed by sku); provisioning again, on the running capture
        two, resource = _declared(stack, tmp_path, run_id, {first: {"key": ["id"], "changed_at": "updated_at"},
                                                              second: {"key": "sku", "changed_at": "updated_at"}})
        spec = resource.spec()
        result = two.resolve_job_def("provision_change_capture").execute_in_process(
            resources={**build_resources(), "capture": resource, "layout": layout})
        assert result.success
        outcomes = {f"{o.kind}:{o.name}": o.action.value for o in result.output_for_node("ensure_capture_connectors")}
        assert outcomes.get(f"snapshot:{spec.source_name}:{spec.qualified(second)}") == "created", outcomes
        assert _sql(stack, ("SELECT count(*) FROM pg_publication_tables WHERE pubname = %s AND tablename = %s",
                            (spec.publication, second)))[0][0] == 1
        name = spec.change_table(second)
        snapshot = wait_for(lambda: (rows := _changes(catalog, name)) and len(rows) >= 3 and rows, f"{second}'s re-read", DEADLINE_S)
        assert {r["sku"] for r in snapshot} == {"sku-1", "sku-2", "sku-3"} and {r["__op"] for r in snapshot} == {"r"}, snapshot
        assert catalog.table_exists(spec.current_table(second))
        assert catalog.load_table(spec.current_table(second)).properties["lakebus.cdc.primary-key"] == "sku"

        # a change committed now reaches the current-state table through the sensor's ticks alone
        _sql(stack, (f"UPDATE {demo.SCHEMA}.{second} SET qty = 20, updated_at = now() WHERE sku = 'sku-2'",),
             (f"DELETE FROM {demo.SCHEMA}.{second} WHERE sku = 'sku-3'",),
             (f"INSERT INTO {demo.SCHEMA}.{second} (sku, qty) VALUES ('sku-4', 4)",))
        committed = time.monotonic()
        expected = {"sku-1": 1, "sku-2": 20, "sku-4": 4}
        instance, cursor, requested = dg.DagsterInstance.ephemeral(), None, []
        sensor = two.resolve_sensor_def(CDC_CURRENT_SENSOR)
        assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
        job = two.resolve_job_def("cdc_current_state")
        resources = {**build_resources(), "capture": resource}

        def current_state():
            nonlocal cursor
            with dg.build_sensor_context(cursor=cursor, instance=instance, definitions=two, sensor_name=CDC_CURRENT_SENSOR,
                                         resources=resources) as ctx:
                tick = sensor.evaluate_tick(ctx)
            cursor = tick.cursor
            for request in tick.run_requests or []:
                requested.append(request.tags[CHANGE_TABLE_TAG])
                # the run the daemon would launch: the job's subset of the requested asset, the request's tags
                run = job.get_subset(asset_selection=set(request.asset_selection))
                assert run.execute_in_process(resources=resources, instance=instance, tags=request.tags).success
            table = catalog.load_table(spec.current_table(second))
            rows = {r["sku"]: r["qty"] for r in table.scan().to_arrow().to_pylist()} if table.current_snapshot() else {}
            return rows == expected and rows

        wait_for(current_state, f"{second}'s current state {expected} through {CDC_CURRENT_SENSOR}'s ticks", DEADLINE_S, interval=2)
        print(f"seconds from the database commit to the current-state rows: {time.monotonic() - committed:.1f}")
        assert name in requested and spec.change_table(first) in requested, requested
        # a snapshot is requested once: the next tick asks only for a change table whose snapshot moved since
        # (the sink may still commit a late window of the incremental snapshot)
        before = json.loads(cursor)
        with dg.build_sensor_context(cursor=cursor, instance=instance, definitions=two, sensor_name=CDC_CURRENT_SENSOR,
                                     resources=resources) as ctx:
            again = sensor.evaluate_tick(ctx).run_requests or []
        assert all(int(r.run_key.rsplit("@", 1)[1]) != before.get(r.tags[CHANGE_TABLE_TAG]) for r in again), (before, again)
    finally:
        remove_capture(stack, spec)
        _sql(stack, *[(f"DROP TABLE IF EXISTS {demo.SCHEMA}.{t}",) for t in (first, second)])
