"""Change capture on the real stack (issue 30, items 1-3): the stack's own PostgreSQL
(``LAKEBUS_POSTGRES=on``), the real Debezium 3.6.1 source, the real Connect worker with the real
Iceberg sink, the REST catalog and S3.

One capture of the test's own (``shop_<run id>``: its slot, publication, topics, connectors and
change-table namespace) over the stack's demo tables, provisioned by ``provision_change_capture``
run in process — twice: the second run must report every object unchanged. Then the initial
snapshot, an insert, an update and a delete must land in the append-only change tables, typed
(decimal(12,2), timestamptz, date), and the state they add up to (the latest change per key, by
Kafka offset; deletes delete) must equal a query of the database itself — and so must the
current-state tables the PySpark MERGE assets build on the stack's Spark Connect server, run twice
(the second reads and changes nothing) and again after a later update and delete. Every wait is a
poll against a deadline.
"""

from __future__ import annotations

import json
import os
from contextlib import closing
from datetime import date, datetime, timezone
from decimal import Decimal

import psycopg2
import pytest
from pyiceberg.types import DateType, DecimalType, LongType, StringType, TimestamptzType

from lakebus_dagster.bus.provenance import OFFSET_COLUMN
from lakebus_dagster.cdc import demo
from lakebus_dagster.cdc.database import slot_status
from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster.definitions import defs
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.secret_env import POSTGRES_PASSWORD_VAR
from lakebus_dagster.stack.postgres_service import superuser_dsn

from lakebus_dagster_tests.cleanup import remove_capture

from .helpers import TEST_COMMIT_INTERVAL_MS, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.cdc]

#: the snapshot, the connectors' start and a few sink commits, on a shared 2-core machine
DEADLINE_S = 180.0
#: ids of the test's own rows, far above what the generator makes
BASE_ID = 9_000_000


@pytest.fixture
def capture(stack, run_id):
    """The test's capture resource and layout; afterwards its connectors, slot and publication go
    (the topics and the namespace carry the run id: the session's cleanup drops them)."""
    resource = capture_resource(stack, run_id)
    layout = BusLayoutResource(name_suffix=run_id, commit_interval_ms=TEST_COMMIT_INTERVAL_MS)
    yield resource, layout
    remove_capture(stack, resource.spec())


def capture_resource(stack, run_id: str, tables: tuple[str, ...] = demo.TABLES) -> ChangeCaptureResource:
    """A capture of the test's own (``shop_<run id>``) of ``tables`` in the stack's demo database."""
    if not stack.capture.enabled:
        pytest.fail("the cdc tests need LAKEBUS_POSTGRES=on (make test's cdc stage sets it)")
    # a new resource, not model_copy: Dagster builds a resource from its constructor's values
    base = ChangeCaptureResource.from_settings(stack)
    return ChangeCaptureResource(enabled=True, name=f"shop_{run_id}", host=base.host, port=base.port, database=base.database,
                                 user=base.user, namespace=f"demo_cdc_{run_id}", tables=list(tables),
                                 commit_interval_ms=TEST_COMMIT_INTERVAL_MS, exactly_once=base.exactly_once,
                                 signal_bootstrap=base.signal_bootstrap)


def _provision(resource: ChangeCaptureResource, layout: BusLayoutResource):
    job = defs.resolve_job_def("provision_change_capture")
    return job.execute_in_process(resources={**build_resources(), "capture": resource, "layout": layout})


def _outcomes(result) -> dict[str, str]:
    out = {}
    for op in ("ensure_capture_database", "ensure_change_tables", "ensure_capture_connectors"):
        out.update({f"{o.kind}:{o.name}": o.action.value for o in result.output_for_node(op)})
    return out


def _db_rows(stack, table: str) -> dict[int, dict]:
    with closing(psycopg2.connect(**superuser_dsn(stack, stack.capture.db))) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {demo.SCHEMA}.{table} ORDER BY id")
        names = [d[0] for d in cur.description]
        return {row[0]: dict(zip(names, row)) for row in cur.fetchall()}


def _changes(catalog, name: str) -> list[dict]:
    if not catalog.table_exists(name):
        return []
    table = catalog.load_table(name)
    if table.current_snapshot() is None:
        return []
    return table.scan().to_arrow().to_pylist()


def _state(changes: list[dict], columns: list[str]) -> dict[int, dict]:
    """The rows the changes add up to: the latest change per key by Kafka offset; deletes delete."""
    state: dict[int, dict] = {}
    for change in sorted(changes, key=lambda c: c[OFFSET_COLUMN]):
        if change["__deleted"] == "true":
            state.pop(change["id"], None)
        else:
            state[change["id"]] = {c: change[c] for c in columns}
    return state


def _normalised(rows: dict[int, dict], columns: list[str]) -> dict[int, tuple]:
    """Comparable values: timestamps as UTC instants, char(n) padding as the database keeps it."""
    def value(v):
        if isinstance(v, datetime):
            return v.astimezone(timezone.utc)
        return v

    return {k: tuple(value(r[c]) for c in columns) for k, r in rows.items()}


def test_snapshot_insert_update_delete_land_typed_in_the_change_tables(stack, capture):
    resource, layout = capture
    spec = resource.spec()
    catalog = load_catalog(stack)
    assert os.environ.get(POSTGRES_PASSWORD_VAR), "the stack's secrets export the capture role's password"

    # the test's own ids are free (an earlier run on this stack left its rows), before the capture starts
    with closing(psycopg2.connect(**superuser_dsn(stack, stack.capture.db))) as conn, conn, conn.cursor() as cur:
        for table in spec.tables:
            cur.execute(f"DELETE FROM {demo.SCHEMA}.{table} WHERE id >= %s", (BASE_ID,))
    # rows that exist before the capture starts: the initial snapshot must bring them
    demo.generate_changes(superuser_dsn(stack, stack.capture.db), 30, seed=30, mix=(0.8, 0.15, 0.05), progress=None)

    first = _provision(resource, layout)
    assert first.success
    outcomes = _outcomes(first)
    wanted = {f"connector:{spec.source_name}", f"connector:{spec.sink_name}", f"publication:{spec.publication}",
              # the topics explicitly (the broker's auto-create is off), the typed tables before any record
              *(f"topic:{spec.topic(t)}" for t in spec.tables), f"topic:{spec.heartbeat_topic.name}",
              *(f"table:{spec.change_table(t)}" for t in spec.tables)}
    assert {key: outcomes.get(key) for key in wanted} == dict.fromkeys(wanted, "created"), outcomes

    # typed from the database's catalog, before any record arrived
    orders = catalog.load_table(spec.change_table("orders")).schema()
    assert orders.find_field("amount").field_type == DecimalType(12, 2)
    assert orders.find_field("order_date").field_type == DateType()
    assert orders.find_field("updated_at").field_type == TimestamptzType()
    assert orders.find_field("id").field_type == LongType()
    assert orders.find_field("__op").field_type == StringType()

    # the initial snapshot: every row of the database as an op=r change
    snapshot = {t: _db_rows(stack, t) for t in spec.tables}

    def snapshot_landed():
        with ConnectClient(stack.connect.urls[0]) as client:
            for name in (spec.source_name, spec.sink_name):
                failed = [t for t in client.status(name).tasks if t.state == "FAILED"]
                assert not failed, f"{name} task FAILED: {failed[0].trace_summary}"
        counts = {t: sum(c["__op"] == "r" for c in _changes(catalog, spec.change_table(t))) for t in spec.tables}
        return all(counts[t] >= len(snapshot[t]) for t in spec.tables) and counts

    wait_for(snapshot_landed, f"the initial snapshot ({ {t: len(r) for t, r in snapshot.items()} } rows)", DEADLINE_S)

    # provisioning again changes nothing: no restart, no new publication, no retyped table
    second = _outcomes(_provision(resource, layout))
    assert set(second.values()) == {"unchanged"}, second

    # the slot Debezium made is streaming; the heartbeat keeps it confirmed
    with closing(psycopg2.connect(**superuser_dsn(stack, stack.capture.db))) as conn:
        slot = slot_status(conn, spec.slot)
    assert slot is not None and slot["active"] and slot["plugin"] == "pgoutput", slot

    # an insert, an update and a delete of the test's own rows, with values whose types matter
    created = datetime(2026, 11, 27, 9, 30, 15, 123000, tzinfo=timezone.utc)
    with closing(psycopg2.connect(**superuser_dsn(stack, stack.capture.db))) as conn, conn.cursor() as cur:
        cur.execute("SELECT now()")
        mark = cur.fetchone()[0]  # the re-sync below re-reads what changed since
    with closing(psycopg2.connect(**superuser_dsn(stack, stack.capture.db))) as conn, conn, conn.cursor() as cur:
        cur.execute("INSERT INTO app.users (id, email, name, country, created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s)",
                    (BASE_ID, "cdc@example.com", "Cdc", "DE", created, created))
        cur.execute("INSERT INTO app.orders (id, user_id, amount, currency, status, order_date, created_at, updated_at) "
                    "VALUES (%s, %s, %s, 'EUR', 'new', %s, %s, %s)",
                    (BASE_ID, BASE_ID, Decimal("1234.56"), date(2026, 11, 27), created, created))
        cur.execute("INSERT INTO app.orders (id, user_id, amount, currency, status, order_date, created_at, updated_at) "
                    "VALUES (%s, %s, %s, 'EUR', 'new', %s, %s, %s)",
                    (BASE_ID + 1, BASE_ID, Decimal("0.01"), date(2024, 2, 29), created, created))
    with closing(psycopg2.connect(**superuser_dsn(stack, stack.capture.db))) as conn, conn, conn.cursor() as cur:
        cur.execute("UPDATE app.orders SET amount = %s, status = 'paid', updated_at = now() WHERE id = %s",
                    (Decimal("99999.99"), BASE_ID))
    with closing(psycopg2.connect(**superuser_dsn(stack, stack.capture.db))) as conn, conn, conn.cursor() as cur:
        cur.execute("DELETE FROM app.orders WHERE id = %s", (BASE_ID + 1,))
    # and some more of every kind, from the generator
    demo.generate_changes(superuser_dsn(stack, stack.capture.db), 20, seed=31, progress=None)

    def mine_landed():
        ops = [(c["id"], c["__op"]) for c in _changes(catalog, spec.change_table("orders")) if c["id"] in (BASE_ID, BASE_ID + 1)]
        return {(BASE_ID, "c"), (BASE_ID, "u"), (BASE_ID + 1, "c"), (BASE_ID + 1, "d")} <= set(ops) and ops

    wait_for(mine_landed, "the insert, update and delete in the orders change table", DEADLINE_S)

    # in Kafka order, so the first change of each kind per id is the test's own: the generator runs after
    # it and may reuse an id (max(id) + 1 is BASE_ID + 1 again once that row is deleted) or update BASE_ID
    changes = sorted(_changes(catalog, spec.change_table("orders")), key=lambda c: c[OFFSET_COLUMN])
    update = next(c for c in changes if c["id"] == BASE_ID and c["__op"] == "u")
    assert update["amount"] == Decimal("99999.99") and update["status"] == "paid"
    assert update["__lsn"] is not None and update["__source_ts_ms"] is not None and update["__table"] == "orders"
    insert = next(c for c in changes if c["id"] == BASE_ID and c["__op"] == "c")
    assert insert["amount"] == Decimal("1234.56")
    assert insert["order_date"] == date(2026, 11, 27)
    assert insert["created_at"] == created  # timestamptz, to the millisecond
    delete = next(c for c in changes if c["id"] == BASE_ID + 1 and c["__op"] == "d")
    assert delete["__deleted"] == "true"
    leap = next(c for c in changes if c["id"] == BASE_ID + 1 and c["__op"] == "c")
    assert leap["order_date"] == date(2024, 2, 29) and leap["amount"] == Decimal("0.01")

    # the change tables add up to the database, table by table (after the generator's last change lands)
    for table in spec.tables:
        columns = [f.name for f in catalog.load_table(spec.change_table(table)).schema().fields
                   if not f.name.startswith("_")]
        expected = _normalised(_db_rows(stack, table), columns)

        def matches(table=table, columns=columns, expected=expected):
            state = _normalised(_state(_changes(catalog, spec.change_table(table)), columns), columns)
            return state == expected or None

        wait_for(matches, f"{spec.change_table(table)} to add up to {demo.SCHEMA}.{table} ({len(expected)} rows)", DEADLINE_S)

    # every change is a row: nothing was merged away (append-only)
    assert len(_changes(catalog, spec.change_table("orders"))) >= len(snapshot["orders"]) + 4

    # the current-state tables (PySpark MERGE assets on the stack's Spark Connect server) equal the database
    first_build = _materialize_current(resource)
    for table in spec.tables:
        _assert_current_equals_database(stack, catalog, spec, table)
        assert first_build[table]["keys_changed"] > 0
    # idempotent and incremental: a second run with no new change reads nothing and changes nothing
    again = _materialize_current(resource)
    for table in spec.tables:
        assert (again[table]["changes_read"], again[table]["keys_changed"]) == (0, 0), again[table]
        assert again[table]["dagster/row_count"] == first_build[table]["dagster/row_count"]
    # a later update and delete: only they are read, and the current state follows the database
    with closing(psycopg2.connect(**superuser_dsn(stack, stack.capture.db))) as conn, conn, conn.cursor() as cur:
        cur.execute("UPDATE app.orders SET status = 'shipped', updated_at = now() WHERE id = %s", (BASE_ID,))
        cur.execute("DELETE FROM app.users WHERE id = %s", (BASE_ID,))
    wait_for(lambda: {(BASE_ID, "u"), (BASE_ID, "d")} <= {
        (c["id"], c["__op"]) for t in spec.tables for c in _changes(catalog, spec.change_table(t)) if c["id"] == BASE_ID
        and (c["__op"] == "d" or c.get("status") == "shipped")}, "the later update and delete in the change tables", DEADLINE_S)
    later = _materialize_current(resource)
    assert later["orders"]["keys_changed"] == 1 and later["users"]["keys_deleted"] == 1, later
    for table in spec.tables:
        _assert_current_equals_database(stack, catalog, spec, table)

    # the slot keeps no WAL for long while only tables outside the publication change: the heartbeat
    # action query (an upsert into the published heartbeat table) moves its confirmed position
    with closing(psycopg2.connect(**superuser_dsn(stack, stack.capture.db))) as conn, conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS public.lakebus_test_noise (id bigserial PRIMARY KEY, filler text)")
        cur.execute("INSERT INTO public.lakebus_test_noise (filler) SELECT repeat('x', 200) FROM generate_series(1, 20000)")
    with closing(psycopg2.connect(**superuser_dsn(stack, stack.capture.db))) as conn:
        conn.autocommit = True
        behind = slot_status(conn, spec.slot)["unconfirmed_bytes"]
        assert behind > 1_000_000, f"the noise made {behind} bytes of WAL"

        def caught_up():
            found = slot_status(conn, spec.slot)
            return found["active"] and found["unconfirmed_bytes"] < 64 * 1024 and found

        wait_for(caught_up, f"slot {spec.slot} to confirm past {behind} bytes of unpublished WAL (heartbeat)", 60)

    # re-sync since T on the running connector: exactly the rows changed since `mark` come again (op=r),
    # nothing is written to the database, and the current state stays what the database says
    with closing(psycopg2.connect(**superuser_dsn(stack, stack.capture.db))) as conn, conn.cursor() as cur:
        cur.execute("SELECT id FROM app.orders WHERE updated_at >= %s", (mark,))
        expected = {row[0] for row in cur.fetchall()}
    assert len(expected) >= 2, expected
    last_offset = max(c[OFFSET_COLUMN] for c in _changes(catalog, spec.change_table("orders")))
    job = defs.resolve_job_def("resync_captured_table")
    run = job.execute_in_process(
        resources={**build_resources(), "capture": resource},
        run_config={"ops": {"resync_captured_table_op": {"config": {
            "table": "orders", "confirm": "orders", "since": mark.isoformat(), "wait_timeout_s": DEADLINE_S}}}})
    assert run.success

    def reread():
        ids = [c["id"] for c in _changes(catalog, spec.change_table("orders")) if c[OFFSET_COLUMN] > last_offset]
        assert set(ids) <= expected, f"re-read rows outside the filter: {sorted(set(ids) - expected)}"
        return set(ids) == expected and ids

    reread_ids = wait_for(reread, f"the re-read of {len(expected)} orders changed since {mark}", DEADLINE_S)
    reread_rows = [c for c in _changes(catalog, spec.change_table("orders")) if c[OFFSET_COLUMN] > last_offset]
    assert {c["__op"] for c in reread_rows} == {"r"} and len(reread_ids) == len(expected)
    resynced = _materialize_current(resource)
    assert resynced["orders"]["keys_changed"] == len(expected), resynced["orders"]
    for table in spec.tables:
        _assert_current_equals_database(stack, catalog, spec, table)


def _materialize_current(resource: ChangeCaptureResource) -> dict[str, dict]:
    """Run the ``cdc_current_state`` job (both current-state assets) in process; their metadata by table."""
    job = defs.resolve_job_def("cdc_current_state")
    result = job.execute_in_process(resources={**build_resources(), "capture": resource})
    assert result.success
    out = {}
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        table = materialization.asset_key.path[-1].removeprefix(f"pg_{demo.SCHEMA}_").removesuffix("_current")
        out[table] = {k: v.value for k, v in materialization.metadata.items()}
    return out


def _assert_current_equals_database(stack, catalog, spec, table: str) -> None:
    current = catalog.load_table(spec.current_table(table))
    columns = [f.name for f in current.schema().fields if not f.name.startswith("_")]
    rows = {r["id"]: r for r in current.scan().to_arrow().to_pylist()}
    assert _normalised(rows, columns) == _normalised(_db_rows(stack, table), columns), table


def test_a_lost_slot_fails_the_source_loudly_with_one_alert(stack, capture, webhook):
    """The slot goes while the source is stopped (an operator's mistake, or PostgreSQL invalidating it
    past max_slot_wal_keep_size): on resume the source FAILS — it never silently re-snapshots
    (snapshot.mode=initial) — and the status sensor, which watches change capture's connectors like
    the events sink, sends exactly one alert naming the connector and the cause."""
    import time

    import dagster as dg

    from lakebus_dagster.defs.alerts import AlertResource
    from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource

    resource, layout = capture
    spec = resource.spec()
    url, received = webhook
    assert _provision(resource, layout).success
    catalog = load_catalog(stack)
    wait_for(lambda: _changes(catalog, spec.change_table("orders")), "the snapshot in the orders change table", DEADLINE_S)

    with ConnectClient(stack.connect.urls[0]) as client, closing(
            psycopg2.connect(**superuser_dsn(stack, stack.capture.db))) as conn:
        conn.autocommit = True
        client.stop(spec.source_name)
        client.wait_for_state(spec.source_name, {"STOPPED"}, timeout=60, require_tasks=False)
        wait_for(lambda: not (slot_status(conn, spec.slot) or {}).get("active"), f"slot {spec.slot} released", 60)
        with conn.cursor() as cur:
            cur.execute("SELECT pg_drop_replication_slot(%s)", (spec.slot,))
        client.resume(spec.source_name)

        def failed():
            tasks = client.status(spec.source_name).tasks
            return [t for t in tasks if t.state == "FAILED"]

        (task,) = wait_for(failed, f"{spec.source_name}'s task to FAIL on the missing slot", DEADLINE_S)
        assert "no longer available on the server" in (task.trace or ""), task.trace_summary
        assert slot_status(conn, spec.slot) is None, "the source must not quietly make a new slot"

    resources = {**build_resources(), "capture": resource, "layout": layout,
                 "alerts": AlertResource(sink="webhook", webhook_url=url, body_format="generic"),
                 "monitoring_policy": MonitoringPolicyResource(auto_restart=False)}
    sensor = defs.resolve_sensor_def("connector_status_sensor")
    instance, cursor = dg.DagsterInstance.ephemeral(), None
    for _ in range(3):
        with dg.build_sensor_context(cursor=cursor, instance=instance, definitions=defs, sensor_name=sensor.name,
                                     resources=resources) as ctx:
            cursor = sensor.evaluate_tick(ctx).cursor
        time.sleep(1)
    mine = [a for a in received if spec.source_name in json.dumps(a)]
    assert len(mine) == 1, mine
    assert "no longer available" in json.dumps(mine[0]) or "FAILED" in json.dumps(mine[0]), mine[0]
