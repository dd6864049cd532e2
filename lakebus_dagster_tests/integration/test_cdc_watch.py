"""Change capture watched and evolving, on the real stack (issue 30, items 3 and 5): the stack's
PostgreSQL, the real Debezium source, the real Connect worker and Iceberg sink, the stack's Spark.

- Columns added to a source table while capture runs (text, ``timestamptz``, ``numeric(12,2)``,
  ``date``) arrive as a new schema version: the change table evolves (the sink's schema evolution,
  its own types: Debezium's strings stay strings), no column and no change is dropped, and the
  current-state table gains the columns typed as the database types them (``timestamptz``,
  ``decimal(12,2)``, ``date``) — values and types compared with a query of the database itself. In the same
  table, an update that leaves a large (TOASTed) text column untouched carries Debezium's
  placeholder in it; the current-state MERGE must keep the value the database has.
- A source parked by its operator leaves its slot inactive while WAL accumulates: the status
  sensor records the slot's lag (``cdc/replication_slot``), sends one alert once the slot has been
  inactive past the threshold, and one recovery notice when the source reads again; the changes
  made meanwhile land (nothing lost while inactive).

Every wait is a poll against a deadline.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from contextlib import closing
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import dagster as dg
import psycopg2
import pytest
from pyiceberg.types import DateType, DecimalType, StringType, TimestamptzType

from lakebus_dagster.cdc import demo
from lakebus_dagster.cdc.current_state import UNAVAILABLE_PLACEHOLDER, merge_current_state
from lakebus_dagster.cdc.database import slot_status
from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.alerts import AlertResource
from lakebus_dagster.defs.asset_keys import CDC_SLOT_KEY
from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.stack.postgres_service import superuser_dsn

from .helpers import TEST_COMMIT_INTERVAL_MS, wait_for
from .test_monitoring_flow import sensor_tick
from .test_cdc_postgres import (  # noqa: F401 - capture: the fixture
    BASE_ID,
    DEADLINE_S,
    _changes,
    _normalised,
    _provision,
    _state,
    capture,
    capture_resource,
    remove_capture,
)

pytestmark = [pytest.mark.integration, pytest.mark.cdc]


def _sql(stack, *statements: tuple) -> list:
    """Run statements as the superuser in the demo database (one transaction); the last one's rows."""
    rows: list = []
    with closing(psycopg2.connect(**superuser_dsn(stack, stack.capture.db))) as conn, conn, conn.cursor() as cur:
        for statement, *params in statements:
            cur.execute(statement, *params)
            rows = cur.fetchall() if cur.description else []
    return rows


@pytest.fixture
def own_table(stack, run_id):
    """A table of the test's own in the demo schema, owned like the demo tables (only a table's owner
    may add it to a publication), with a large text column; its capture; all dropped afterwards."""
    table = f"evolve_{run_id}"
    qualified = f"{demo.SCHEMA}.{table}"
    _sql(stack, (f"CREATE TABLE {qualified} (id bigint PRIMARY KEY, body text, status text NOT NULL, "
                 "updated_at timestamptz NOT NULL DEFAULT now())",),
         (f"ALTER TABLE {qualified} OWNER TO {demo.OWNER_ROLE}",), (f"GRANT SELECT ON {qualified} TO {stack.capture.user}",))
    resource = capture_resource(stack, run_id, tables=(table,))
    yield resource, BusLayoutResource(name_suffix=run_id, commit_interval_ms=TEST_COMMIT_INTERVAL_MS), table
    remove_capture(stack, resource.spec())
    _sql(stack, (f"DROP TABLE IF EXISTS {qualified}",))


def _database(stack, table: str) -> dict[int, dict]:
    rows = _sql(stack, (f"SELECT to_jsonb(t) FROM {demo.SCHEMA}.{table} t ORDER BY id",))
    return {row[0]["id"]: row[0] for row in rows}


def test_an_added_column_evolves_the_tables_and_an_untouched_toasted_value_is_kept(stack, own_table, spark):
    resource, layout, table = own_table
    spec, catalog = resource.spec(), load_catalog(stack)
    # ~12,800 characters of hex: compressed still well above the 2 kB TOAST threshold, so stored out of line
    body = "(SELECT string_agg(md5(random()::text || g), '') FROM generate_series(1, 400) g)"
    _sql(stack, *[(f"INSERT INTO {demo.SCHEMA}.{table} (id, body, status) VALUES (%s, {body}, 'new')", (i,)) for i in (1, 2, 3)])
    assert _provision(resource, layout).success
    name = spec.change_table(table)
    wait_for(lambda: len(_changes(catalog, name)) >= 3, f"the snapshot of {table} in {name}", DEADLINE_S)
    first_schema = catalog.load_table(name).schema()

    # an update of another column: under REPLICA IDENTITY DEFAULT the TOASTed body is not in the WAL
    _sql(stack, (f"UPDATE {demo.SCHEMA}.{table} SET status = 'paid', updated_at = now() WHERE id = 1",))
    update = wait_for(lambda: next((c for c in _changes(catalog, name) if c["id"] == 1 and c["__op"] == "u"), None),
                      "the status-only update in the change table", DEADLINE_S)
    assert update["body"] == UNAVAILABLE_PLACEHOLDER, "the premise: Debezium sent the placeholder, not the value"
    merge_current_state(spark, spec, table)
    _assert_current(stack, catalog, spec, table)

    # columns added while capture runs (text, timestamptz, numeric, date); a row using them; an update of
    # them that leaves body untouched again. (No DEFAULT: PostgreSQL fills a default into the existing rows
    # without a WAL change for them, so only a re-read — resnapshot_captured_table — brings such values;
    # see docs/runbooks/schema-change.md)
    paid = datetime(2026, 11, 27, 9, 30, 15, 123000, tzinfo=timezone.utc)
    _sql(stack, (f"ALTER TABLE {demo.SCHEMA}.{table} ADD COLUMN channel text, ADD COLUMN paid_at timestamptz, "
                 "ADD COLUMN total numeric(12,2), ADD COLUMN due date",),
         (f"INSERT INTO {demo.SCHEMA}.{table} (id, body, status, channel, paid_at, total, due) "
          "VALUES (4, 'short', 'new', 'app', %s, %s, %s)", (paid, Decimal("1234.56"), date(2024, 2, 29))),
         (f"UPDATE {demo.SCHEMA}.{table} SET channel = 'shop', paid_at = %s, total = %s, due = %s WHERE id = 2",
          (datetime(1999, 12, 31, 23, 59, 59, 999000, tzinfo=timezone(timedelta(hours=-5))), Decimal("0.01"), date(2026, 11, 27))))

    def evolved():
        ops = {(c["id"], c["__op"], c.get("channel")) for c in _changes(catalog, name)}
        return {(4, "c", "app"), (2, "u", "shop")} <= ops and ops

    wait_for(evolved, f"the added column's changes in {name}", DEADLINE_S)
    live = catalog.load_table(name)
    assert live.schema().schema_id != first_schema.schema_id and live.schema().find_field("channel")
    # nothing dropped: every column of the first schema is still there, with its type; every change is a row
    assert all(live.schema().find_field(f.name).field_type == f.field_type for f in first_schema.fields)
    assert len(_changes(catalog, name)) == 3 + 1 + 2
    # the change table keeps the sink's own mapping of an added column (Debezium's strings stay strings:
    # the sink adds the column from the first record carrying it, and Iceberg cannot retype a string) ...
    added = {f: live.schema().find_field(f).field_type for f in ("paid_at", "total", "due")}
    print(f"the change table's added columns: {added}")
    assert added["paid_at"] == StringType() and added["total"] == StringType(), added
    stats = merge_current_state(spark, spec, table)
    assert (stats.changes_read, stats.keys_changed) == (2, 2), stats
    # ... and the current-state table holds them as the database types them, like the initial columns
    current = catalog.load_table(spec.current_table(table)).schema()
    assert {f: current.find_field(f).field_type for f in ("channel", *added)} == {
        "channel": StringType(), "paid_at": TimestamptzType(), "total": DecimalType(12, 2), "due": DateType()}
    _assert_current(stack, catalog, spec, table)
    database = {row[0]: row[1:] for row in _sql(stack, (f"SELECT id, paid_at, total, due FROM {demo.SCHEMA}.{table} ORDER BY id",))}
    rows = {r["id"]: (r["paid_at"], r["total"], r["due"]) for r in catalog.load_table(spec.current_table(table)).scan().to_arrow().to_pylist()}
    assert _normalised(rows, [0, 1, 2]) == _normalised(database, [0, 1, 2]), (rows, database)
    assert rows[4] == (paid, Decimal("1234.56"), date(2024, 2, 29)), rows[4]
    assert rows[2][0] == datetime(2000, 1, 1, 4, 59, 59, 999000, tzinfo=timezone.utc) and rows[1] == (None, None, None), rows


def _assert_current(stack, catalog, spec, table: str) -> None:
    """The current-state table equals the database, every column of it (body, the added one included)."""
    expected = _database(stack, table)
    current = {r["id"]: r for r in catalog.load_table(spec.current_table(table)).scan().to_arrow().to_pylist()}
    columns = ["id", "body", "status", *(["channel"] if "channel" in expected[min(expected)] else [])]
    assert sorted(current) == sorted(expected)
    assert not [k for k, r in current.items() if r["body"] == UNAVAILABLE_PLACEHOLDER], "the placeholder reached the current state"
    assert _normalised(current, columns) == _normalised(expected, columns)


def _sensor_ticks(sensor_name: str, resources: dict, asset_key: str):
    """``tick()``: one evaluation of the shipped sensor as the daemon runs it (its cursor kept), returning
    every observation of ``asset_key`` so far (their metadata values)."""
    instance, state = dg.DagsterInstance.ephemeral(), {"cursor": None, "observed": []}

    def tick():
        result, state["cursor"] = sensor_tick(sensor_name, resources, state["cursor"], instance)
        state["observed"] += [{k: v.value for k, v in e.metadata.items()} for e in result.asset_events or []
                              if e.asset_key.to_user_string() == asset_key]
        return state["observed"]

    return tick


def _ticker(resource, layout, url):
    resources = {**build_resources(), "capture": resource, "layout": layout,
                 "alerts": AlertResource(sink="webhook", webhook_url=url, body_format="generic"),
                 "monitoring_policy": MonitoringPolicyResource(auto_restart=False, slot_inactive_threshold_s=15.0,
                                                               recovery_stable_s=0.0)}
    return _sensor_ticks("connector_status_sensor", resources, CDC_SLOT_KEY.to_user_string())


def _declare(job: str, connector: str, layout, reason: str) -> None:
    run = defs.resolve_job_def(job).execute_in_process(
        resources={**build_resources(), "layout": layout},
        run_config={"ops": {f"{job}_op": {"config": {"connector": connector, "reason": reason}}}})
    assert run.success


def test_an_inactive_slot_is_one_incident_with_its_lag_and_recovers_once(stack, capture, webhook):
    resource, layout = capture
    spec, catalog = resource.spec(), load_catalog(stack)
    url, received = webhook
    before, ids = BASE_ID + 499, (BASE_ID + 500, BASE_ID + 501)
    insert = ("INSERT INTO app.orders (id, user_id, amount, currency, status, order_date) "
              "VALUES (%s, 1, 10.00, 'EUR', 'new', current_date)")
    _sql(stack, (f"DELETE FROM {demo.SCHEMA}.orders WHERE id IN %s", ((before, *ids),)), (insert, (before,)))
    assert _provision(resource, layout).success
    wait_for(lambda: before in {c["id"] for c in _changes(catalog, spec.change_table("orders"))},
             "the snapshot in the orders change table", DEADLINE_S)
    tick = _ticker(resource, layout, url)

    def slot_alerts():
        return [a for a in received if spec.slot in json.dumps(a) or spec.source_name in json.dumps(a)]

    # the operator parks the source (declared STOPPED: no connector incident); changes go on meanwhile
    _declare("stop_connector", spec.source_name, layout, "test: park the source")
    with closing(psycopg2.connect(**superuser_dsn(stack, stack.capture.db))) as conn:
        conn.autocommit = True
        wait_for(lambda: not (slot_status(conn, spec.slot) or {"active": True})["active"], f"slot {spec.slot} inactive", 60)
    for i in ids:
        _sql(stack, (insert, (i,)))
    tick()
    assert slot_alerts() == [], "an inactive slot within its threshold is no incident"
    (alert,) = wait_for(lambda: tick() and slot_alerts(), "the inactive slot's alert", 60, interval=2.0)
    assert "INACTIVE" in json.dumps(alert) and spec.slot in json.dumps(alert), alert
    lagging = [o for o in tick() if not o["active"]]
    assert lagging and lagging[-1]["lag_bytes"] > 0 and lagging[-1]["retained_bytes"] >= lagging[-1]["lag_bytes"], lagging
    for _ in range(3):  # still one alert, however many ticks see it
        tick()
    assert len(slot_alerts()) == 1, slot_alerts()

    _declare("resume_connector", spec.source_name, layout, "test: read again")
    wait_for(lambda: tick() and len(slot_alerts()) == 2 and slot_alerts(), "the slot's recovery notice", DEADLINE_S, interval=2.0)
    assert [a.get("kind") for a in slot_alerts()] == ["incident", "recovery"], slot_alerts()
    assert tick()[-1]["active"] is True
    wait_for(lambda: set(ids) <= {c["id"] for c in _changes(catalog, spec.change_table("orders"))},
             "the changes made while the slot was inactive in the change table", DEADLINE_S)
    _sql(stack, (f"DELETE FROM {demo.SCHEMA}.orders WHERE id IN %s", ((before, *ids),)))


def test_a_full_resnapshot_on_the_running_connector_is_followed_and_idempotent(stack, own_table, spark):
    """``resnapshot_captured_table`` re-reads a table whole on the running source (no stop, no
    re-creation, nothing written to the database), its progress counted while it runs; the
    current-state table afterwards equals the database — the same rows, and the values a column's
    DEFAULT wrote into existing rows without any WAL change, which only a re-read brings."""
    resource, layout, table = own_table
    spec, catalog = resource.spec(), load_catalog(stack)
    rows = 2500  # three chunks of 1024
    _sql(stack, (f"INSERT INTO {demo.SCHEMA}.{table} (id, body, status) SELECT g, 'b' || g, 'new' FROM generate_series(1, %s) g",
                 (rows,)))
    assert _provision(resource, layout).success
    name = spec.change_table(table)
    wait_for(lambda: len(_changes(catalog, name)) >= rows, f"the snapshot of {rows} rows in {name}", DEADLINE_S)
    assert merge_current_state(spark, spec, table).rows == rows
    # a column with a DEFAULT: PostgreSQL fills the existing rows without a change event for them;
    # one streamed update carries the new schema to the source first
    _sql(stack, (f"ALTER TABLE {demo.SCHEMA}.{table} ADD COLUMN channel text DEFAULT 'web'",),
         (f"UPDATE {demo.SCHEMA}.{table} SET status = 'paid' WHERE id = 1",))
    wait_for(lambda: any(c["__op"] == "u" and c.get("channel") == "web" for c in _changes(catalog, name)),
             "the update with the new column", DEADLINE_S)
    before = len(_changes(catalog, name))
    with ConnectClient(stack.connect.urls[0]) as client:
        task_before = client.status(spec.source_name).tasks[0]

    run = defs.resolve_job_def("resnapshot_captured_table").execute_in_process(
        resources={**build_resources(), "capture": resource},
        run_config={"ops": {"resnapshot_captured_table_op": {"config": {"tables": [table], "confirm": table,
                                                                       "wait_timeout_s": DEADLINE_S}}}})
    assert run.success
    (materialized,) = [e for e in run.all_events if e.event_type_value == "STEP_OUTPUT"]
    metadata = {k: v.value for k, v in materialized.event_specific_data.metadata.items()}
    assert metadata["finished"] is True and metadata["rows_expected"] == {table: rows}, metadata
    assert metadata["rows_reread"] == {table: rows} and metadata["progress"][-1][1] == rows, metadata
    progress = [e for e in run.all_events if e.event_type_value == "ASSET_OBSERVATION"]
    assert progress and progress[-1].asset_observation_data.asset_observation.metadata["resync_rows_reread"].value == rows

    # the same task kept running (nothing stopped or re-created); every row came again as op=r
    with ConnectClient(stack.connect.urls[0]) as client:
        task_after = client.status(spec.source_name).tasks[0]
    assert (task_after.state, task_after.worker_id) == ("RUNNING", task_before.worker_id)
    wait_for(lambda: len(_changes(catalog, name)) >= before + rows, f"the {rows} re-read rows in {name}", DEADLINE_S)
    reread = [c for c in _changes(catalog, name) if c["__op"] == "r"]
    assert len(reread) == 2 * rows and len(_changes(catalog, name)) == before + rows
    stats = merge_current_state(spark, spec, table)
    assert (stats.keys_changed, stats.rows) == (rows, rows), stats
    _assert_current(stack, catalog, spec, table)  # channel 'web' on every row, as the database says


def test_a_change_the_sink_cannot_write_goes_to_its_dlq_and_the_dlq_sensor_alerts_once(stack, capture, webhook):
    """Change capture's sink has a dead-letter topic with Connect's error headers; ``dlq_sensor``
    reads it beside the events DLQ: one alert naming the topic and the reason, the batch observed on
    ``kafka/dlq_events``, the sink still RUNNING (nothing else stopped)."""
    from lakebus_dagster.kafka.writing import produce_all

    resource, layout = capture
    spec = resource.spec()
    url, received = webhook
    assert _provision(resource, layout).success
    resources = {**build_resources(), "capture": resource, "layout": layout,
                 "alerts": AlertResource(sink="webhook", webhook_url=url, body_format="generic")}
    # a record in a change topic that is no Schema+JSON envelope (a producer that is not Debezium)
    produce_all(resources["kafka"].producer(), [(spec.topic("orders"), b'{"id": 1}', b"not json {", [])])
    observe = _sensor_ticks("dlq_sensor", resources, "kafka/dlq_events")
    observed: list[dict] = []

    def tick():
        observed[:] = observe()
        return [a for a in received if spec.dlq_topic.name in json.dumps(a)]

    (alert,) = wait_for(tick, f"the dead letter's alert from {spec.dlq_topic.name}", DEADLINE_S, interval=2.0)
    assert "DataException" in json.dumps(alert) and alert.get("kind") == "dlq", alert
    assert [(o["topic"], o["new_records"]) for o in observed] == [(spec.dlq_topic.name, 1)]
    tick(), tick()
    assert len([a for a in received if spec.dlq_topic.name in json.dumps(a)]) == 1
    with ConnectClient(stack.connect.urls[0]) as client:
        assert [t.state for t in client.status(spec.sink_name).tasks] == ["RUNNING"]


def _generate(stack, table: str, stop, counts: dict, ids: list[int]) -> None:
    """Inserts, updates and deletes of the test's table, one transaction each, until ``stop``."""
    import random

    rng, next_id = random.Random(30), max(ids) + 1
    with closing(psycopg2.connect(**superuser_dsn(stack, stack.capture.db))) as conn:
        conn.autocommit = True
        with conn.cursor() as cur:
            while not stop.is_set():
                roll = rng.random()
                if roll < 0.4 or len(ids) < 10:
                    cur.execute(f"INSERT INTO {demo.SCHEMA}.{table} (id, body, status) VALUES (%s, 'b', 'new')", (next_id,))
                    ids.append(next_id)
                    next_id, kind = next_id + 1, "insert"
                elif roll < 0.85:
                    cur.execute(f"UPDATE {demo.SCHEMA}.{table} SET status = %s, updated_at = now() WHERE id = %s",
                                (f"s{rng.randint(0, 999)}", rng.choice(ids)))
                    kind = "update"
                else:
                    cur.execute(f"DELETE FROM {demo.SCHEMA}.{table} WHERE id = %s", (ids.pop(rng.randrange(len(ids))),))
                    kind = "delete"
                counts[kind] = counts.get(kind, 0) + 1
                time.sleep(0.02)


def test_a_killed_connect_worker_mid_changes_loses_and_duplicates_nothing_in_the_current_state(stack, own_table, spark):
    """The stack's Connect worker (the source's and the sink's only worker) is killed with SIGKILL
    while changes stream; the stack's CLI brings it back (``stack up``). Every change reaches the
    change table once — no streamed (key, LSN, op) twice: exactly-once source delivery and the sink's
    exactly-once commits — and the current-state table equals the database."""
    import subprocess
    import sys
    import threading

    from lakebus_dagster.stack import process

    resource, layout, table = own_table
    spec, catalog = resource.spec(), load_catalog(stack)
    _sql(stack, (f"INSERT INTO {demo.SCHEMA}.{table} (id, body, status) SELECT g, 'b', 'new' FROM generate_series(1, 200) g",))
    assert _provision(resource, layout).success
    name = spec.change_table(table)
    wait_for(lambda: len(_changes(catalog, name)) >= 200, f"the snapshot of {table}", DEADLINE_S)

    stop, counts, ids = threading.Event(), {}, list(range(1, 201))
    writer = threading.Thread(target=_generate, args=(stack, table, stop, counts, ids), daemon=True)
    writer.start()
    try:
        wait_for(lambda: sum(counts.values()) >= 100, "changes streaming before the kill", 60, interval=0.2)
        worker = process.find_process(stack, "connect")
        assert worker is not None, "the stack's Connect worker is not running"
        worker.kill()  # SIGKILL: no shutdown hook, no clean leave of the group, transactions left open
        worker.wait(30)
        killed_at = sum(counts.values())
        wait_for(lambda: sum(counts.values()) >= killed_at + 100, "changes while the worker is dead", 60, interval=0.2)
        up = subprocess.run([sys.executable, "-m", "lakebus_dagster.stack", "up"], capture_output=True, text=True, timeout=300)
        assert up.returncode == 0, up.stdout + up.stderr
        with ConnectClient(stack.connect.urls[0]) as client:
            for connector in (spec.source_name, spec.sink_name):
                client.wait_for_state(connector, ("RUNNING",), timeout=DEADLINE_S, fail_states=("FAILED",))
        wait_for(lambda: sum(counts.values()) >= killed_at + 300, "changes after the worker is back", 60, interval=0.2)
    finally:
        stop.set()
        writer.join(30)

    expected = _database(stack, table)
    columns = ["id", "body", "status"]

    def adds_up():
        changes = _changes(catalog, name)
        return _normalised(_state(changes, columns), columns) == _normalised(expected, columns) and changes

    changes = wait_for(adds_up, f"{name} to add up to the database after the kill ({counts})", DEADLINE_S, interval=2.0)
    streamed = Counter((c["id"], c["__lsn"], c["__op"]) for c in changes if c["__op"] != "r")
    assert [k for k, n in streamed.items() if n > 1] == [], "a change landed twice"
    assert len(streamed) == sum(counts.values()), (len(streamed), counts)
    # and on the sink's side: every record of the change topic is one row (the offset ledger; an
    # aborted transaction's records are no records)
    from lakebus_dagster.cdc.ledger import run_change_ledgers

    with ConnectClient(stack.connect.urls[0]) as client:
        (ledger,) = run_change_ledgers(spec, stack.kafka.client_config(), catalog, client, grace_s=0.0).values()
    assert ledger.passed and ledger.complete, ledger.verdict.problem_summary()
    merge_current_state(spark, spec, table)
    _assert_current(stack, catalog, spec, table)


def newest_record_ms(kafka, topic: str) -> int:
    """The newest record timestamp of ``topic`` (what the ledger's grace is measured from)."""
    from lakebus_dagster.kafka import end_offsets
    from lakebus_dagster.ledger.sources import read_bus

    consumer = kafka.consumer("lakebus-test-record-ages")
    try:
        ends = end_offsets(consumer, topic)
    finally:
        consumer.close()
    return max(r.timestamp_ms for p, end in ends.items() for r in read_bus(kafka.consumer, topic, p, 0, end))


def test_the_offset_ledger_accounts_for_every_change_record_and_names_a_lost_one(stack, own_table, spark, webhook):
    """``cdc_offset_ledger``: every record of the change topic is one change-table row or one DLQ
    record (a record the sink could not read is there, with its reason); the run keeps its state like
    the events ledger (``<change topic>.ledger``: a second run reads nothing already verified); a
    change-table row removed behind the sink's back is named as lost, fails the run and is one alert —
    not one per run."""
    from lakebus_dagster.kafka.writing import produce_all
    from lakebus_dagster.lake.spark import SPARK_CATALOG

    resource, layout, table = own_table
    spec, catalog = resource.spec(), load_catalog(stack)
    url, received = webhook
    _sql(stack, (f"INSERT INTO {demo.SCHEMA}.{table} (id, body, status) SELECT g, 'b', 'new' FROM generate_series(1, 50) g",))
    assert _provision(resource, layout).success
    resources = {**build_resources(), "capture": resource,
                 "alerts": AlertResource(sink="webhook", webhook_url=url, body_format="generic")}
    produce_all(resources["kafka"].producer(), [(spec.topic(table), b'{"id": 1}', b"not json {", [])])
    _sql(stack, (f"UPDATE {demo.SCHEMA}.{table} SET status = 'paid' WHERE id <= 10",))
    name, topic = spec.change_table(table), spec.topic(table)
    wait_for(lambda: len(_changes(catalog, name)) >= 60, f"the snapshot and the updates in {name}", DEADLINE_S)
    job = defs.resolve_job_def("cdc_offset_ledger")

    def ledger(**config):
        run = job.execute_in_process(resources=resources, run_config={"ops": {"cdc_offset_ledger_op": {"config": {
            "grace_s": 0.0, **config}}}}, raise_on_error=False)
        (output,) = [e for e in run.all_events if e.event_type_value == "STEP_OUTPUT"] or [None]
        (failure,) = [e for e in run.all_events if e.event_type_value == "STEP_FAILURE"] or [None]
        metadata = (output.event_specific_data.metadata if output else
                    failure.event_specific_data.user_failure_data.metadata if failure and failure.event_specific_data.user_failure_data
                    else {})
        return run, (metadata["topics"].value[topic] if metadata else None), metadata

    def accounted():  # a whole, unpersisted look until the sink committed everything
        run, found, _ = ledger(full=True, persist=False)
        return run.success and found and found["places"].get("ods") == 60 and found["pending"] == 0 and found

    found = wait_for(accounted, "every change record accounted for", DEADLINE_S, interval=3.0)
    assert found["places"] == {"ods": 60, "dlq": 1} and found["passed"], found

    # the scheduled way: persisted, incremental. The first run verifies all 61 from the baseline ...
    first, found, metadata = ledger()
    assert first.success and found["places"] == {"ods": 60, "dlq": 1} and found["records_read"] == 61, found
    assert metadata[f"{topic} lost_count"].value == 0 and metadata[f"{topic} bus_topic"].value == topic
    # ... the next reads nothing already verified (its state: <change topic>.ledger)
    second, again, _ = ledger()
    assert second.success and again["records_read"] == 0 and again["verified_to"] == found["verified_to"], again

    def ledger_alerts():
        return [a for a in received if topic in json.dumps(a) and "offset_ledger" in json.dumps(a)]

    # every record of the table older than the ledger's grace first: a younger one is judged pending, not
    # lost, and a run that names 1 of the 2 lost (then 2) would be two distinct alerts
    grace_ms = metadata["grace_s"].value * 1000
    newest_ms = newest_record_ms(resources["kafka"], topic)
    wait_for(lambda: time.time() * 1000 - newest_ms > grace_ms + 1000,
             f"every record of {topic} older than the ledger's grace ({grace_ms / 1000:.0f} s)", DEADLINE_S, interval=1.0)
    before = len(ledger_alerts())
    spark.sql(f"DELETE FROM {SPARK_CATALOG}.{name} WHERE id = 7")  # two rows (the snapshot's and the update's) gone

    def judged_lost():  # the records are pending until older than two of the sink's commit cycles (in_flight_grace_s)
        run, found, metadata = ledger()
        return None if run.success else (run, found, metadata)

    lost, found, metadata = wait_for(judged_lost, "the deleted rows' records judged lost", DEADLINE_S, interval=5.0)
    failure = next(e for e in lost.all_events if e.event_type_value == "STEP_FAILURE")
    assert "lost" in failure.event_specific_data.error.message, failure.event_specific_data.error.message
    assert metadata[f"{topic} lost_count"].value == 2, metadata[f"{topic} lost_offsets"]
    new = ledger_alerts()[before:]
    assert len(new) == 1 and "2 record(s) lost" in json.dumps(new[0]), received
    # the same loss again: the run fails again, the alert is not repeated
    still, _, _ = ledger()
    assert not still.success
    assert len(ledger_alerts()) == before + 1, received
