"""Change capture from PostgreSQL (issue 30), without services: the declared capture's connector
configs, its validation, the change tables' types, the optional PostgreSQL service and the cdc
stage's ports. The real run is ``integration/test_cdc_postgres.py`` (make test's cdc stage)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pyiceberg.types import DateType, DecimalType, LongType, StringType, TimestamptzType

from lakebus_dagster.cdc.capture import DEBEZIUM_POSTGRES_CLASS, CaptureError, CaptureSpec
from lakebus_dagster.cdc.database import Column
from lakebus_dagster.cdc.tables import change_table_fields, iceberg_type
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource


class _Lake:
    catalog_uri = "http://catalog:8181"
    warehouse = "s3://warehouse/"
    region = "us-east-1"
    s3_endpoint = "http://s3:9000"


def _spec(**over) -> CaptureSpec:
    return ChangeCaptureResource(enabled=True, **over).spec()


def test_the_source_is_debezium_with_lakebus_publication_heartbeat_eos_and_no_secret():
    spec = _spec(name="shop")
    source = spec.source_spec()
    cfg = source.config
    assert source.connector_class == DEBEZIUM_POSTGRES_CLASS
    assert (cfg["plugin.name"], cfg["slot.name"], cfg["publication.name"]) == ("pgoutput", "lakebus_shop", "lakebus_shop")
    assert cfg["publication.autocreate.mode"] == "disabled"
    assert cfg["table.include.list"] == "app.users,app.orders"
    assert cfg["database.password"] == "${env:LAKEBUS_POSTGRES_PASSWORD}"
    assert cfg["exactly.once.support"] == "required"
    assert (cfg["decimal.handling.mode"], cfg["time.precision.mode"]) == ("string", "connect")
    assert cfg["tombstones.on.delete"] == "false"
    assert int(cfg["heartbeat.interval.ms"]) > 0
    assert cfg["heartbeat.action.query"].startswith("INSERT INTO app.lakebus_heartbeat ")
    for side in ("key", "value"):
        assert cfg[f"{side}.converter"] == "org.apache.kafka.connect.json.JsonConverter"
        assert cfg[f"{side}.converter.schemas.enable"] == "true"
    # its topics are created explicitly (the broker's auto-create is off), the heartbeat's included
    assert [t.name for t in source.topics] == ["shop.app.users", "shop.app.orders", "__debezium-heartbeat.shop"]
    assert not any(k.startswith("topic.creation") for k in cfg)
    assert spec.published_tables == ("app.users", "app.orders", "app.lakebus_heartbeat")
    assert _spec(exactly_once=False).source_config().get("exactly.once.support") is None


def test_the_sink_unwraps_keeps_deletes_reads_committed_and_routes_by_table():
    sink = _spec(name="shop", namespace="demo_cdc").sink_spec(_Lake())
    cfg = sink.config
    assert cfg["topics"] == "shop.app.users,shop.app.orders"
    assert cfg["consumer.override.isolation.level"] == "read_committed"
    assert cfg["transforms"] == "unwrap,provenance"
    assert cfg["transforms.unwrap.type"] == "io.debezium.transforms.ExtractNewRecordState"
    assert cfg["transforms.unwrap.delete.tombstone.handling.mode"] == "rewrite"
    assert set(cfg["transforms.unwrap.add.fields"].split(",")) >= {"op", "lsn", "source.ts_ms", "table"}
    assert cfg["iceberg.tables"] == "demo_cdc.pg_app_users,demo_cdc.pg_app_orders"
    assert cfg["iceberg.tables.route-field"] == "__table"
    assert cfg["iceberg.table.demo_cdc.pg_app_orders.route-regex"] == "^orders$"
    assert cfg["iceberg.tables.auto-create-enabled"] == "false"  # lakebus creates them typed
    assert cfg["iceberg.catalog.s3.secret-access-key"] == "${env:LAKEBUS_S3_SECRET_ACCESS_KEY}"
    assert [t.name for t in sink.topics][-2:] == ["iceberg-control-shop", "dlq-shop"]


@pytest.mark.parametrize(("over", "named"), [
    ({"name": "Shop"}, "name 'Shop'"),
    ({"name": "shop-1"}, "name 'shop-1'"),
    ({"tables": []}, "at least one table"),
    ({"tables": ["orders", "orders"]}, "tables listed twice"),
    ({"tables": ["lakebus_heartbeat"]}, "heartbeat table 'lakebus_heartbeat' must not be captured"),
    ({"db_schema": "App"}, "schema 'App'"),
])
def test_a_bad_capture_is_refused_naming_the_field(over, named):
    with pytest.raises(CaptureError, match=re.escape(named)):
        _spec(**over)


def test_change_table_types_follow_the_database_catalog():
    spec = _spec()

    def typed(data_type, precision=None, scale=None):
        return iceberg_type(spec, "orders", Column("c", data_type, precision, scale, False))

    assert typed("numeric", 12, 2) == DecimalType(12, 2)
    assert typed("numeric") == StringType()  # unconstrained: no fixed scale, kept exact as text
    assert typed("timestamp with time zone") == TimestamptzType()
    assert typed("date") == DateType()
    assert typed("bigint") == LongType()
    with pytest.raises(CaptureError, match=r"app\.orders\.c has type 'tsvector'"):
        typed("tsvector")
    with pytest.raises(CaptureError, match=r"numeric\(40,2\)"):
        typed("numeric", 40, 2)
    fields = change_table_fields(spec, "orders", [Column("id", "bigint", 64, 0, True)])
    assert [n for n, _ in fields] == ["id", "__op", "__lsn", "__txId", "__source_ts_ms", "__table", "__deleted"]
    with pytest.raises(CaptureError, match="__op"):
        change_table_fields(spec, "orders", [Column("__op", "text", None, None, False)])


def test_postgres_is_an_optional_service_and_turns_on_exactly_once_sources(monkeypatch, tmp_path):
    from lakebus_dagster.stack.kafka_services import CONNECT_WORKER, connect_worker_properties
    from lakebus_dagster.stack.local_settings import load_stack_settings
    from lakebus_dagster.stack.services import profile_service_names

    monkeypatch.setenv("LAKEBUS_STATE_DIR", str(tmp_path / "state"))
    for var in ("LAKEBUS_PROFILE", "LAKEBUS_POSTGRES", "LAKEBUS_POSTGRES_PORT"):
        monkeypatch.delenv(var, raising=False)
    off = load_stack_settings()
    assert "postgres" not in profile_service_names(off)
    (node,) = CONNECT_WORKER.nodes(off, tmp_path, "java", ("a", "b"))
    assert "exactly.once.source.support" not in connect_worker_properties(node)

    monkeypatch.setenv("LAKEBUS_POSTGRES", "on")
    monkeypatch.setenv("LAKEBUS_POSTGRES_PORT", "33432")
    on = load_stack_settings()
    assert profile_service_names(on)[:2] == ["s3", "postgres"]
    assert on.ports.postgres == 33432
    (node,) = CONNECT_WORKER.nodes(on, tmp_path, "java", ("a", "b"))
    assert connect_worker_properties(node)["exactly.once.source.support"] == "enabled"
    assert ChangeCaptureResource.from_settings(on).port == 33432

    monkeypatch.setenv("LAKEBUS_POSTGRES", "yes")
    with pytest.raises(ValueError, match="LAKEBUS_POSTGRES"):
        load_stack_settings()


def test_the_captured_databases_host_is_its_own_setting_environment_over_file_over_the_stacks_host(clean_env, tmp_path):
    """LAKEBUS_POSTGRES_HOST (environment > config file > LAKEBUS_HOST, the local stack's server) is the host the
    capture connects to everywhere: the Debezium source's database.hostname and lakebus's own connections (the
    database checks, the slot watch, re-sync / re-snapshot: all through database.connect)."""
    import psycopg2

    from lakebus_dagster.cdc import database
    from lakebus_dagster.settings import SettingsError, load_settings

    clean_env.setenv("LAKEBUS_HOST", "10.0.0.7")
    clean_env.setenv("LAKEBUS_POSTGRES", "on")
    assert load_settings().capture.host == "10.0.0.7"  # the default: the local stack's host

    config = tmp_path / "lakebus.yaml"
    config.write_text("settings:\n  LAKEBUS_POSTGRES_HOST: shop-db.file.example\n")
    clean_env.setenv("LAKEBUS_CONFIG", str(config))
    assert load_settings().capture.host == "shop-db.file.example"
    clean_env.setenv("LAKEBUS_POSTGRES_HOST", "shop-db.env.example")
    settings = load_settings()
    assert settings.capture.host == "shop-db.env.example" and settings.host == "10.0.0.7"

    spec = ChangeCaptureResource.from_settings(settings).spec()
    assert spec.source_config()["database.hostname"] == "shop-db.env.example"
    seen = {}
    clean_env.setattr(psycopg2, "connect", lambda **kw: seen.update(kw) or "conn")
    assert database.connect(spec, password="not-a-secret") == "conn" and seen["host"] == "shop-db.env.example"

    clean_env.setenv("LAKEBUS_POSTGRES_HOST", "postgres://shop-db:5432")
    with pytest.raises(SettingsError, match="LAKEBUS_POSTGRES_HOST='postgres://shop-db:5432' is not a host name"):
        load_settings()


def test_a_deploy_target_capturing_a_database_takes_change_captures_database(tmp_path):
    """deploy/values.yaml names the captured database once (change_capture:); a target that switches capture on gets
    it as its LAKEBUS_POSTGRES_* settings (the Kubernetes ConfigMap's keys), a target that does not gets none, and
    setting them anywhere else is refused naming the key."""
    import yaml

    from lakebus_dagster.deployment.values import ValuesError, load_values

    shipped = yaml.safe_load((Path(__file__).resolve().parents[2] / "deploy" / "values.yaml").read_text())
    assert not {k for k in load_values(Path(__file__).resolve().parents[2] / "deploy" / "values.yaml").kubernetes.configured
                if k.startswith("LAKEBUS_POSTGRES")}
    shipped["targets"]["kubernetes"]["LAKEBUS_POSTGRES"] = "on"
    shipped["change_capture"].update(host="orders-db.prod.svc", port=6432)
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(shipped))
    values = load_values(path)
    k8s = values.kubernetes
    assert {k: v for k, v in k8s.configured.items() if k.startswith("LAKEBUS_POSTGRES")} == {
        "LAKEBUS_POSTGRES": "on", "LAKEBUS_POSTGRES_HOST": "orders-db.prod.svc", "LAKEBUS_POSTGRES_PORT": "6432",
        "LAKEBUS_POSTGRES_DB": "shop", "LAKEBUS_POSTGRES_USER": "lakebus_cdc"}
    assert (k8s.settings.capture.host, k8s.settings.ports.postgres) == ("orders-db.prod.svc", 6432)
    assert ChangeCaptureResource.from_settings(k8s.settings).spec().source_config()["database.hostname"] == "orders-db.prod.svc"
    assert not {k for k in values.compose.configured if k.startswith("LAKEBUS_POSTGRES")}

    shipped["targets"]["kubernetes"]["LAKEBUS_POSTGRES_HOST"] = "elsewhere"
    path.write_text(yaml.safe_dump(shipped))
    with pytest.raises(ValuesError, match="LAKEBUS_POSTGRES_HOST is set under settings/targets; the captured database is change_capture's"):
        load_values(path)


def test_the_postgres_server_carries_the_stack_markers_and_stops_fast(monkeypatch, tmp_path):
    import signal

    from lakebus_dagster.stack.postgres_service import POSTGRES, SERVER_SETTINGS
    from lakebus_dagster.stack.local_settings import load_stack_settings
    from lakebus_dagster.stack.process import native_markers
    from lakebus_dagster.stack.services import STOP_SIGNALS

    monkeypatch.setenv("LAKEBUS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("LAKEBUS_POSTGRES", "on")
    settings = load_stack_settings()
    (node,) = POSTGRES.nodes(settings, tmp_path, "java", ("a", "b"))
    argv = POSTGRES.bind(node).argv(settings, tmp_path, "java", [])
    assert all(m in argv for m in native_markers(settings, "postgres"))
    assert "--wal_level=logical" in argv
    assert SERVER_SETTINGS["max_slot_wal_keep_size"] not in ("-1", "")
    assert STOP_SIGNALS["postgres"] == signal.SIGINT and STOP_SIGNALS["kafka"] == signal.SIGTERM


def test_the_stages_ports_never_collide():
    from lakebus_dagster_tests import stages

    def taken(ports: dict[str, str]) -> set[int]:
        out = {int(v) for k, v in ports.items() if k.endswith("_PORT")}
        master, webui = int(ports["LAKEBUS_SPARK_MASTER_PORT"]), int(ports["LAKEBUS_SPARK_WEBUI_PORT"])
        return out | {master + 1, webui + 1, webui + 2}

    stacks = {"lake": stages.LAKE_PORTS, "profiles": stages.PROFILE_PORTS, "secured": stages.SECURED_PORTS, "cdc": stages.CDC_PORTS}
    names = list(stacks)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not taken(stacks[a]) & taken(stacks[b]), (a, b)
    assert "LAKEBUS_POSTGRES_PORT" in stages.CDC_PORTS
    # below Linux's ephemeral range (32768-60999): an outgoing connection could hold a port above it
    # at the moment a stack starts (seen on this machine in the 34xxx range)
    for name, ports in stacks.items():
        cluster_extra = {int(ports[k]) + d for k in ("LAKEBUS_KAFKA_PORT", "LAKEBUS_KAFKA_CONTROLLER_PORT",
                                                     "LAKEBUS_CONNECT_PORT") for d in (10, 20)}
        assert max(taken(ports) | cluster_extra) < 32768, name


def test_the_current_state_merge_keeps_the_latest_change_per_key_and_deletes():
    from lakebus_dagster.cdc.current_state import merge_sql, newer_than

    sql = merge_sql("lake.ns.t_current", "v", ["id"], ["id", "amount"])
    assert "ON t.`id` = s.`id`" in sql
    # a delete matches on the key only and deletes; anything else replaces or inserts, with its coordinates
    assert "WHEN MATCHED AND coalesce(s.`__deleted`, 'false') = 'true' THEN DELETE" in sql
    assert "WHEN MATCHED THEN UPDATE SET t.`id` = s.`id`, t.`amount` = s.`amount`, t.`__op` = s.`__op`" in sql
    assert "WHEN NOT MATCHED AND NOT coalesce(s.`__deleted`, 'false') = 'true' THEN INSERT" in sql
    assert "`_kafka_offset`" in sql
    # incremental: only changes past the watermark, per partition; an unknown partition is read whole
    assert newer_than({}) == "true"
    assert newer_than({"0": 41}) == "((`_kafka_partition` = 0 AND `_kafka_offset` > 41) OR `_kafka_partition` NOT IN (0))"
    assert _spec(name="shop", namespace="demo_cdc").current_table("orders") == "demo_cdc.pg_app_orders_current"


def test_the_merge_never_writes_the_toast_placeholder_it_keeps_the_latest_known_value():
    from lakebus_dagster.cdc.current_state import UNAVAILABLE_PLACEHOLDER, latest_sql, merge_sql

    view = latest_sql("c", {}, ["id"], (("body", "string"), ("blob", "binary")))
    # per TOAST-able column: the latest value among the key's changes that is not the placeholder
    # (a struct, so a value set to null is known, not "none known")
    assert (f"last_value(CASE WHEN `body` <=> CAST('{UNAVAILABLE_PLACEHOLDER}' AS string) THEN NULL ELSE "
            "named_struct('v', `body`) END, true) OVER (PARTITION BY `id` ORDER BY `_kafka_partition`, `_kafka_offset` "
            "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS `_lakebus_known_body`") in view
    assert f"CAST('{UNAVAILABLE_PLACEHOLDER}' AS binary)" in view
    sql = merge_sql("t_current", "v", ["id"], ["id", "body", "status"], ("body",))
    # none known in the run: the row keeps its own value; a new row gets what is known
    assert "t.`body` = CASE WHEN s.`_lakebus_known_body` IS NULL THEN t.`body` ELSE s.`_lakebus_known_body`.v END" in sql
    assert "CASE WHEN s.`_lakebus_known_body` IS NULL THEN NULL ELSE s.`_lakebus_known_body`.v END" in sql
    assert "t.`status` = s.`status`" in sql


def test_an_added_column_the_sink_typed_as_a_string_is_cast_into_the_databases_type_in_the_current_state():
    """The change table keeps the sink's mapping of an added column (Debezium's strings for timestamptz and
    numeric); the current-state table gets the type provisioning gives the column, read from the database
    only when a column is new to it, and the MERGE casts into it."""
    from lakebus_dagster.cdc.current_state import casts_for, merge_sql, spark_type

    spec = _spec(name="shop")
    reads = []

    def source_types():
        reads.append(1)
        return {spark_column: spark_type(iceberg_type(spec, "orders", column)) for spark_column, column in (
            ("paid_at", Column("paid_at", "timestamp with time zone", None, None, False)),
            ("total", Column("total", "numeric", 12, 2, False)),
            ("due", Column("due", "date", None, None, False)))} | {"note": "string"}

    changes = {"status": "string", "note": "string", "paid_at": "string", "total": "string", "due": "date"}
    # the columns are new to the current-state table: the database says what they are; text stays text
    assert casts_for(spec, "orders", changes, {"status": "string"}, source_types) == {
        "paid_at": "timestamp", "total": "decimal(12,2)"}
    assert reads == [1]
    # once in the current-state table, its type decides, and the database is not read again
    current = {"status": "string", "note": "string", "paid_at": "timestamp", "total": "decimal(12,2)", "due": "date"}
    assert casts_for(spec, "orders", changes, current, source_types) == {"paid_at": "timestamp", "total": "decimal(12,2)"}
    assert reads == [1]
    # a column the source no longer has stays what the change table holds
    assert casts_for(spec, "orders", {"gone": "string"}, {}, dict) == {}
    with pytest.raises(CaptureError, match="column status of demo_cdc.pg_app_orders is a string, its current-state column is bigint"):
        casts_for(spec, "orders", {"status": "string"}, {"status": "bigint"}, dict)
    sql = merge_sql("t_current", "v", ["id"], ["id", "paid_at", "note"], ("note",), {"paid_at": "timestamp"})
    assert "t.`paid_at` = CAST(s.`paid_at` AS timestamp)" in sql and "VALUES (s.`id`, CAST(s.`paid_at` AS timestamp)" in sql


def test_resync_signals_are_filtered_incremental_snapshots_keyed_by_the_prefix():
    import json

    from lakebus_dagster.cdc.resync import execute_snapshot, resync_filter, snapshot_state, stop_snapshot

    spec = _spec(name="shop", signal_bootstrap="127.0.0.1:19092")
    cfg = spec.source_config()
    assert (cfg["read.only"], cfg["signal.enabled.channels"], cfg["signal.kafka.topic"]) == ("true", "kafka", "shop.signals")
    assert "shop.signals" in [t.name for t in spec.source_spec().topics]
    assert "signal.kafka.topic" not in _spec(name="shop").source_config()  # no channel, no re-sync
    condition = resync_filter(spec, "orders", "updated_at", "2026-11-27T10:00:00+00:00")
    assert condition == "updated_at >= '2026-11-27T10:00:00+00:00'"
    key, value = execute_snapshot(spec, "orders", condition)
    assert key == "shop"
    assert json.loads(value) == {"type": "execute-snapshot", "data": {
        "data-collections": ["app.orders"], "type": "INCREMENTAL",
        "additional-conditions": [{"data-collection": "app.orders", "filter": condition}]}}
    assert json.loads(stop_snapshot(spec, "orders")[1])["type"] == "stop-snapshot"
    for args, named in ((("payments", "updated_at", "2026-11-27T10:00:00+00:00"), "'payments' is not a captured table"),
                        (("orders", "updated_at; drop", "2026-11-27T10:00:00+00:00"), "not a plain identifier"),
                        (("orders", "updated_at", "yesterday"), "not an ISO timestamp"),
                        (("orders", "updated_at", "2026-11-27T10:00:00"), "no time zone")):
        with pytest.raises(CaptureError, match=re.escape(named)):
            resync_filter(spec, *args)
    assert snapshot_state([{"partition": {"server": "shop"}, "offset": {"lsn": 1}}]) == {}
    assert snapshot_state([{"partition": {}, "offset": {"lsn": 1, "incremental_snapshot_collections": "x"}}]) == {
        "incremental_snapshot_collections": "x"}


def test_moving_a_postgres_sources_offset_is_refused_with_the_reason():
    from lakebus_dagster.connect.source_offsets import OffsetFormatError, validate_source_offsets

    offsets = [{"partition": {"server": "shop"}, "offset": {"lsn": 26397240}}]
    with pytest.raises(OffsetFormatError, match="resumes decoding at the replication slot's confirmed_flush_lsn"):
        validate_source_offsets("shop-postgres-source", DEBEZIUM_POSTGRES_CLASS, {}, offsets, offsets)


def test_the_current_state_assets_share_the_spark_pool():
    import dagster as dg

    from lakebus_dagster.defs.cdc.assets import capture_assets
    from lakebus_dagster.defs.spark import SPARK_POOL

    built = [a for a in capture_assets(ChangeCaptureResource().specs()) if isinstance(a, dg.AssetsDefinition)]
    assert built and {asset.op.pool for asset in built} == {SPARK_POOL}


def test_a_full_resnapshot_is_an_unfiltered_incremental_snapshot_and_its_rereads_are_counted():
    import json

    from lakebus_dagster.cdc.resync import full_snapshot, reread_ops

    spec = _spec(name="shop", signal_bootstrap="127.0.0.1:19092")
    key, value = full_snapshot(spec, ["users", "orders"])
    assert key == "shop"
    # no additional-conditions: every row of both tables, on the running connector
    assert json.loads(value) == {"type": "execute-snapshot", "data": {"data-collections": ["app.users", "app.orders"],
                                                                      "type": "INCREMENTAL"}}
    for tables in (["payments"], []):
        with pytest.raises(CaptureError, match="is not a captured table"):
            full_snapshot(spec, tables)
    envelope = lambda op: json.dumps({"schema": {}, "payload": {"op": op, "after": {"id": 1}}}).encode()  # noqa: E731
    assert reread_ops([envelope("r"), envelope("u"), envelope("r"), None, envelope("c")]) == {"r": 2, "u": 1, "c": 1}


def test_the_cdc_ledger_judges_each_change_topic_against_its_change_table_and_the_capture_dlq():
    from lakebus_dagster.cdc.ledger import change_topic_layouts

    spec = _spec(name="shop", namespace="demo_cdc")
    layouts = change_topic_layouts(spec)
    assert sorted(layouts) == sorted(spec.tables)
    orders = layouts["orders"]
    assert (orders.bus_topic.name, orders.dlq_topic.name, orders.tables, orders.connector_name) == (
        "shop.app.orders", "dlq-shop", ("demo_cdc.pg_app_orders",), "shop-cdc-iceberg-sink")
    # its state lives where the events ledger's store keeps a topic's (<topic>.ledger), compacted, created by provisioning
    from lakebus_dagster.ledger.store import state_topic_name

    assert orders.offset_ledger_topic.name == state_topic_name("shop.app.orders") == "shop.app.orders.ledger"
    assert orders.offset_ledger_topic.configs == {"cleanup.policy": "compact"}
    assert {t.name for t in spec.sink_spec(_Lake()).topics} >= {"shop.app.orders.ledger", "shop.app.users.ledger"}


class _Connect:
    def __init__(self, existing):
        self.existing = existing

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def exists(self, name):
        return name in self.existing


def test_the_cdc_ledger_schedule_is_in_the_code_location_only_with_capture_on(clean_env):
    """Through Dagster's public APIs: the code location built from settings with LAKEBUS_POSTGRES=on has
    cdc_offset_ledger_schedule (the events ledger's cadence, running by default, on cdc_offset_ledger);
    with it off the schedule is absent and the job stays. A tick skips until the change-table sink exists."""
    import dagster as dg

    from lakebus_dagster.defs.ledger.jobs import LEDGER_CRON
    from lakebus_dagster.defs.resources import ConnectResource
    from lakebus_dagster.definitions import build_definitions
    from lakebus_dagster.settings import load_settings

    clean_env.setenv("LAKEBUS_S3_ACCESS_KEY_ID", "unit-test-key")
    clean_env.setenv("LAKEBUS_S3_SECRET_ACCESS_KEY", "unit-test-secret")
    off = build_definitions(load_settings())
    dg.Definitions.validate_loadable(off)
    assert "cdc_offset_ledger_schedule" not in {s.name for s in off.get_repository_def().schedule_defs}
    assert off.resolve_job_def("cdc_offset_ledger").name == "cdc_offset_ledger"

    clean_env.setenv("LAKEBUS_POSTGRES", "on")
    on = build_definitions(load_settings())
    dg.Definitions.validate_loadable(on)
    schedule = on.resolve_schedule_def("cdc_offset_ledger_schedule")
    events = on.resolve_schedule_def("offset_ledger_schedule")
    assert (schedule.job_name, schedule.cron_schedule, schedule.default_status) == (
        "cdc_offset_ledger", LEDGER_CRON, dg.DefaultScheduleStatus.RUNNING)
    assert schedule.cron_schedule == events.cron_schedule

    class FakeConnect(ConnectResource):
        existing: list[str] = []

        def client(self):
            return _Connect(self.existing)

    capture = ChangeCaptureResource(enabled=True, name="shop")
    for existing, skipped in (([], True), (["shop-cdc-iceberg-sink"], False)):
        context = dg.build_schedule_context(resources={"capture": capture, "connect": FakeConnect(url="http://connect.invalid:8083", existing=existing)})
        result = schedule.evaluate_tick(context)
        if skipped:
            assert not result.run_requests and "shop-cdc-iceberg-sink is not deployed yet" in result.skip_message
        else:
            (request,) = result.run_requests
            assert dg.validate_run_config(on.resolve_job_def("cdc_offset_ledger"), request.run_config)
