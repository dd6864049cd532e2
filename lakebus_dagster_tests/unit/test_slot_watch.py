"""The status sensor's replication-slot watch (change capture, issue 30.5): lag in bytes and age as
observations of ``cdc/replication_slot``, an inactive slot one incident after its threshold (one
alert, one recovery), a lost slot one incident that the source's FAILED task joins (still one
alert), an unreadable database an incident of its own. The sensor is evaluated as the daemon does
(:mod:`test_monitoring`'s fakes for Connect and Kafka); the slot's ``pg_replication_slots`` row is
scripted. The real slot: ``integration/test_cdc_postgres.py``."""

from __future__ import annotations

import dagster as dg
import pytest

from lakebus_dagster.connect import ConnectorOverview, ConnectorStatus
from lakebus_dagster.connect.models import TaskStatus
from lakebus_dagster.defs import connectors, monitoring, recovery
from lakebus_dagster.defs.asset_keys import CDC_SLOT_KEY
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.monitoring import slots
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster.monitor.slot_watch import slot_incidents, track
from lakebus_dagster_tests.clocks import FixedClock

from .test_monitoring import (  # noqa: F401 - _reset_fakes: the autouse fixture of those fakes
    INSTANCE,
    NOW,
    SCRIPT,
    SENT,
    FakeConnect,
    FakeIceberg,
    FakeKafka,
    Policy,
    RecordingAlerts,
    _reset_fakes,
    overview,
)

SOURCE, SINK, SLOT = "shop-postgres-source", "shop-cdc-iceberg-sink", "lakebus_shop"
#: the slot the fake database answers with (None: no slot; an Exception: the database fails)
READING: list = []


@pytest.fixture(autouse=True)
def _slot(monkeypatch):
    READING[:] = [reading()]
    SCRIPT[:] = [capture_listing()]
    monkeypatch.setattr(slots, "_read_slot", lambda spec: (None, str(READING[0])) if isinstance(READING[0], Exception)
                        else (READING[0], None))
    monkeypatch.setattr("lakebus_dagster.defs.monitoring.observation.declared_states",
                        lambda kafka, layout, extra=(): {"events-iceberg-sink": "RUNNING", SOURCE: "RUNNING", SINK: "RUNNING"})


def reading(active=True, lsn="0/1000", unconfirmed=0, retained=4096, wal_status="reserved", safe=1 << 30) -> dict:
    return {"slot": SLOT, "plugin": "pgoutput", "active": active, "wal_status": wal_status, "safe_wal_size": safe,
            "unconfirmed_bytes": unconfirmed, "retained_bytes": retained, "confirmed_flush_lsn": lsn}


def capture_listing(source_task: str = "RUNNING", trace: str | None = None) -> dict:
    """The events sink running, and change capture's source and sink."""
    def connector(name, state, kind, trace=None):
        tasks = [TaskStatus(id=0, state=state, worker_id="w1", trace=trace)]
        return ConnectorOverview(status=ConnectorStatus(name=name, state="RUNNING", worker_id="w1", trace=None, tasks=tasks,
                                                        type=kind), info=None)
    return {**overview("RUNNING"), SOURCE: connector(SOURCE, source_task, "source", trace), SINK: connector(SINK, "RUNNING", "sink")}


def tick(cursor=None, **policy):
    defs = dg.Definitions(
        assets=monitoring.defs.assets, sensors=monitoring.defs.sensors, jobs=[*recovery.defs.jobs, *connectors.defs.jobs],
        resources={"connect": FakeConnect(url="http://x"), "kafka": FakeKafka(bootstrap_servers="x:1"),
                   "operations": FakeKafka(bootstrap_servers="x:1"),  # the recovery jobs' (bus-changing) client
                   "iceberg": FakeIceberg(catalog_uri="http://x", warehouse="s3://w", s3_endpoint="http://x",
                                          access_key_id="a", secret_access_key="s"),
                   "layout": BusLayoutResource(), "alerts": RecordingAlerts(),
                   "monitoring_policy": Policy(backoff_unit_seconds=0.0, auto_restart=False, **policy),
                   "capture": ChangeCaptureResource(enabled=True, name="shop"), "clock": FixedClock(at=NOW[0])})
    sensor = defs.resolve_sensor_def("connector_status_sensor")
    with dg.build_sensor_context(cursor=cursor, instance=INSTANCE[0], definitions=defs, sensor_name=sensor.name,
                                 resources=defs.resources) as ctx:
        result = sensor.evaluate_tick(ctx)
    slot_events = [e for e in (result.asset_events or []) if e.asset_key == CDC_SLOT_KEY]
    return result.cursor, [{k: v.value for k, v in e.metadata.items()} for e in slot_events]


def mine() -> list[tuple[str, str]]:
    return [(a["kind"], a["title"]) for a in SENT if SLOT in a["title"] or SOURCE in a["title"]]


def test_lag_age_is_how_long_the_confirmed_position_has_not_moved_while_behind():
    state: dict = {}
    assert track(state, reading(unconfirmed=0), 100.0)["lag_age_s"] == 0.0
    assert track(state, reading(unconfirmed=500), 130.0)["lag_age_s"] == 30.0  # same position, now behind
    assert track(state, reading(lsn="0/2000", unconfirmed=500), 140.0)["lag_age_s"] == 0.0  # it moved
    assert track(state, reading(lsn="0/2000", unconfirmed=9000), 200.0)["lag_age_s"] == 60.0
    assert track(state, None, 210.0) == {} and state == {}
    assert slot_incidents(SOURCE, {}, 210.0, 300.0) == []


def test_the_slot_is_observed_with_its_lag_every_minute_and_at_once_when_it_changes():
    cursor, seen = tick()
    assert seen == [{"slot": SLOT, "connector": SOURCE, "active": True, "wal_status": "reserved", "lag_bytes": 0,
                     "retained_bytes": 4096, "safe_wal_size": 1 << 30, "lag_age_s": 0.0, "inactive_s": 0.0,
                     "confirmed_flush_lsn": "0/1000"}]
    NOW[0] += 10
    READING[:] = [reading(unconfirmed=2_000_000, retained=3_000_000)]
    cursor, seen = tick(cursor)
    assert seen == []  # nothing about it changed but numbers: not every 10 s tick is recorded
    NOW[0] += 55
    cursor, seen = tick(cursor)
    assert [(s["lag_bytes"], s["retained_bytes"], s["lag_age_s"]) for s in seen] == [(2_000_000, 3_000_000, 65.0)]
    NOW[0] += 10
    READING[:] = [reading(active=False, unconfirmed=2_000_000)]
    cursor, seen = tick(cursor)
    assert [(s["active"], s["inactive_s"]) for s in seen] == [(False, 0.0)]  # at once: it went inactive
    assert mine() == []


def test_an_inactive_slot_is_one_incident_after_its_threshold_and_recovers_once():
    assert Policy().slot_inactive_threshold_s == 300.0  # the shipped threshold, which this test runs with
    SCRIPT[:] = [capture_listing()]
    READING[:] = [reading(active=False, unconfirmed=5_000_000, retained=6 * 1024 * 1024)]
    cursor, _ = tick()
    for _ in range(29):  # 290 s of ticks: a slot briefly without a reader (a task restart) is no incident
        NOW[0] += 10
        cursor, _ = tick(cursor)
    assert mine() == []
    for _ in range(10):  # past the threshold: one alert, however many ticks see it
        NOW[0] += 10
        cursor, _ = tick(cursor)
    assert [k for k, _ in mine()] == ["incident"]
    assert "INACTIVE for 300s" in mine()[0][1] and "6.0 MiB of WAL held" in mine()[0][1], mine()
    READING[:] = [reading(active=True, lsn="0/9000")]
    for _ in range(3):
        NOW[0] += 10
        cursor, _ = tick(cursor)
    assert [k for k, _ in mine()] == ["incident", "recovery"]


def test_a_lost_slot_and_the_source_failing_on_it_are_one_incident_one_alert():
    SCRIPT[:] = [capture_listing()]
    READING[:] = [reading(active=False, wal_status="lost", safe=None)]
    cursor, _ = tick()
    assert [k for k, _ in mine()] == ["incident"] and "is LOST" in mine()[0][1]
    trace = "io.debezium.DebeziumException: ... but this is no longer available on the server."
    SCRIPT[:] = [capture_listing("FAILED", trace)]
    for _ in range(5):
        NOW[0] += 10
        cursor, _ = tick(cursor)
    assert [k for k, _ in mine()] == ["incident"], mine()  # the FAILED task is a part of the slot's incident


def test_a_database_the_sensor_cannot_read_is_an_incident_after_the_threshold_not_a_failed_tick():
    SCRIPT[:] = [capture_listing()]
    READING[:] = [ConnectionError("connection refused")]
    cursor, seen = tick(kafka_unreadable_threshold_s=60.0)
    assert seen == [] and mine() == []
    for _ in range(6):
        NOW[0] += 10
        cursor, _ = tick(cursor, kafka_unreadable_threshold_s=60.0)
    assert [k for k, _ in mine()] == ["incident"] and "cannot read replication slot" in mine()[0][1]
