"""Sensors with build_sensor_context and fake clients: alert once, recover once, restart with backoff."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from lakebus_dagster.connect import ConnectorOverview, ConnectorStatus, ConnectUnavailable
from lakebus_dagster.connect.models import TaskStatus
from lakebus_dagster.defs.monitoring.resources import AlertDeliveryError, AlertResource, MonitoringPolicyResource, alert_body
from lakebus_dagster.defs.monitoring.sensors import connector_status_sensor
from lakebus_dagster.defs.resources import BusLayoutResource, ConnectResource
from lakebus_dagster.monitor.dlq import decode
from lakebus_dagster.monitor.restart_policy import RestartPolicy

NAME = "events-iceberg-sink"
TRACE = "org.apache.kafka.connect.errors.ConnectException: Exiting WorkerSinkTask\n\tat x\nCaused by: boom"


# Dagster copies resources when it builds a context, so the fakes' state lives at module level.
SCRIPT: list = []
SENT: list = []
FAIL: list = []


INSTANCE: list = []


@pytest.fixture(autouse=True)
def _reset_fakes():
    SCRIPT.clear(), SENT.clear(), FAIL.clear()
    with dg.instance_for_test() as instance:
        INSTANCE[:] = [instance]
        yield


class FakeConnect(ConnectResource):
    def client(self):

        class _C:
            def __enter__(self):
                return self

            def __exit__(self, *a):
                return None

            def list_connectors(self, **_):
                item = SCRIPT.pop(0) if len(SCRIPT) > 1 else SCRIPT[0]
                if isinstance(item, Exception):
                    raise item
                return item

        return _C()


class RecordingAlerts(AlertResource):
    def send(self, alert, log):
        if FAIL and FAIL.pop(0):
            raise AlertDeliveryError("webhook down")
        SENT.append(alert)


def overview(task_state: str, connector_state: str = "RUNNING") -> dict:
    status = ConnectorStatus(
        name=NAME,
        state=connector_state,
        worker_id="w1",
        trace=None,
        tasks=[TaskStatus(id=0, state=task_state, worker_id="w1", trace=TRACE if task_state == "FAILED" else None)],
        type="sink",
    )
    return {NAME: ConnectorOverview(status=status, info=None)}


def Policy(**kw) -> MonitoringPolicyResource:  # noqa: N802 - reads like the resource it builds
    """Recovery is immediate in unit tests unless a test asks for a stable period."""
    return MonitoringPolicyResource(**{"recovery_stable_s": 0.0, **kw})


def tick(connect, alerts, cursor=None, policy=None):
    ctx = dg.build_sensor_context(
        cursor=cursor,
        instance=INSTANCE[0],
        resources={
            "connect": connect,
            "layout": BusLayoutResource(),
            "alerts": alerts,
            "monitoring_policy": policy or Policy(backoff_unit_seconds=0.0),
        },
    )
    result = connector_status_sensor(ctx)
    return result, result.cursor


def test_incident_alerts_once_then_recovers_once():
    connect = FakeConnect(url="http://x")
    alerts = RecordingAlerts()
    SCRIPT[:] = [overview("FAILED")]
    _, cursor = tick(connect, alerts, policy=Policy(auto_restart=False))
    assert [a["kind"] for a in SENT] == ["incident"]
    assert "task 0 FAILED" in SENT[0]["title"] and "ConnectException" in SENT[0]["title"]
    result, cursor = tick(connect, alerts, cursor, policy=Policy(auto_restart=False))
    assert len(SENT) == 1 and result.skip_reason is not None
    SCRIPT[:] = [overview("RUNNING")]
    _, cursor = tick(connect, alerts, cursor)
    assert [a["kind"] for a in SENT] == ["incident", "recovery"]
    tick(connect, alerts, cursor)
    assert len(SENT) == 2


def test_connect_unreachable_is_one_incident_not_a_crash():
    connect = FakeConnect(url="http://x")
    alerts = RecordingAlerts()
    SCRIPT[:] = [ConnectUnavailable("refused", method="GET", path="/connectors")]
    _, cursor = tick(connect, alerts)
    _, cursor = tick(connect, alerts, cursor)
    assert [a["kind"] for a in SENT] == ["incident"] and "unavailable" in SENT[0]["title"]


def test_restart_requests_follow_backoff_then_escalate():
    connect = FakeConnect(url="http://x")
    alerts = RecordingAlerts()
    SCRIPT[:] = [overview("FAILED")]
    policy = Policy(max_restarts=2, backoff_unit_seconds=0.0)
    result, cursor = tick(connect, alerts, policy=policy)
    assert len(result.run_requests) == 1
    req = result.run_requests[0]
    assert req.job_name == "restart_connector" and req.tags["lakebus/attempt"] == "1"
    assert req.run_config["ops"]["restart_connector_op"]["config"] == {"connector": NAME, "only_failed": True, "include_tasks": True}
    result, cursor = tick(connect, alerts, cursor, policy=policy)
    assert len(result.run_requests) == 1 and result.run_requests[0].tags["lakebus/attempt"] == "2"
    result, cursor = tick(connect, alerts, cursor, policy=policy)
    assert not result.run_requests
    assert [a["kind"] for a in SENT] == ["incident", "escalation"]
    tick(connect, alerts, cursor, policy=policy)
    assert [a["kind"] for a in SENT] == ["incident", "escalation"]


def test_restart_waits_for_backoff():
    connect = FakeConnect(url="http://x")
    SCRIPT[:] = [overview("FAILED")]
    policy = Policy(backoff_unit_seconds=3600.0)
    result, cursor = tick(connect, RecordingAlerts(), policy=policy)
    assert len(result.run_requests) == 1  # the first restart is immediate
    result, cursor = tick(connect, RecordingAlerts(), cursor, policy=policy)
    assert not result.run_requests  # the next one waits 2 units


def test_backoff_schedule_and_cap():
    policy = RestartPolicy(max_attempts=20, cap_minutes=60, unit_seconds=60)
    assert [policy.backoff_seconds(n) / 60 for n in range(10)] == [0, 2, 6, 12, 20, 30, 42, 56, 60, 60]
    assert policy.due(0, None, 0) and not policy.due(1, 100.0, 100.0 + 119) and policy.due(1, 100.0, 100.0 + 120)
    assert not policy.due(20, None, 0) and policy.exhausted(20)


def test_failed_webhook_is_retried_next_tick_not_lost():
    connect = FakeConnect(url="http://x")
    alerts = RecordingAlerts()
    FAIL[:] = [True]
    SCRIPT[:] = [overview("FAILED")]
    _, cursor = tick(connect, alerts, policy=Policy(auto_restart=False))
    assert SENT == [] and len(json.loads(cursor)["pending_alerts"]) == 1
    _, cursor = tick(connect, alerts, cursor, policy=Policy(auto_restart=False))
    assert [a["kind"] for a in SENT] == ["incident"] and json.loads(cursor)["pending_alerts"] == []


def test_unassigned_task_is_an_incident_only_after_threshold():
    connect = FakeConnect(url="http://x")
    alerts = RecordingAlerts()
    SCRIPT[:] = [overview("UNASSIGNED")]
    _, cursor = tick(connect, alerts, policy=Policy(unassigned_threshold_s=3600))
    assert SENT == []
    tick(connect, alerts, policy=Policy(unassigned_threshold_s=0))
    assert [a["kind"] for a in SENT] == ["incident"] and "UNASSIGNED" in SENT[0]["title"]


@pytest.mark.parametrize("fmt,expected_key", [("slack", "text"), ("feishu", "msg_type"), ("generic", "kind")])
def test_alert_bodies(fmt, expected_key):
    body = alert_body({"kind": "incident", "title": "t", "text": "x"}, fmt)
    assert expected_key in body


def test_decode_dlq_headers():
    headers = [
        ("__connect.errors.topic", b"events"),
        ("__connect.errors.partition", b"0"),
        ("__connect.errors.offset", b"42"),
        ("__connect.errors.stage", b"VALUE_CONVERTER"),
        ("__connect.errors.exception.class.name", b"org.apache.kafka.connect.errors.DataException"),
        ("__connect.errors.exception.message", b"Converting byte[] failed\nmore"),
        ("other", None),
    ]
    dl = decode(0, 7, headers, b"{bad", b"k")
    assert (dl.original_topic, dl.original_partition, dl.original_offset) == ("events", 0, 42)
    assert dl.error_class.endswith("DataException") and dl.error_message == "Converting byte[] failed"
    assert decode(0, 8, None, b"x", None).error_class.startswith("unknown")


def test_flapping_task_is_one_incident_and_keeps_its_restart_count():
    """restart -> RUNNING for a moment -> FAILED again on the same record: one alert, attempts grow."""
    connect = FakeConnect(url="http://x")
    alerts = RecordingAlerts()
    policy = Policy(max_restarts=2, backoff_unit_seconds=0.0, recovery_stable_s=3600)
    cursor = None
    attempts = []
    for state in ["FAILED", "RUNNING", "FAILED", "RUNNING", "FAILED", "FAILED"]:
        SCRIPT[:] = [overview(state)]
        result, cursor = tick(connect, alerts, cursor, policy=policy)
        attempts += [r.tags["lakebus/attempt"] for r in result.run_requests]
    assert attempts == ["1", "2"]
    assert [a["kind"] for a in SENT] == ["incident", "escalation"]


def test_poison_error_names_the_sinks_exception_and_root_cause():
    from lakebus_dagster.defs.monitoring.jobs import poison_error

    trace = (
        "org.apache.kafka.connect.errors.ConnectException: Exiting WorkerSinkTask due to unrecoverable exception.\n"
        "\tat org.apache.kafka.connect.runtime.WorkerSinkTask.deliverMessages(WorkerSinkTask.java:636)\n"
        "Caused by: org.apache.kafka.connect.errors.DataException: An error occurred converting record, "
        "topic: events, partition, 0, offset: 20\n"
        "\tat org.apache.iceberg.connect.data.IcebergWriter.write(IcebergWriter.java:74)\n"
        "Caused by: java.lang.NumberFormatException: For input string: \"x\"\n"
    )
    cls, message = poison_error(trace)
    assert cls == "org.apache.kafka.connect.errors.DataException"
    assert message.startswith("An error occurred converting record, topic: events, partition, 0, offset: 20")
    assert message.endswith('root cause: java.lang.NumberFormatException: For input string: "x"')
