"""The DLQ path on the real stack: a producer's broken record → the dlq_sensor (evaluated through
Dagster's tick machinery) alerts once per reason → replay_dlq of that reason class lands it once.
The poison-record path runs in a real daemon: ``test_monitoring_daemon.py``."""

from __future__ import annotations

import json
import time

import dagster as dg
import pytest

from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.alerts import AlertResource
from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster.events import Bet, EnvelopeEncoder
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster_tests.integration.helpers import TEST_COMMIT_INTERVAL_MS

pytestmark = pytest.mark.integration



@pytest.fixture
def bus(stack, run_id, webhook):
    url, received = webhook
    resources = {
        **build_resources(),
        "layout": BusLayoutResource(name_suffix=run_id, commit_interval_ms=TEST_COMMIT_INTERVAL_MS),
        "alerts": AlertResource(sink="webhook", webhook_url=url, body_format="slack"),
        "monitoring_policy": MonitoringPolicyResource(auto_restart=False, recovery_stable_s=5.0),
    }
    layout = resources["layout"].layout()
    assert defs.resolve_job_def("provision_lakebus").execute_in_process(resources=resources).success
    client = ConnectClient(stack.connect.urls[0])
    yield resources, layout, client, received
    if client.exists(layout.connector_name):
        client.delete(layout.connector_name)
    client.close()


def bet(i: int, hour: str = "10") -> Bet:
    return Bet(category="biz", event="bet", log_date="2025-11-27", hour=hour, plat_id=1, app_id=2, ts=1764237600000 + i,
               schema_version=1, user_id=100 + i % 7, order_id=f"o{i}", amount=float(i), currency="BRL", game_id=1)


def poison_envelope() -> bytes:
    """Parses fine (so Connect's DLQ never sees it) but plat_id is a non-numeric string: the sink's put() fails."""
    env = json.loads(EnvelopeEncoder().encode(bet(999)))
    for f in env["schema"]["fields"]:
        if f["field"] == "plat_id":
            f["type"] = "string"
    env["payload"]["plat_id"] = "not-a-number"
    return json.dumps(env).encode()


def sensor_tick(sensor_name: str, resources: dict, cursor: str | None, instance) -> tuple:
    """One tick as the daemon evaluates it: a context built from the shipped definitions (with this
    test's resources), ``evaluate_tick``; returns (tick data, cursor)."""
    sensor = defs.resolve_sensor_def(sensor_name)
    with dg.build_sensor_context(cursor=cursor, instance=instance, definitions=defs, sensor_name=sensor_name,
                                 resources=resources) as ctx:
        result = sensor.evaluate_tick(ctx)
    return result, result.cursor


def test_bad_payload_dlq_alert_then_replay_lands_once(bus, stack, wait_for_rows):
    resources, layout, client, received = bus
    topic = layout.bus_topic.name
    bare = json.loads(EnvelopeEncoder().encode(bet(1)))["payload"]  # a producer that forgot the envelope
    raw = resources["kafka"].producer(acks="all")
    raw.produce(topic, key=b"u1", value=json.dumps(bare).encode())
    raw.flush(10)

    instance = dg.DagsterInstance.ephemeral()
    deadline, cursor, result = time.monotonic() + 60, None, None
    while time.monotonic() < deadline:
        result, cursor = sensor_tick("dlq_sensor", resources, cursor, instance)
        if result.asset_events:
            break
        time.sleep(1)
    assert result is not None and result.asset_events, "no DLQ record seen"
    dlq_alerts = [a for a in received if "record(s) in" in a["text"]]
    assert len(dlq_alerts) == 1 and "DataException" in dlq_alerts[0]["text"] and "NEW reason" in dlq_alerts[0]["text"]
    again, cursor = sensor_tick("dlq_sensor", resources, cursor, instance)
    assert not again.asset_events, "the DLQ record was counted twice"

    # a second record broken the same way is counted on the asset but is not a new alert
    raw.produce(topic, key=b"u2", value=json.dumps({**bare, "order_id": "o2"}).encode())
    raw.flush(10)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        result, cursor = sensor_tick("dlq_sensor", resources, cursor, instance)
        if result.asset_events:
            break
        time.sleep(1)
    assert result.asset_events[0].metadata["new_records"].value == 1
    assert len([a for a in received if "record(s) in" in a["text"]]) == 1, "the same DLQ reason alerted twice"

    replay = defs.resolve_job_def("replay_dlq")
    reason = next(iter(json.loads(cursor)["known_reasons"]))
    cfg = {"ops": {"replay_dlq_op": {"config": {"wrap_bare_payloads": True, "reason": reason, "confirm": layout.dlq_topic.name}}}}
    first = replay.execute_in_process(resources=resources, run_config=cfg)
    replayed = {e.event_specific_data.metadata.get("replayed").value for e in first.all_node_events if e.is_successful_output}
    assert replayed == {2}, "both records of the reason class are replayed"
    wait_for_rows(load_catalog(stack), layout.routes["bet"], 2, connector=layout.connector_name)
    second = replay.execute_in_process(resources=resources, run_config=cfg)
    replayed = {e.event_specific_data.metadata.get("replayed").value for e in second.all_node_events if e.is_successful_output}
    assert replayed == {0}, "a DLQ record was replayed twice"
    rows = load_catalog(stack).load_table(layout.routes["bet"]).scan().to_arrow()
    assert rows.num_rows == 2 and sorted(rows.column("order_id").to_pylist()) == ["o1", "o2"]
