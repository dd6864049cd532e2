"""Break the sink for real, get exactly one alert, remediate, reconcile counts; DLQ alert → replay once."""

from __future__ import annotations

import json
import pathlib
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import dagster as dg
import pytest

from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.monitoring.resources import AlertResource, MonitoringPolicyResource
from lakebus_dagster.defs.monitoring.sensors import connector_status_sensor, dlq_sensor
from lakebus_dagster.defs.resources import BusLayoutResource, build_resources
from lakebus_dagster.events import Bet, EnvelopeEncoder, EventProducer
from lakebus_dagster.lake.catalog import load_catalog

pytestmark = pytest.mark.integration


@pytest.fixture
def webhook(request):
    """A local HTTP server standing in for Slack: records every alert body it receives."""
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/hook", received
    server.shutdown()
    # test artifact: the alert bodies exactly as the webhook received them
    out = pathlib.Path("build") / "alerts"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{request.node.name}.json").write_text(json.dumps(received, indent=2, ensure_ascii=False))


@pytest.fixture
def bus(stack, run_id, webhook):
    url, received = webhook
    resources = {
        **build_resources(),
        "layout": BusLayoutResource(name_suffix=run_id, commit_interval_ms=2000),
        "alerts": AlertResource(sink="webhook", webhook_url=url, body_format="slack"),
        "monitoring_policy": MonitoringPolicyResource(auto_restart=False, recovery_stable_s=5.0),
    }
    layout = resources["layout"].layout()
    assert defs.resolve_job_def("provision_lakebus").execute_in_process(resources=resources).success
    client = ConnectClient(stack.connect_url)
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


def sensor_tick(sensor, resources, cursor):
    with dg.instance_for_test() as instance:
        return _tick(sensor, resources, cursor, instance)


def _tick(sensor, resources, cursor, instance):
    ctx = dg.build_sensor_context(cursor=cursor, resources=resources, instance=instance)
    result = sensor(ctx)
    return result, result.cursor


def test_poison_record_alert_once_remediate_reconcile(bus, stack, wait_for_rows):
    resources, layout, client, received = bus
    topic = layout.bus_topic.name
    with EventProducer(topic, {"bootstrap.servers": stack.bootstrap_servers}) as producer:
        for i in range(20):
            producer.send(bet(i))
    catalog = load_catalog(stack)
    wait_for_rows(catalog, layout.routes["bet"], 20, connector=layout.connector_name)

    raw = resources["kafka"].producer(acks="all")
    raw.produce(topic, key=b"poison", value=poison_envelope())
    raw.flush(10)
    with EventProducer(topic, {"bootstrap.servers": stack.bootstrap_servers}) as producer:
        for i in range(20, 30):
            producer.send(bet(i))

    # the task fails for real; the first sensor tick after that alerts, and only once
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not any(t.state == "FAILED" for t in client.status(layout.connector_name).tasks):
        time.sleep(1)
    cursor = None
    for _ in range(2):
        _, cursor = sensor_tick(connector_status_sensor, resources, cursor)
    assert len(received) == 1, received
    assert "FAILED" in received[0]["text"] and "task 0" in received[0]["text"]
    for _ in range(2):
        _, cursor = sensor_tick(connector_status_sensor, resources, cursor)
    assert len(received) == 1, "the same incident alerted twice"

    result = defs.resolve_job_def("remediate_poison_record").execute_in_process(resources=resources)
    assert result.success
    assert client.status(layout.connector_name).state == "RUNNING"

    # rows in Iceberg + records in the DLQ == events produced (30 good + 1 poison)
    wait_for_rows(catalog, layout.routes["bet"], 30, connector=layout.connector_name)
    rows = catalog.load_table(layout.routes["bet"]).scan().to_arrow()
    assert rows.num_rows == 30 and len(set(rows.column("order_id").to_pylist())) == 30
    dlq_result, _ = sensor_tick(dlq_sensor, resources, None)
    obs = dlq_result.asset_events[0]
    assert obs.metadata["new_records"].value == 1
    # the remediated record carries Connect-style error headers: class and root cause
    assert "org.apache.kafka.connect.errors.DataException" in obs.metadata["by_error_class"].value
    assert "NumberFormatException" in obs.metadata["samples"].value
    assert rows.num_rows + obs.metadata["new_records"].value == 31

    # the incident clears: one recovery notice
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(received) < 3:
        _, cursor = sensor_tick(connector_status_sensor, resources, cursor)
        time.sleep(1)
    assert any(a["text"].startswith("[lakebus] resolved:") for a in received), [a["text"] for a in received]


def test_bad_payload_dlq_alert_then_replay_lands_once(bus, stack, wait_for_rows):
    resources, layout, client, received = bus
    topic = layout.bus_topic.name
    bare = json.loads(EnvelopeEncoder().encode(bet(1)))["payload"]  # a producer that forgot the envelope
    raw = resources["kafka"].producer(acks="all")
    raw.produce(topic, key=b"u1", value=json.dumps(bare).encode())
    raw.flush(10)

    deadline, cursor, result = time.monotonic() + 60, None, None
    while time.monotonic() < deadline:
        result, cursor = sensor_tick(dlq_sensor, resources, cursor)
        if result.asset_events:
            break
        time.sleep(1)
    assert result is not None and result.asset_events, "no DLQ record seen"
    dlq_alerts = [a for a in received if "record(s) in" in a["text"]]
    assert len(dlq_alerts) == 1 and "DataException" in dlq_alerts[0]["text"] and "new error class" in dlq_alerts[0]["text"]
    again, cursor = sensor_tick(dlq_sensor, resources, cursor)
    assert not again.asset_events, "the DLQ record was counted twice"

    replay = defs.resolve_job_def("replay_dlq")
    cfg = {"ops": {"replay_dlq_op": {"config": {"wrap_bare_payloads": True}}}}
    first = replay.execute_in_process(resources=resources, run_config=cfg)
    replayed = {e.event_specific_data.metadata.get("replayed").value for e in first.all_node_events if e.is_successful_output}
    assert replayed == {1}
    wait_for_rows(load_catalog(stack), layout.routes["bet"], 1, connector=layout.connector_name)
    second = replay.execute_in_process(resources=resources, run_config=cfg)
    replayed = {e.event_specific_data.metadata.get("replayed").value for e in second.all_node_events if e.is_successful_output}
    assert replayed == {0}, "a DLQ record was replayed twice"
    rows = load_catalog(stack).load_table(layout.routes["bet"]).scan().to_arrow()
    assert rows.num_rows == 1 and rows.column("order_id").to_pylist() == ["o1"]
