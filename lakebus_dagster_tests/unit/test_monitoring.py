"""The monitoring sensors evaluated the way the daemon does: ``SensorDefinition.evaluate_tick`` with a
context built from the definitions, so every run request is resolved against the sensor's targets
(an untargeted job fails here exactly as it fails a deployed tick). Fakes stand in for Connect,
Kafka and the catalog; the integration suite runs the same sensors in a real dagster-daemon."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from lakebus_dagster.connect import ConnectorOverview, ConnectorStatus, ConnectUnavailable
from lakebus_dagster.connect.models import TaskStatus
from lakebus_dagster.defs import connectors, monitoring, recovery
from lakebus_dagster.defs.monitoring import observation
from lakebus_dagster_tests.clocks import FixedClock
from lakebus_dagster.defs.alerts import ALERTS_ASSET_KEY, AlertDeliveryError, AlertResource, alert_body
from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.resources import BusLayoutResource, ConnectResource, IcebergCatalogResource, KafkaResource
from lakebus_dagster.monitor.dlq import decode
from lakebus_dagster.monitor.incidents import Incident, IncidentBook
from lakebus_dagster.monitor.restart_policy import RestartPolicy

NAME = "events-iceberg-sink"
TRACE = "org.apache.kafka.connect.errors.ConnectException: Exiting WorkerSinkTask\n\tat x\nCaused by: boom"
POISON_TRACE = (
    "org.apache.kafka.connect.errors.ConnectException: Exiting WorkerSinkTask due to unrecoverable exception.\n"
    "Caused by: org.apache.kafka.connect.errors.DataException: An error occurred converting record, "
    "topic: events, partition, 0, offset: 20\n"
    "Caused by: java.lang.NumberFormatException: For input string: \"x\"\n"
)


# Dagster copies resources when it builds a context, so the fakes' state lives at module level.
SCRIPT: list = []
SENT: list = []
FAIL: list = []
INSTANCE: list = []
#: what the stall watch sees (one partition): the sink's consumed offset (Connect), the bus's end,
#: the coordinator's committed control offset (None: no commit yet) and the control topic's end
PROGRESS = {"consumed": 0, "end": 0, "coordinator": None, "control_end": 0}
NOW = [1_000_000.0]
#: the control topic's records: offset -> (payload type, group id); every other offset below
#: PROGRESS["control_end"] is a transaction marker (see :func:`_send`)
CONTROL: dict = {}
#: the declared target state per connector, as the state topic would hold it
DECLARED: dict = {}


@pytest.fixture(autouse=True)
def _reset_fakes(monkeypatch):
    SCRIPT.clear(), SENT.clear(), FAIL.clear()
    PROGRESS.clear()
    PROGRESS.update(consumed=0, end=0, coordinator=None, control_end=0)
    CONTROL.clear()
    NOW[0] = 1_000_000.0
    DECLARED.clear()
    DECLARED[NAME] = "RUNNING"
    monkeypatch.setattr(observation, "declared_states", lambda kafka, layout, extra=(): dict(DECLARED))
    with dg.instance_for_test() as instance:
        INSTANCE[:] = [instance]
        yield


class _Client:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return None

    def list_connectors(self, **_):
        item = SCRIPT.pop(0) if len(SCRIPT) > 1 else SCRIPT[0]
        if isinstance(item, Exception):
            raise item
        return item

    def get_offsets(self, name):
        if PROGRESS.get("offsets_error"):
            raise PROGRESS["offsets_error"]
        return [{"partition": {"kafka_topic": "events", "kafka_partition": 0}, "offset": {"kafka_offset": PROGRESS["consumed"]}}]


class FakeConnect(ConnectResource):
    def client(self):
        return _Client()


def _zigzag(n: int) -> bytes:
    n, out = (n << 1) ^ (n >> 63), b""
    while n > 0x7F:
        out, n = out + bytes([n & 0x7F | 0x80]), n >> 7
    return out + bytes([n])


def control_record(kind: str, group: str, commit: bytes = b"", at_ms: float | None = None) -> bytes:
    """A control event as the 1.11 sink writes it (``AvroEncoderUtil``): magic, the writer schema
    (Java ``writeUTF``), the datum ``Event{id, type, timestamp (micros), group_id, payload}``; the
    payload starts with the 16-byte ``commit`` id when one is given."""
    from lakebus_dagster.monitor.control_events import EVENT_TYPES

    schema = json.dumps({"type": "record", "name": "Event", "fields": [
        {"name": n} for n in ("id", "type", "timestamp", "group_id", "payload")]}).encode()
    kind_id = {v: k for k, v in EVENT_TYPES.items()}[kind]
    return (b"\xc2\x01" + len(schema).to_bytes(2, "big") + schema + bytes(16) + _zigzag(kind_id)
            + _zigzag(int((NOW[0] * 1000 if at_ms is None else at_ms) * 1000)) + _zigzag(len(group.encode())) + group.encode()
            + (commit if commit else b"\x00payload"))


def _send(*kinds: str, group: str = f"connect-{NAME}") -> None:
    """The sink sends control events, each in its own Kafka transaction: the event, then its marker."""
    for kind in kinds:
        CONTROL[PROGRESS["control_end"]] = (kind, group)
        PROGRESS["control_end"] += 2


class _Message:
    def __init__(self, offset: int, value: bytes | None):
        self._offset, self._value = offset, value

    def error(self):
        if self._value is not None:
            return None
        from lakebus_dagster.kafka import PARTITION_EOF

        return type("Eof", (), {"code": lambda self: PARTITION_EOF})()

    def offset(self):
        return self._offset

    def partition(self):
        return 0

    def value(self):
        return self._value


class _Consumer:
    start = 0

    def assign(self, partitions):
        self.start = partitions[0].offset

    def consume(self, num_messages, timeout):
        """The control topic from the assigned offset: its records (markers skipped), then EOF."""
        records = [_Message(o, b"junk" if CONTROL[o][0] == "garbage" else control_record(*CONTROL[o])) for o in sorted(CONTROL) if self.start <= o < PROGRESS["control_end"]]
        self.start = PROGRESS["control_end"]
        return records + [_Message(self.start, None)]

    def list_topics(self, topic, timeout):
        class _T:
            partitions = {0: None}
            error = None

        class _Md:
            topics = {topic: _T()}

        return _Md()

    def get_watermark_offsets(self, tp, timeout):
        return 0, PROGRESS["control_end"] if tp.topic.startswith("iceberg-control") else PROGRESS["end"]

    def offsets_for_times(self, partitions, timeout):
        """The first record after the watermark is at PROGRESS["first_after"] (-1: none)."""
        from confluent_kafka import TopicPartition

        return [TopicPartition(tp.topic, tp.partition, PROGRESS.get("first_after", -1)) for tp in partitions]

    def close(self):
        pass


class _Admin:
    def list_consumer_group_offsets(self, requests):
        from concurrent.futures import Future

        from confluent_kafka import TopicPartition

        group = requests[0].group_id
        listed = type("Listed", (), {"topic_partitions": []})()
        if PROGRESS["coordinator"] is not None:
            listed.topic_partitions = [TopicPartition("iceberg-control-events", 0, PROGRESS["coordinator"])]
        future = Future()
        if PROGRESS.get("admin_timeout"):
            future.result = lambda timeout=None: (_ for _ in ()).throw(TimeoutError())  # never answered
        else:
            future.set_result(listed)
        return {group: future}


    def describe_consumer_groups(self, groups):
        """The sink tasks' group: PROGRESS["members"] (member id -> assigned partitions of the bus); its
        coordinators' group (``-coord``): PROGRESS["coordinators"] (member id -> control partitions)."""
        from concurrent.futures import Future

        from confluent_kafka import TopicPartition

        def described(group):
            coord = group.endswith("-coord")
            listed = PROGRESS.get("coordinators", {"coordinator-0": [0]}) if coord else PROGRESS.get("members", {"task-0": [0]})
            topic = "iceberg-control-events" if coord else "events"
            members = [type("Member", (), {"member_id": m, "assignment": type("A", (), {
                "topic_partitions": [TopicPartition(topic, p) for p in parts]})()})()
                for m, parts in listed.items()]
            future = Future()
            future.set_result(type("Described", (), {"members": members, "state": "STABLE"})())
            return future

        return {group: described(group) for group in groups}

    def describe_cluster(self, request_timeout=None):
        """The live brokers: PROGRESS["brokers"] (ids), three by default."""
        from concurrent.futures import Future

        future = Future()
        future.set_result(type("Cluster", (), {"nodes": [type("Node", (), {"id": b})() for b in PROGRESS.get("brokers", (1, 2, 3))]})())
        return future


class FakeKafka(KafkaResource):
    def consumer(self, group_id, **overrides):
        return _Consumer()

    def admin(self, **overrides):
        return _Admin()

    def clients(self):
        return self  # its consumer() and admin() stand in for KafkaClients'


class FakeIceberg(IcebergCatalogResource):
    """No tables, unless PROGRESS["valid_through"] is set: then every table's snapshot carries the
    sink's watermark (``kafka.connect.valid-through-ts``) and was committed at that epoch ms.
    PROGRESS["catalog_down"]: the catalog cannot be reached."""

    def load(self, name="lakebus"):
        from types import SimpleNamespace

        if PROGRESS.get("catalog_down"):
            raise ConnectionError("catalog refused the connection")
        mark = PROGRESS.get("valid_through")
        snapshot = SimpleNamespace(timestamp_ms=mark, summary=SimpleNamespace(
            additional_properties={"kafka.connect.valid-through-ts": "2025-11-26T10:00:00.000Z"}))

        class _Catalog:
            def table_exists(self, table):
                return mark is not None

            def load_table(self, table):
                return SimpleNamespace(current_snapshot=lambda: snapshot)

        return _Catalog()


class RecordingAlerts(AlertResource):
    def send(self, alert, log):
        if FAIL and FAIL.pop(0):
            raise AlertDeliveryError("webhook down")
        SENT.append(alert)


def overview(task_state: str, connector_state: str = "RUNNING", trace: str = TRACE, worker: str = "w1") -> dict:
    status = ConnectorStatus(
        name=NAME,
        state=connector_state,
        worker_id=worker,
        trace=None,
        tasks=[TaskStatus(id=0, state=task_state, worker_id=worker, trace=trace if task_state == "FAILED" else None)],
        type="sink",
    )
    return {NAME: ConnectorOverview(status=status, info=None)}


def Policy(**kw) -> MonitoringPolicyResource:  # noqa: N802 - reads like the resource it builds
    """Recovery is immediate in unit tests unless a test asks for a stable period."""
    return MonitoringPolicyResource(**{"recovery_stable_s": 0.0, **kw})


def _definitions(policy, alerts, connect=None) -> dg.Definitions:
    """The monitoring and connector domains as shipped (sensors + the jobs they target), fake I/O
    (``connect``: a real ConnectResource, e.g. on fake HTTP workers, instead of the fake client)."""
    lake = dict(catalog_uri="http://x", warehouse="s3://w", s3_endpoint="http://x", access_key_id="a", secret_access_key="s")
    kafka = FakeKafka(bootstrap_servers="x:1")  # the observer and, for the bus-changing recovery jobs, operations
    return dg.Definitions(
        assets=monitoring.defs.assets,
        sensors=monitoring.defs.sensors,
        jobs=[*recovery.defs.jobs, *connectors.defs.jobs],
        resources={
            "connect": connect or FakeConnect(url="http://x"), "kafka": kafka, "operations": kafka, "iceberg": FakeIceberg(**lake),
            "layout": BusLayoutResource(), "alerts": alerts, "monitoring_policy": policy,
            "capture": ChangeCaptureResource(),  # off: only the events sink is watched
            "clock": FixedClock(at=NOW[0]),  # the test moves NOW between ticks
        },
    )


def tick(connect, alerts, cursor=None, policy=None, sensor_name="connector_status_sensor"):
    """One daemon-style evaluation: build the context from the definitions, evaluate_tick, return
    (result, cursor); run requests are resolved against the sensor's declared jobs."""
    defs = _definitions(policy or Policy(backoff_unit_seconds=0.0), alerts, connect)
    sensor = defs.resolve_sensor_def(sensor_name)
    with dg.build_sensor_context(cursor=cursor, instance=INSTANCE[0], definitions=defs, sensor_name=sensor_name,
                                 resources=defs.resources) as ctx:
        result = sensor.evaluate_tick(ctx)
    return result, result.cursor


def finish_restart_run(attempt: int, tags: dict) -> None:
    """What the daemon does with a restart request: a run of restart_connector with the request's
    tags, here already ended."""
    from dagster._core.test_utils import create_run_for_test  # private: no public API stores a run of a given status

    assert tags["lakebus/attempt"] == str(attempt)
    create_run_for_test(INSTANCE[0], job_name="restart_connector", status=dg.DagsterRunStatus.FAILURE, tags=dict(tags))


def test_incident_alerts_once_then_recovers_once():
    connect = None
    alerts = RecordingAlerts()
    SCRIPT[:] = [overview("FAILED")]
    _, cursor = tick(connect, alerts, policy=Policy(auto_restart=False))
    assert [a["kind"] for a in SENT] == ["incident"]
    assert "task 0 FAILED" in SENT[0]["title"] and "ConnectException" in SENT[0]["title"]
    result, cursor = tick(connect, alerts, cursor, policy=Policy(auto_restart=False))
    assert len(SENT) == 1 and result.skip_message is not None
    SCRIPT[:] = [overview("RUNNING")]
    _, cursor = tick(connect, alerts, cursor)
    assert [a["kind"] for a in SENT] == ["incident", "recovery"]
    tick(connect, alerts, cursor)
    assert len(SENT) == 2


def test_connect_unreachable_is_one_incident_not_a_crash():
    connect = None
    alerts = RecordingAlerts()
    SCRIPT[:] = [ConnectUnavailable("refused", method="GET", path="/connectors")]
    _, cursor = tick(connect, alerts)
    _, cursor = tick(connect, alerts, cursor)
    assert [a["kind"] for a in SENT] == ["incident"] and "Kafka Connect is unreachable" in SENT[0]["title"]


def test_restart_requests_follow_backoff_then_escalate():
    connect = None
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
    connect = None
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
    connect = None
    alerts = RecordingAlerts()
    FAIL[:] = [True]
    SCRIPT[:] = [overview("FAILED")]
    _, cursor = tick(connect, alerts, policy=Policy(auto_restart=False))
    assert SENT == [] and len(json.loads(cursor)["pending_alerts"]) == 1
    _, cursor = tick(connect, alerts, cursor, policy=Policy(auto_restart=False))
    assert [a["kind"] for a in SENT] == ["incident"] and json.loads(cursor)["pending_alerts"] == []


def test_unassigned_task_is_an_incident_only_after_threshold():
    connect = None
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
    connect = None
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
    from lakebus_dagster.defs.recovery.jobs import poison_error

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


def test_restart_that_fails_again_on_the_same_record_quarantines_it_once():
    from dagster._core.test_utils import create_run_for_test  # private: no public API stores a run of a given status

    alerts = RecordingAlerts()
    SCRIPT[:] = [overview("FAILED", trace=POISON_TRACE)]
    result, cursor = tick(None, alerts)
    assert [r.job_name for r in result.run_requests] == ["restart_connector"]
    # the restart run has not ended yet: the FAILED status may be the stale one, no quarantine
    result, cursor = tick(None, alerts, cursor)
    assert [r.job_name for r in result.run_requests] == ["restart_connector"]  # backoff 0 in this policy
    finish_restart_run(2, result.run_requests[0].tags)
    result, cursor = tick(None, alerts, cursor)
    assert [r.job_name for r in result.run_requests] == ["remediate_poison_record"]
    req = result.run_requests[0]
    # the remediation is guarded: the sensor's request confirms the connector it moves
    assert req.run_config == {"ops": {"remediate_poison_record_op": {"config": {"connector": NAME, "confirm": NAME}}}}
    assert req.tags["lakebus/quarantine"] == "events[0]@20"
    # while the quarantine run is queued or running, nothing else is requested for the connector
    run = create_run_for_test(INSTANCE[0], job_name="remediate_poison_record", status=dg.DagsterRunStatus.STARTED,
                              tags=dict(req.tags))
    NOW[0] += 60
    result, cursor = tick(None, alerts, cursor)
    assert result.run_requests == []
    INSTANCE[0].handle_run_event(run.run_id, dg.DagsterEvent(
        event_type_value="PIPELINE_SUCCESS", job_name="remediate_poison_record", message="done"))
    # the same record is never quarantined twice; still failing after it, the next tick restarts
    result, cursor = tick(None, alerts, cursor)
    assert [r.job_name for r in result.run_requests] == ["restart_connector"]
    assert [a["kind"] for a in SENT] == ["incident"]


def test_no_restart_while_the_previous_restart_run_is_still_running():
    from dagster._core.test_utils import create_run_for_test  # private: no public API stores a run of a given status

    SCRIPT[:] = [overview("FAILED")]
    policy = Policy(backoff_unit_seconds=0.0)
    first, cursor = tick(None, RecordingAlerts(), policy=policy)
    (request,) = first.run_requests
    # the daemon launched it; the run is still going (a loaded daemon, or a backoff shorter than a run)
    run = create_run_for_test(INSTANCE[0], job_name="restart_connector", status=dg.DagsterRunStatus.STARTED, tags=dict(request.tags))
    NOW[0] += 60
    result, cursor = tick(None, RecordingAlerts(), cursor, policy=policy)
    assert result.run_requests == []
    INSTANCE[0].handle_run_event(run.run_id, dg.DagsterEvent(
        event_type_value="PIPELINE_FAILURE", job_name="restart_connector", message="failed"))
    result, _ = tick(None, RecordingAlerts(), cursor, policy=policy)
    assert [r.tags["lakebus/attempt"] for r in result.run_requests] == ["2"]


def test_a_healing_run_stuck_past_the_stale_limit_no_longer_holds_healing_back():
    """A run worker that died leaves its run STARTED for ever (the local default run launcher cannot
    tell): past HEALING_RUN_STALE_S the connector is healed again instead of never."""
    import time

    from dagster._core.test_utils import create_run_for_test  # private: no public API stores a run of a given status

    from lakebus_dagster.defs.monitoring.healing import HEALING_RUN_STALE_S

    SCRIPT[:] = [overview("FAILED")]
    policy = Policy(backoff_unit_seconds=0.0)
    NOW[0] = time.time()
    first, cursor = tick(None, RecordingAlerts(), policy=policy)
    (request,) = first.run_requests
    create_run_for_test(INSTANCE[0], job_name="restart_connector", status=dg.DagsterRunStatus.STARTED, tags=dict(request.tags))
    NOW[0] += HEALING_RUN_STALE_S - 60
    result, cursor = tick(None, RecordingAlerts(), cursor, policy=policy)
    assert result.run_requests == []  # still plausibly running
    NOW[0] += 120
    result, _ = tick(None, RecordingAlerts(), cursor, policy=policy)
    assert [r.tags["lakebus/attempt"] for r in result.run_requests] == ["2"]


def test_quarantine_can_be_switched_off():
    SCRIPT[:] = [overview("FAILED", trace=POISON_TRACE)]
    policy = Policy(backoff_unit_seconds=0.0, auto_quarantine=False)
    first, cursor = tick(None, RecordingAlerts(), policy=policy)
    finish_restart_run(1, first.run_requests[0].tags)
    result, _ = tick(None, RecordingAlerts(), cursor, policy=policy)
    assert [r.job_name for r in result.run_requests] == ["restart_connector"]


def test_a_failure_without_a_named_record_is_never_quarantined():
    SCRIPT[:] = [overview("FAILED")]
    first, cursor = tick(None, RecordingAlerts())
    finish_restart_run(1, first.run_requests[0].tags)
    result, _ = tick(None, RecordingAlerts(), cursor)
    assert [r.job_name for r in result.run_requests] == ["restart_connector"]


def test_stall_is_one_incident_with_lag_and_clears_when_a_commit_lands():
    """Commits refused: the workers still consume (Connect's offsets reach the end) and the control
    topic grows every cycle, but the coordinator's committed offset stands still."""
    alerts = RecordingAlerts()
    SCRIPT[:] = [overview("RUNNING")]
    PROGRESS.update(consumed=100, end=100, coordinator=40, control_end=40, valid_through=1, first_after=-1)
    _send("StartCommit", "DataComplete")  # a cycle the coordinator cannot finish
    _, cursor = tick(None, alerts)
    # 50 records arrive and are consumed; no commit lands: the watermark stays before them
    PROGRESS.update(consumed=150, end=150, first_after=100)
    for _ in range(5):  # 5 × 10 s: under the 60 s stall window (6 × 10 s intervals, 2 × 30 s timeout)
        NOW[0] += 10
        _send("StartCommit", "DataComplete")  # every cycle asks again, the catalog refuses again
        _, cursor = tick(None, alerts, cursor)
    assert SENT == []
    for _ in range(10):
        NOW[0] += 30
        _send("StartCommit", "DataComplete")
        result, cursor = tick(None, alerts, cursor)
        assert not result.run_requests  # a stall is not fixed by restarting tasks blindly
    assert [a["kind"] for a in SENT] == ["incident"]
    assert "committed nothing to Iceberg" in SENT[0]["title"] and ": 50 record(s) of events" in SENT[0]["title"], SENT[0]
    NOW[0] += 30
    _commit_lands()  # a commit lands: the watermark passes the records, the coordinator commits its offsets
    PROGRESS.update(coordinator=PROGRESS["control_end"])
    tick(None, alerts, cursor)
    assert [a["kind"] for a in SENT] == ["incident", "recovery"]


def test_a_rebalance_restarts_the_stall_clock_but_a_stall_after_it_is_still_caught():
    """A worker dies, its tasks (and the commit coordinator) move: the coordinator starts over and its
    first commit comes a cycle or two later. Seen on the cluster profile under load: ~60-90 s without
    a commit across the failover — a failover, not a stall. A sink that stays stuck after it is one."""
    alerts = RecordingAlerts()
    SCRIPT[:] = [overview("RUNNING", worker="w1")]
    PROGRESS.update(consumed=100, end=100, coordinator=40, control_end=40, valid_through=1, first_after=-1)
    _send("StartCommit", "DataComplete")  # the cycle the failover interrupted
    _, cursor = tick(None, alerts)
    PROGRESS.update(consumed=150, end=150, first_after=100)
    for _ in range(5):  # 50 s pending, no commit
        NOW[0] += 10
        _, cursor = tick(None, alerts, cursor)
    SCRIPT[:] = [overview("RUNNING", worker="w2")]  # the tasks moved to the surviving worker
    for _ in range(5):  # another 50 s: 100 s without a commit, but only 50 s since the move
        NOW[0] += 10
        _, cursor = tick(None, alerts, cursor)
    assert SENT == []
    for _ in range(2):  # still nothing 70 s after the move: a stall
        NOW[0] += 10
        _, cursor = tick(None, alerts, cursor)
    assert [a["kind"] for a in SENT] == ["incident"] and "committed nothing to Iceberg" in SENT[0]["title"]


def test_an_idle_sink_whose_coordinator_commits_every_cycle_is_not_stalled():
    alerts = RecordingAlerts()
    SCRIPT[:] = [overview("RUNNING")]
    PROGRESS.update(consumed=10, end=10, coordinator=4, control_end=8)
    cursor = None
    for _ in range(20):  # ten idle minutes: every cycle emits control events and commits them
        _, cursor = tick(None, alerts, cursor)
        NOW[0] += 30
        PROGRESS.update(coordinator=PROGRESS["control_end"], control_end=PROGRESS["control_end"] + 4)
    assert SENT == []


@pytest.mark.parametrize("consumed,control_end", [(0, 0), (30, 12)])
def test_a_sink_that_never_commits_from_its_start_is_a_stall(consumed, control_end):
    """Never a coordinator commit: records not even consumed, or consumed and handed over in commit
    cycles (control events) that never complete."""
    alerts = RecordingAlerts()
    SCRIPT[:] = [overview("RUNNING")]
    PROGRESS.update(consumed=consumed, end=30, coordinator=None, control_end=control_end)
    cursor = None
    for _ in range(4):
        _, cursor = tick(None, alerts, cursor)
        NOW[0] += 30
        PROGRESS["control_end"] += 4 if control_end else 0
    assert [a["kind"] for a in SENT] == ["incident"] and "committed nothing to Iceberg" in SENT[0]["title"]


def test_idle_bus_then_burst_is_not_a_stall():
    alerts = RecordingAlerts()
    SCRIPT[:] = [overview("RUNNING")]
    PROGRESS.update(consumed=10, end=10, coordinator=8, control_end=8)
    _, cursor = tick(None, alerts)
    NOW[0] += 86_400  # a quiet day (the coordinator idles with nothing pending)
    PROGRESS.update(end=500, control_end=12)
    _, cursor = tick(None, alerts, cursor)
    NOW[0] += 20
    PROGRESS.update(consumed=300, coordinator=12, control_end=16)  # the sink is catching up
    _, cursor = tick(None, alerts, cursor)
    assert SENT == []


def test_alert_volume_over_a_ten_minute_outage_is_bounded():
    """Connect unreachable for 10 minutes, ticked every 30 s as the daemon would, then back:
    exactly one incident and one recovery — no repeats, whatever the tick count."""
    alerts = RecordingAlerts()
    policy = Policy(recovery_stable_s=90.0)
    SCRIPT[:] = [ConnectUnavailable("refused", method="GET", path="/connectors")]
    cursor = None
    for _ in range(20):
        _, cursor = tick(None, alerts, cursor, policy=policy)
        NOW[0] += 30
    SCRIPT[:] = [overview("RUNNING")]
    for _ in range(6):
        _, cursor = tick(None, alerts, cursor, policy=policy)
        NOW[0] += 30
    assert [a["kind"] for a in SENT] == ["incident", "recovery"]


def test_failed_task_over_ten_minutes_with_shipped_policy_bounds_alerts_and_restarts():
    """The shipped MonitoringPolicyResource (minutes of Strimzi backoff), a task FAILED for 10
    minutes: one incident alert, restarts at 0, 2 and 8 minutes (backoff 0, 2, 6), nothing else."""
    alerts = RecordingAlerts()
    SCRIPT[:] = [overview("FAILED")]
    cursor, restarts = None, []
    for i in range(21):  # 0 .. 10 minutes, every 30 s
        result, cursor = tick(None, alerts, cursor, policy=MonitoringPolicyResource())
        restarts += [(i * 30, r.tags["lakebus/attempt"]) for r in result.run_requests]
        NOW[0] += 30
    assert restarts == [(0, "1"), (120, "2"), (480, "3")]
    assert [a["kind"] for a in SENT] == ["incident"]


def test_every_delivered_alert_is_an_observation_of_the_alerts_asset():
    SCRIPT[:] = [overview("FAILED")]
    result, _ = tick(None, RecordingAlerts(), policy=Policy(auto_restart=False))
    assert [e.asset_key for e in result.asset_events] == [ALERTS_ASSET_KEY]
    assert result.asset_events[0].metadata["kind"].value == "incident"


def test_every_shipped_sensor_names_the_jobs_it_may_request():
    """Load the whole code location as deployed; every sensor that can request runs has targets."""
    from lakebus_dagster.definitions import defs

    repo = defs.get_repository_def()
    status = repo.get_sensor_def("connector_status_sensor")
    assert {t.job_name for t in status.targets} == {"restart_connector", "remediate_poison_record", "offset_ledger_job"}


def test_a_connector_parked_on_purpose_is_not_an_incident_but_an_unplanned_pause_is():
    alerts = RecordingAlerts()
    SCRIPT[:] = [overview("PAUSED", connector_state="PAUSED")]
    DECLARED[NAME] = "PAUSED"  # pause_connector recorded it
    result, cursor = tick(None, alerts)
    assert SENT == [] and not result.run_requests
    DECLARED[NAME] = "RUNNING"  # nobody declared this pause
    result, cursor = tick(None, alerts, cursor)
    assert [a["kind"] for a in SENT] == ["incident"] and "is PAUSED, expected RUNNING" in SENT[0]["title"]


@pytest.mark.parametrize("job", ["remediate_poison_record", "restart_connector"])
def test_a_connector_stopped_by_the_sensors_own_healing_run_is_not_an_incident(job):
    """The quarantine run stops the connector for a few seconds to move its offsets, a restart of
    every instance stops and resumes it; a tick inside that window saw "STOPPED, expected RUNNING"
    and alerted (CI, stop 5). While the run is in flight the state is the run's; once it ended, the
    same state is an incident again."""
    from dagster._core.test_utils import create_run_for_test  # private: no public API stores a run of a given status

    alerts = RecordingAlerts()
    SCRIPT[:] = [overview("RUNNING", connector_state="STOPPED")]
    DECLARED[NAME] = "RUNNING"
    run = create_run_for_test(INSTANCE[0], job_name=job, status=dg.DagsterRunStatus.STARTED,
                              tags={"lakebus/connector": NAME, "lakebus/incident": f"connector:{NAME}:stalled"})
    result, cursor = tick(None, alerts)
    assert SENT == [] and not result.run_requests
    INSTANCE[0].report_run_failed(run)  # the run ended and left the connector STOPPED: that is an incident
    result, cursor = tick(None, alerts, cursor)
    assert [a["kind"] for a in SENT] == ["incident"] and "is STOPPED, expected RUNNING" in SENT[0]["title"]


def test_unreadable_state_topic_is_an_incident_not_a_failed_tick(monkeypatch):
    from lakebus_dagster.provision.target_state_store import TargetStateStoreError

    def unreadable(kafka, layout, extra=()):
        raise TargetStateStoreError("cannot read declared connector states from topic 'lakebus-connector-states': down")

    monkeypatch.setattr(observation, "declared_states", unreadable)
    SCRIPT[:] = [overview("RUNNING")]
    alerts = RecordingAlerts()
    result, cursor = tick(None, alerts)
    assert SENT == []  # a broker failover makes reads fail for seconds: not an incident yet
    NOW[0] += 60
    result, cursor = tick(None, alerts, cursor=cursor)
    assert [a["kind"] for a in SENT] == ["incident"] and "lakebus-connector-states" in SENT[0]["title"]
    assert "for 60s" in SENT[0]["title"]


def test_dlq_reason_masks_the_records_own_values_so_one_rule_is_one_class():
    def letter(message: str):
        return decode(0, 1, [("__connect.errors.exception.class.name", b"org.apache.kafka.connect.errors.DataException"),
                             ("__connect.errors.exception.message", message.encode())], b"", None)

    a = letter("field 'plat_id': expected int32, got string \"abc\"")
    b = letter("field 'plat_id': expected int32, got string \"not-a-number\"")
    c = letter("field 'plat_id': expected int32, got 3000000000 (out of range)")
    assert a.reason == b.reason == "DataException: field 'plat_id': expected int32, got string \"…\""
    assert c.reason == "DataException: field 'plat_id': expected int32, got N (out of range)" != a.reason


def test_a_connector_not_yet_provisioned_is_an_incident_only_after_the_grace_period():
    SCRIPT[:] = [{}]  # Connect answers, the declared connector is not there
    policy = Policy(missing_threshold_s=300.0)
    _, cursor = tick(None, RecordingAlerts(), policy=policy)
    NOW[0] += 270
    _, cursor = tick(None, RecordingAlerts(), cursor, policy=policy)
    assert SENT == []
    NOW[0] += 60
    tick(None, RecordingAlerts(), cursor, policy=policy)
    assert [a["kind"] for a in SENT] == ["incident"] and "declared but not deployed" in SENT[0]["title"]


def test_the_same_failure_coming_back_later_is_a_new_occurrence_with_its_own_restarts():
    """Run keys dedupe run requests for good: a second occurrence of the same incident must not
    reuse the first one's (the daemon would silently skip its restart)."""
    alerts = RecordingAlerts()
    SCRIPT[:] = [overview("FAILED")]
    first, cursor = tick(None, alerts)
    SCRIPT[:] = [overview("RUNNING")]
    _, cursor = tick(None, alerts, cursor)  # recovered (stable period 0 in unit tests)
    NOW[0] += 600
    SCRIPT[:] = [overview("FAILED")]
    second, cursor = tick(None, alerts, cursor)
    assert [a["kind"] for a in SENT] == ["incident", "recovery", "incident"]
    assert first.run_requests[0].run_key != second.run_requests[0].run_key
    assert first.run_requests[0].tags["lakebus/incident"] != second.run_requests[0].tags["lakebus/incident"]


def test_a_tick_that_only_alerts_says_so_in_its_skip_reason():
    SCRIPT[:] = [overview("FAILED")]
    result, _ = tick(None, RecordingAlerts(), policy=Policy(auto_restart=False))
    assert result.skip_message.startswith("sent 1 alert(s) (incident:"), result.skip_message


@pytest.mark.parametrize("cause,poison", [
    ('java.lang.NumberFormatException: For input string: "BRL"', True),
    ("java.lang.IllegalArgumentException: Cannot convert to int: x", True),
    ("java.net.ConnectException: Connection refused", False),
    # seen on the real stack with the catalog unreachable
    ("org.apache.hc.client5.http.HttpHostConnectException: Connect to http://127.0.0.1:40123 failed: Connection refused", False),
    ("org.apache.iceberg.exceptions.RESTException: Error occurred while processing GET request", False),
    ("software.amazon.awssdk.core.exception.SdkClientException: Unable to execute HTTP request", False),
    ("java.io.UncheckedIOException: java.net.SocketTimeoutException: Read timed out", False),
])
def test_only_a_data_error_makes_a_named_record_a_quarantine_candidate(cause, poison):
    from lakebus_dagster.monitor.traces import RecordRef, failing_record

    trace = POISON_TRACE.replace('java.lang.NumberFormatException: For input string: \\"x\\"', cause).replace(
        'java.lang.NumberFormatException: For input string: "x"', cause)
    assert failing_record(trace) == (RecordRef("events", 0, 20) if poison else None)


def test_an_unanswered_progress_query_is_an_incident_not_a_failed_tick():
    """Seen in the daemon: the consumer-group query timed out and every tick failed (no alerts, no
    recovery notices). Now every tick stands, and a query that stays unanswered past the threshold
    is one incident naming the cause; a blip shorter than that (a broker failover, seen on the
    cluster profile) alerts nobody."""
    alerts = RecordingAlerts()
    SCRIPT[:] = [overview("RUNNING")]
    PROGRESS.update(consumed=1, end=1, coordinator=4, control_end=8, admin_timeout=True)
    result, cursor = tick(None, alerts)
    assert result.skip_message.startswith("no change") and SENT == []
    NOW[0] += 30
    result, cursor = tick(None, alerts, cursor=cursor)
    assert SENT == []
    NOW[0] += 30
    result, cursor = tick(None, alerts, cursor=cursor)
    assert result.skip_message.startswith("sent 1 alert(s)")
    assert [a["kind"] for a in SENT] == ["incident"] and "cannot measure" in SENT[0]["title"]
    assert "for 60s" in SENT[0]["title"]


def test_progress_read_again_in_time_opens_no_incident():
    alerts = RecordingAlerts()
    SCRIPT[:] = [overview("RUNNING")]
    PROGRESS.update(consumed=1, end=1, coordinator=4, control_end=8, admin_timeout=True)
    _, cursor = tick(None, alerts)
    NOW[0] += 45
    PROGRESS.update(admin_timeout=False)
    _, cursor = tick(None, alerts, cursor=cursor)
    NOW[0] += 45
    PROGRESS.update(admin_timeout=True)
    _, cursor = tick(None, alerts, cursor=cursor)  # a new blip starts its own clock
    assert SENT == []


# -- the cause of "cannot read Connect", end to end: the real client on fake HTTP workers --------
def _workers(urls: list[str]) -> ConnectResource:
    """The shipped resource on the given workers, with a short retry budget for the test."""
    return ConnectResource(url=",".join(urls), retries=1, backoff_factor=0.0, timeout_s=2.0)


def _listing(task_state: str) -> dict:
    from lakebus_dagster_tests.unit.test_connect_client import info_json, status_json

    status = status_json("RUNNING", task_state, name=NAME, trace=None)
    if task_state == "FAILED":
        status["tasks"][0]["trace"] = TRACE
    return {NAME: {"status": status, "info": info_json({"connector.class": "x"}, name=NAME)}}


OFFSETS = {"offsets": [{"partition": {"kafka_topic": "events", "kafka_partition": 0}, "offset": {"kafka_offset": 0}}]}


@pytest.fixture
def live():
    """One fake Connect worker that answers (scripted per test) and one killed worker."""
    from lakebus_dagster_tests.unit.test_connect_client import _serving, dead_urls

    with _serving() as worker:
        yield worker, dead_urls(1)[0]


def test_a_killed_worker_is_no_incident_while_another_serves_the_cluster(live):
    """Issue 19: with worker 1 killed and worker 2 serving, the sensor saw "Kafka Connect at
    worker 1 is unavailable". With every worker known, the tick reads worker 2 and alerts nothing."""
    worker, killed = live
    worker.script("GET", "/connectors", (200, _listing("RUNNING")))
    worker.script("GET", f"/connectors/{NAME}/offsets", (200, OFFSETS))

    result, _ = tick(_workers([killed, worker.url]), RecordingAlerts())

    assert SENT == [] and "open incidents: none" in result.skip_message


def _cause_unreachable(worker, killed):
    from lakebus_dagster_tests.unit.test_connect_client import dead_urls

    return dead_urls(2)


def _cause_starting(worker, killed):
    from lakebus_dagster_tests.unit.test_connect_client import JETTY_404

    worker.script("GET", "/connectors", (404, JETTY_404))
    return [killed, worker.url]


def _cause_deleted_between_reads(worker, killed):
    from lakebus_dagster_tests.unit.test_connect_client import connect_error

    worker.script("GET", "/connectors", (200, _listing("RUNNING")))
    worker.script("GET", f"/connectors/{NAME}/offsets", (404, connect_error(404, f"Connector {NAME} not found")))
    return [worker.url, killed]


def _cause_absent(worker, killed):
    worker.script("GET", "/connectors", (200, {}))
    return [worker.url, killed]


def _cause_task_failed(worker, killed):
    worker.script("GET", "/connectors", (200, _listing("FAILED")))
    return [worker.url, killed]


@pytest.mark.parametrize(
    ("cause", "key", "says", "never"),
    [
        (_cause_unreachable, "connect:unreachable",
         ["Kafka Connect is unreachable: none of its workers answers", "lakebus stack restart connect"], ["HTTP 404"]),
        (_cause_starting, "connect:starting",
         ["is still starting", "GET /connectors with HTTP 404", "lakebus stack logs connect"], ["unreachable", "not deployed"]),
        (_cause_deleted_between_reads, f"connector:{NAME}:missing",
         [f"connector {NAME} is declared but not deployed", "run `lakebus launch provision_lakebus`"], ["unreachable", "starting"]),
        (_cause_absent, f"connector:{NAME}:missing",
         [f"connector {NAME} is declared but not deployed", "run `lakebus launch provision_lakebus`"], ["unreachable", "starting"]),
        (_cause_task_failed, f"connector:{NAME}:task:0:FAILED",
         [f"{NAME} task 0 FAILED on w1:8083", "root cause: boom"], ["unreachable", "not deployed"]),
    ],
    ids=["unreachable", "starting", "deleted-between-reads", "absent", "task-failed"],
)
def test_the_status_sensor_names_the_cause(live, cause, key, says, never):
    """Each cause has its own incident (key) and text naming the connector or the workers and what
    to run; it alerts once, however many ticks see it."""
    worker, killed = live
    urls = cause(worker, killed)
    policy = Policy(auto_restart=False, missing_threshold_s=0.0)

    _, cursor = tick(_workers(urls), RecordingAlerts(), policy=policy)
    NOW[0] += 30
    tick(_workers(urls), RecordingAlerts(), cursor, policy=policy)

    assert [(a["kind"], a["key"]) for a in SENT] == [("incident", key)]
    title = SENT[0]["title"]
    assert all(part in title for part in says), title
    assert not any(part in title for part in never), title
    if key.startswith("connect:"):
        assert all(url in title for url in urls), title  # every worker tried is named


# -- the lost commit coordinator: records past the watermark, no commit, a silent control topic ----
#: the shipped commit interval (the layout's commit_interval_ms) and the status sensor's tick
INTERVAL_S = 10


def _lost_coordinator_setup(owed: int = 0) -> None:
    """A sink whose last commit is now; the coordinator committed everything on the control topic
    (nothing pending there, and nothing will move: no coordinator is left to start a cycle)."""
    SCRIPT[:] = [overview("RUNNING")]
    PROGRESS.update(consumed=100, end=100 + owed, coordinator=40, control_end=40,
                    valid_through=int(NOW[0] * 1000), first_after=100 if owed else -1)


def _records_arrive(n: int) -> None:
    """``n`` records produced (and consumed) past the sink's watermark."""
    if PROGRESS["first_after"] == -1:  # the first record past the watermark is the first of these
        PROGRESS["first_after"] = PROGRESS["end"]
    PROGRESS.update(end=PROGRESS["end"] + n, consumed=PROGRESS["consumed"] + n)


def _commit_lands() -> None:
    """A commit at NOW: everything produced so far is in the tables."""
    PROGRESS.update(valid_through=int(NOW[0] * 1000), first_after=-1)


def _finished_cycle_tail(tables: int) -> None:
    """What a finished cycle leaves past the coordinator's committed offset (measured on the 1.11
    sink): the last worker transaction's marker, a CommitToTable per committed table and the
    CommitComplete, each with its marker — 5 offsets for one table, 7 for two."""
    PROGRESS["control_end"] += 1
    _send(*["CommitToTable"] * tables, "CommitComplete")


@pytest.mark.parametrize("tail", ["fresh control topic", "one table committed", "two tables committed",
                                  "another connector's cycle on a shared control topic"])
def test_lost_coordinator_alerts_within_three_intervals_restarts_every_task_and_recovers_on_a_commit(tail):
    """Steady traffic, a commit every interval, then the coordinator is gone: nothing moves on the
    control topic (past its committed offset only what the last finished cycle left: ``tail``),
    records pile up past the watermark. One incident 2 intervals after the last commit (inside the
    3-interval target), one restart of every task, no repeat within the backoff, one recovery
    notice when a commit lands again."""
    alerts = RecordingAlerts()
    policy = Policy(backoff_unit_seconds=60.0)
    _lost_coordinator_setup()
    cursor = None
    for _ in range(6):  # a minute of healthy traffic: records every tick, a commit every interval
        _records_arrive(5)
        result, cursor = tick(None, alerts, cursor, policy=policy)
        assert not result.run_requests
        NOW[0] += INTERVAL_S
        _commit_lands()
        PROGRESS["coordinator"] = PROGRESS["control_end"] = PROGRESS["control_end"] + 4
    last_commit = NOW[0]
    if tail != "fresh control topic":  # what the last finished cycle left past the coordinator's offset
        _finished_cycle_tail(2 if tail == "two tables committed" else 1)
    if tail.startswith("another connector"):
        _send("StartCommit", "DataComplete", group="connect-another-sink")
    _records_arrive(5)
    NOW[0] += INTERVAL_S  # one interval without a commit: the next one may still be on its way
    _records_arrive(5)
    result, cursor = tick(None, alerts, cursor, policy=policy)
    assert SENT == [] and not result.run_requests
    NOW[0] += INTERVAL_S  # two intervals: the incident
    _records_arrive(5)
    result, cursor = tick(None, alerts, cursor, policy=policy)
    assert NOW[0] - last_commit <= 3 * INTERVAL_S
    assert [a["kind"] for a in SENT] == ["incident"], SENT
    assert "committed nothing to Iceberg for 20s" in SENT[0]["title"] and "15 record(s) of events" in SENT[0]["title"]
    assert "no commit cycle under way on iceberg-control" in SENT[0]["title"]
    assert [r.job_name for r in result.run_requests] == ["restart_connector"]
    assert result.run_requests[0].run_config["ops"]["restart_connector_op"]["config"] == {
        "connector": NAME, "only_failed": False, "include_tasks": True}  # nothing is FAILED: restart them all
    for _ in range(3):  # still stuck while the restart runs: same incident, no second restart inside the backoff
        NOW[0] += INTERVAL_S
        result, cursor = tick(None, alerts, cursor, policy=policy)
        assert not result.run_requests
    assert [a["kind"] for a in SENT] == ["incident"]
    NOW[0] += INTERVAL_S
    _commit_lands()  # the restarted tasks elected a coordinator: rows flow, it commits its control offsets
    PROGRESS["coordinator"] = PROGRESS["control_end"] = PROGRESS["control_end"] + 4
    _, cursor = tick(None, alerts, cursor, policy=policy)
    assert [a["kind"] for a in SENT] == ["incident", "recovery"]
    NOW[0] += INTERVAL_S
    tick(None, alerts, cursor, policy=policy)
    assert len(SENT) == 2


@pytest.mark.parametrize("elected_coordinator_commits", [True, False], ids=["commits", "never-cycles"])
def test_a_failover_is_judged_from_the_groups_not_from_the_last_commit_or_the_placement(elected_coordinator_commits):
    """Issue 29, as measured on the cluster profile: the coordinator's worker dies 6 s after a commit;
    its coordinator leaves the coordinators' group 10 s later (its control session), Connect places
    task 0 on the survivor ~20 s after the kill, the tasks' group settles and elects it when the dead
    task's consumer session (25 s) ends, and the new coordinator's first cycle commits one interval
    later, ~45 s after the last commit. Counted from the last commit or from the placement, the
    lost-coordinator window restarted sinks about to commit; counted from the groups' changes, the
    failover commits with no incident. A coordinator that then never cycles is still a lost
    coordinator, two intervals after the election."""
    alerts = RecordingAlerts()
    policy = Policy(backoff_unit_seconds=60.0)
    _lost_coordinator_setup()
    PROGRESS["members"] = {"task-0@w1": [0], "task-1@w2": [1]}
    PROGRESS["coordinators"] = {"coordinator@w1": [0]}
    cursor = None
    for _ in range(3):  # healthy
        _records_arrive(5)
        _, cursor = tick(None, alerts, cursor, policy=policy)
        NOW[0] += INTERVAL_S
        _commit_lands()
        PROGRESS["coordinator"] = PROGRESS["control_end"] = PROGRESS["control_end"] + 4

    def interval(note: str):
        _records_arrive(5)
        result, new_cursor = tick(None, alerts, cursor, policy=policy)
        NOW[0] += INTERVAL_S
        assert [a["kind"] for a in SENT] in ([], ["incident"]), note
        return result, new_cursor

    # the last commit is now; w1 dies 6 s later: no commit cycle starts again
    result, cursor = interval("the last commit; w1 dies 6 s after it")
    result, cursor = interval("10 s after the last commit")
    del PROGRESS["coordinators"]["coordinator@w1"]  # its control session ended 16 s after the commit
    result, cursor = interval("20 s after the last commit: the coordinators' group lost its member")
    assert not result.run_requests and SENT == [], "the window runs from the coordinator's death, not the last commit"
    SCRIPT[:] = [overview("RUNNING", worker="w2")]
    result, cursor = interval("Connect placed task 0 on w2; the dead task's session runs on")
    assert not result.run_requests and SENT == []
    PROGRESS["members"] = {"task-0@w2": [0], "task-1@w2": [1]}
    PROGRESS["coordinators"] = {"coordinator@w2": [0]}
    result, cursor = interval("the tasks' group settled and elected task 0 on w2; its coordinator joined")
    assert not result.run_requests and SENT == []
    if elected_coordinator_commits:
        _commit_lands()  # the new coordinator's first cycle commits, ~20 s after the placement
        PROGRESS["coordinator"] = PROGRESS["control_end"] = PROGRESS["control_end"] + 4
        result, cursor = interval("the first commit after the failover")
        assert not result.run_requests and SENT == [], "the window runs from the election, not the placement"
        result, cursor = interval("and on")
        assert not result.run_requests and SENT == []
    else:
        result, cursor = interval("one interval after the election, no cycle under way")
        assert not result.run_requests and SENT == []
        result, cursor = interval("two intervals after the election, no cycle under way")
        assert [r.job_name for r in result.run_requests] == ["restart_connector"]
        assert [a["kind"] for a in SENT] == ["incident"] and "no commit cycle under way" in SENT[0]["title"]


def _stall_then_commits(policy) -> list:
    """Healthy traffic, the coordinator lost (incident, restart), then commits again: the run
    requests of the tick that resolves the stall."""
    alerts = RecordingAlerts()
    _lost_coordinator_setup()
    cursor = None
    for _ in range(3):
        _records_arrive(5)
        _, cursor = tick(None, alerts, cursor, policy=policy)
        NOW[0] += INTERVAL_S
        _commit_lands()
        PROGRESS["coordinator"] = PROGRESS["control_end"] = PROGRESS["control_end"] + 4
    for _ in range(3):
        NOW[0] += INTERVAL_S
        _records_arrive(5)
        _, cursor = tick(None, alerts, cursor, policy=policy)
    assert [a["kind"] for a in SENT] == ["incident"], SENT
    NOW[0] += INTERVAL_S
    _commit_lands()
    PROGRESS["coordinator"] = PROGRESS["control_end"] = PROGRESS["control_end"] + 4
    result, cursor = tick(None, alerts, cursor, policy=policy)
    assert [a["kind"] for a in SENT] == ["incident", "recovery"], SENT
    NOW[0] += INTERVAL_S
    later, _ = tick(None, alerts, cursor, policy=policy)
    assert not later.run_requests, "one ledger run per stall"
    return result.run_requests


def test_a_resolved_stall_runs_the_offset_ledger_at_once_with_a_two_cycle_grace():
    """Issue 29.4: records a stall lost upstream are found when it resolves, not at the next
    10-minute ledger run with its 300 s grace: the recovery tick requests offset_ledger_job with a
    grace of two commit cycles (2 x (10 s interval + 30 s timeout), the layout's defaults)."""
    (request,) = _stall_then_commits(Policy(backoff_unit_seconds=60.0))
    assert request.job_name == "offset_ledger_job"
    assert request.run_config == {"ops": {"offset_ledger": {"config": {"grace_s": 80.0}}}}
    assert request.tags["lakebus/after_stall"].startswith(f"connector:{NAME}:stalled@")
    assert request.run_key.endswith(":ledger")


def test_the_ledger_after_a_stall_can_be_switched_off():
    assert _stall_then_commits(Policy(backoff_unit_seconds=60.0, ledger_after_stall=False)) == []


def test_a_broker_leaving_starts_the_lost_coordinator_window_again():
    """A worker killed with a broker: the broker's groups move before the tasks do (Kafka 4.3.1: the
    Connect group rebalanced ~16.5 s after such a kill, BENCHMARKS.md#kafka-4). Records owed, no
    commit, no cycle: the broker's departure restarts the two-interval window, so the incident comes
    two intervals after it, not two after the last commit (a failover still under way)."""
    alerts = RecordingAlerts()
    _lost_coordinator_setup()
    _records_arrive(5)
    result, cursor = tick(None, alerts, None)
    NOW[0] += INTERVAL_S
    PROGRESS["brokers"] = (1, 3)  # broker 2 died with the coordinator's worker
    _records_arrive(5)
    result, cursor = tick(None, alerts, cursor)
    NOW[0] += INTERVAL_S  # two intervals after the last commit, one after the broker left
    _records_arrive(5)
    result, cursor = tick(None, alerts, cursor)
    assert SENT == [] and not result.run_requests, SENT
    NOW[0] += INTERVAL_S  # two intervals after the broker left: nothing moved since
    result, cursor = tick(None, alerts, cursor)
    assert [a["kind"] for a in SENT] == ["incident"] and "committed nothing to Iceberg for 20s" in SENT[0]["title"], SENT
    assert [r.job_name for r in result.run_requests] == ["restart_connector"]


def test_a_lost_coordinator_that_a_restart_does_not_fix_is_restarted_again_only_after_the_backoff():
    alerts = RecordingAlerts()
    policy = Policy(backoff_unit_seconds=60.0)  # Strimzi: the 2nd restart 2 minutes after the 1st
    _lost_coordinator_setup()
    cursor, restarts = None, []
    for _ in range(20):  # 200 s: commits never come back
        _records_arrive(1)
        result, cursor = tick(None, alerts, cursor, policy=policy)
        restarts += [(NOW[0], r.tags["lakebus/attempt"]) for r in result.run_requests]
        NOW[0] += INTERVAL_S
    start = 1_000_000.0
    assert restarts == [(start + 2 * INTERVAL_S, "1"), (start + 2 * INTERVAL_S + 120, "2")]
    assert [a["kind"] for a in SENT] == ["incident"]


def test_an_idle_bus_is_never_a_lost_coordinator_but_a_burst_it_never_commits_is():
    """Nothing past the watermark for an hour (the last commit an hour old) is an idle bus, not a
    stall; a burst then gets its full 2 intervals from when it was first seen, not "an hour
    without a commit"."""
    alerts = RecordingAlerts()
    _lost_coordinator_setup()
    cursor = None
    for _ in range(60):  # an idle hour, ticked every minute (each tick is a real Dagster evaluation)
        _, cursor = tick(None, alerts, cursor)
        NOW[0] += 60
    assert SENT == []
    _records_arrive(30)
    for _ in range(2):  # the burst's first two ticks (0 s, 10 s after it was seen): within its window
        _, cursor = tick(None, alerts, cursor)
        NOW[0] += INTERVAL_S
    assert SENT == []
    tick(None, alerts, cursor)  # 20 s after it was seen, no commit: the coordinator is gone
    assert [a["kind"] for a in SENT] == ["incident"] and "30 record(s)" in SENT[0]["title"]


def test_a_burst_committed_in_time_is_not_a_stall():
    alerts = RecordingAlerts()
    _lost_coordinator_setup()
    cursor = None
    NOW[0] += 3600
    for _ in range(30):  # every burst committed within 1.5 intervals, for 5 minutes
        _records_arrive(30)
        _, cursor = tick(None, alerts, cursor)
        NOW[0] += INTERVAL_S
        _, cursor = tick(None, alerts, cursor)
        NOW[0] += INTERVAL_S / 2
        _commit_lands()
    assert SENT == []
    _records_arrive(30)  # and one that is not: caught
    for _ in range(3):
        _, cursor = tick(None, alerts, cursor)
        NOW[0] += INTERVAL_S
    assert [a["kind"] for a in SENT] == ["incident"]


@pytest.mark.parametrize("unknown", ["no table yet", "catalog down"])
def test_an_unknown_watermark_is_not_a_lost_coordinator_until_it_is_known(unknown):
    """Without a readable watermark nothing can be owed: the rule abstains (as the sensor does when
    progress cannot be read) and the coordinator watch and the 'cannot measure' incident stay in
    charge. Once the watermark is read, work owed gets its window from then."""
    alerts = RecordingAlerts()
    _lost_coordinator_setup(owed=20)
    if unknown == "no table yet":
        PROGRESS.pop("valid_through")
    else:
        PROGRESS["catalog_down"] = True
    cursor = None
    for _ in range(12):  # two minutes unknown, records waiting
        _, cursor = tick(None, alerts, cursor)
        NOW[0] += INTERVAL_S
    assert SENT == []
    PROGRESS.update(valid_through=int((NOW[0] - 600) * 1000), catalog_down=False)  # readable: a commit 10 min old
    _, cursor = tick(None, alerts, cursor)
    NOW[0] += INTERVAL_S
    _, cursor = tick(None, alerts, cursor)
    assert SENT == []
    NOW[0] += INTERVAL_S
    tick(None, alerts, cursor)
    assert [a["kind"] for a in SENT] == ["incident"] and "20 record(s)" in SENT[0]["title"]


@pytest.mark.parametrize("under_way", [("StartCommit",), ("StartCommit", "DataWritten", "DataComplete")])
def test_a_commit_cycle_under_way_is_not_a_lost_coordinator(under_way):
    """Records owed and no commit for 5 intervals, but a cycle is under way past the last finished
    one (the coordinator waits for its workers, or the catalog refuses its commit): the coordinator
    exists, no restart. Whether it is stuck is the coordinator watch's call, after its own window
    (6 intervals), not restartable."""
    alerts = RecordingAlerts()
    _lost_coordinator_setup()
    _finished_cycle_tail(1)
    _send(*under_way)
    _records_arrive(30)
    cursor = None
    for _ in range(6):  # 0..50 s after the records were first seen
        result, cursor = tick(None, alerts, cursor)
        assert not result.run_requests and SENT == [], SENT
        NOW[0] += INTERVAL_S
    for _ in range(2):
        result, cursor = tick(None, alerts, cursor)
        assert not result.run_requests
        NOW[0] += INTERVAL_S
    assert [a["kind"] for a in SENT] == ["incident"] and "control event(s) pending" in SENT[0]["title"], SENT


def test_an_unreadable_control_event_is_not_a_lost_coordinator():
    """A control record the rule cannot decode might be a StartCommit: no finding (the coordinator
    watch stays in charge)."""
    alerts = RecordingAlerts()
    _lost_coordinator_setup()
    _finished_cycle_tail(1)
    CONTROL[PROGRESS["control_end"]] = ("garbage", "")
    PROGRESS["control_end"] += 2
    _records_arrive(30)
    cursor = None
    for _ in range(5):
        result, cursor = tick(None, alerts, cursor)
        assert not result.run_requests and SENT == [], SENT
        NOW[0] += INTERVAL_S


#: the window for cycles that finish without committing: the coordinator watch's,
#: max(6 commit intervals, 2 commit timeouts of 30 s) with the shipped tuning
BUSY_WINDOW_S = 60


def _cycle_finishes_committing_nothing() -> None:
    """A commit cycle runs and finishes, and the coordinator commits its control offsets, but no
    Iceberg commit lands (one of two coordinators: apache/iceberg#17637, seen on the cluster profile)."""
    _send("StartCommit", "DataWritten", "DataComplete", "CommitComplete")
    PROGRESS["coordinator"] = PROGRESS["control_end"]


@pytest.mark.parametrize("coordinators", [1, 2], ids=["one-coordinator", "two-coordinators"])
def test_a_stall_with_nothing_owed_resolves_within_its_recovery_window_and_runs_the_ledger_at_once(coordinators):
    """A stall that lost records upstream, then a quiet bus: the restarted sink's one coordinator
    finishes a cycle every interval, "committed to 0 table(s)", because the tasks consumed
    everything (lag 0) and the lost records' answers are gone; they stay past the watermark for
    good. Nothing is owed: the incident resolves one recovery window after the drain is seen and the
    recovery tick requests the ledger (which finds and re-queues the lost records), with no new
    traffic. With two coordinators in the group the same picture is cycles that finish without
    committing: still an incident, no ledger."""
    alerts = RecordingAlerts()
    policy = Policy(backoff_unit_seconds=60.0, recovery_stable_s=90.0)  # the shipped recovery window
    _lost_coordinator_setup()
    cursor = None
    for _ in range(3):  # healthy traffic, a commit every interval
        _records_arrive(5)
        _, cursor = tick(None, alerts, cursor, policy=policy)
        NOW[0] += INTERVAL_S
        _commit_lands()
        PROGRESS["coordinator"] = PROGRESS["control_end"] = PROGRESS["control_end"] + 4
    for _ in range(3):  # the coordinator is gone while records arrive: the lost-coordinator incident
        _records_arrive(5)
        result, cursor = tick(None, alerts, cursor, policy=policy)
        NOW[0] += INTERVAL_S
    assert [a["kind"] for a in SENT] == ["incident"] and "no commit coordinator?" in SENT[0]["title"], SENT
    # the restart's coordinator runs cycles that commit nothing; the bus is quiet from now on
    PROGRESS["coordinators"] = {f"coordinator-{k}": ([0] if k == 0 else []) for k in range(coordinators)}
    drained_at, recovered_at, ledgers = None, None, []
    for _ in range(30):  # 5 minutes of cycles "committed to 0 table(s)"
        _cycle_finishes_committing_nothing()
        result, cursor = tick(None, alerts, cursor, policy=policy)
        ledgers += [(NOW[0], r) for r in result.run_requests if r.job_name == "offset_ledger_job"]
        if drained_at is None and (json.loads(cursor)["drained"].get(NAME) or {}).get("control_end") is not None:
            drained_at = NOW[0]  # the second quiet tick: the next finished cycle settles it
        if recovered_at is None and "recovery" in [a["kind"] for a in SENT]:
            recovered_at = NOW[0]
        NOW[0] += INTERVAL_S
    kinds = [a["kind"] for a in SENT]
    if coordinators == 2:
        assert kinds[0] == "incident" and "recovery" not in kinds and ledgers == [], (kinds, ledgers)
        return
    assert kinds == ["incident", "recovery"], SENT
    assert drained_at is not None and recovered_at is not None
    # nothing owed from the cycle after drained_at; resolved one recovery window (90 s) later
    assert recovered_at - drained_at <= policy.recovery_stable_s + 2 * INTERVAL_S, (drained_at, recovered_at)
    ((requested_at, ledger),) = ledgers  # the ledger, once, on the recovery tick
    assert requested_at == recovered_at
    assert ledger.tags["lakebus/after_stall"].startswith(f"connector:{NAME}:stalled@")
    assert ledger.run_config == {"ops": {"offset_ledger": {"config": {"grace_s": 80.0}}}}


def test_cycles_that_finish_without_committing_are_one_incident_after_the_window_and_a_restart():
    """Duplicate coordinators: a cycle finishes every interval (the coordinator's offset moves, so
    the coordinator watch sees progress; a cycle is under way, so it is no lost coordinator) while
    records pile up past the watermark with no Iceberg commit. One incident when the window has
    passed, naming what it saw; every task restarted; one recovery notice when commits land."""
    alerts = RecordingAlerts()
    policy = Policy(backoff_unit_seconds=60.0)
    _lost_coordinator_setup()
    cursor, first_seen = None, NOW[0]
    while NOW[0] - first_seen < BUSY_WINDOW_S:
        _records_arrive(5)
        _send("StartCommit")
        result, cursor = tick(None, alerts, cursor, policy=policy)
        assert SENT == [] and not result.run_requests, (NOW[0] - first_seen, SENT)
        _cycle_finishes_committing_nothing()
        NOW[0] += INTERVAL_S
    _records_arrive(5)
    _send("StartCommit")
    result, cursor = tick(None, alerts, cursor, policy=policy)
    assert [a["kind"] for a in SENT] == ["incident"], SENT
    assert f"committed nothing to Iceberg for {BUSY_WINDOW_S}s" in SENT[0]["title"], SENT[0]["title"]
    assert "finish without committing (duplicate commit coordinators?)" in SENT[0]["title"]
    assert [r.job_name for r in result.run_requests] == ["restart_connector"]
    assert result.run_requests[0].run_config["ops"]["restart_connector_op"]["config"]["only_failed"] is False
    NOW[0] += INTERVAL_S
    _commit_lands()  # the restarted tasks elected one coordinator
    _cycle_finishes_committing_nothing()
    tick(None, alerts, cursor, policy=policy)
    assert [a["kind"] for a in SENT] == ["incident", "recovery"]


def test_cycles_without_commits_get_a_fresh_window_when_the_tasks_move_and_a_commit_ends_them():
    """A failover: the tasks move to another worker and the new coordinator's first cycles may
    finish before data reaches it; the window restarts at the move, and a commit inside it ends
    the episode with no incident. Without the move the same minute would be one."""
    alerts = RecordingAlerts()
    _lost_coordinator_setup()
    cursor = None
    for step in range(10):  # 100 s of owed records and cycles committing nothing; the tasks move at 50 s
        if step == 5:
            SCRIPT[:] = [overview("RUNNING", worker="w2")]
        _records_arrive(5)
        _send("StartCommit")
        result, cursor = tick(None, alerts, cursor)
        assert SENT == [] and not result.run_requests, (step, SENT)
        _cycle_finishes_committing_nothing()
        NOW[0] += INTERVAL_S
    _commit_lands()
    _records_arrive(5)
    tick(None, alerts, cursor)
    assert SENT == []


def test_no_cycle_under_way_gets_a_fresh_window_when_the_tasks_move():
    """The commit coordinator's worker died: no cycle under way while records pile up. The tasks
    move 15 s after the last commit; the survivor's coordinator is elected and starts a cycle
    within 2 intervals of the move — no incident (counted from the last commit it would be one)."""
    alerts = RecordingAlerts()
    _lost_coordinator_setup()
    cursor = None
    for step in range(4):  # ticks at 0, 10, 20, 30 s after the last commit; the tasks move at 15 s
        if step == 2:
            SCRIPT[:] = [overview("RUNNING", worker="w2")]
        _records_arrive(5)
        result, cursor = tick(None, alerts, cursor)
        assert SENT == [] and not result.run_requests, (step, SENT)
        NOW[0] += INTERVAL_S
    _send("StartCommit")  # the new coordinator's first cycle
    _records_arrive(5)
    tick(None, alerts, cursor)
    assert SENT == []


def test_control_events_are_decoded_as_the_sink_writes_them():
    from lakebus_dagster.monitor.control_events import decode_control

    def control_event(value):
        event = decode_control(value)
        return None if event is None else (event.kind, event.group)

    assert control_event(control_record("StartCommit", "connect-x")) == ("StartCommit", "connect-x")
    assert control_event(control_record("CommitComplete", "connect-x")) == ("CommitComplete", "connect-x")
    for junk in (None, b"", b"junk", b"\xc2\x01\xff\xff{", control_record("CommitToTable", "connect-x")[:-20]):
        assert control_event(junk) is None, junk


def test_a_condition_appearing_while_the_connector_has_an_incident_is_part_of_it():
    """Iceberg 1.12 on a refused commit: the task FAILS, the restart brings it back RUNNING and it
    stalls on the same refusal. One incident (one alert) and one recovery, after the stall too."""
    book, stable = IncidentBook(), 90.0
    failed = Incident(f"connector:{NAME}:task:0:FAILED", NAME, f"{NAME} task 0 FAILED", True)
    stalled = Incident(f"connector:{NAME}:stalled", NAME, f"connector {NAME} is RUNNING but committed nothing")
    other = Incident("connector:other-sink:stalled", "other-sink", "connector other-sink stalled")
    opened, resolved = book.update([failed], 0.0, stable)
    assert [i.key for i in opened] == [failed.key] and resolved == []
    book.update([], 10.0, stable)  # restarted: RUNNING, the failure is clearing
    opened, resolved = book.update([stalled, other], 40.0, stable)  # ... and stalls; another connector stalls too
    assert [i.key for i in opened] == [other.key], "the stall is part of the open incident: no alert of its own"
    assert book.open[stalled.key].part_of == failed.key
    opened, resolved = book.update([stalled, other], 200.0, stable)  # the failure cleared long ago, the stall did not
    assert opened == [] and resolved == [], "the incident waits for its part"
    book.update([other], 210.0, stable)  # the refusal ends: commits again
    opened, resolved = book.update([other], 300.0, stable)
    assert [(k, inc.part_of) for k, inc in resolved] == [(stalled.key, failed.key), (failed.key, None)]
    assert set(book.open) == {other.key}
    opened, resolved = book.update([failed], 310.0, stable)  # a later failure is a new incident again
    assert [i.key for i in opened] == [failed.key]


# -- two commit coordinators (issue 29: overlapping commit cycles after a worker rejoined) -----------
def _cycle_events(order: str, start_ms: int = 1_000_000) -> list:
    """Control events from a compact script: ``S<c>`` StartCommit, ``W<c>`` DataWritten, ``C<c>``
    CommitComplete of cycle ``c``, one second apart."""
    from lakebus_dagster.monitor.control_events import ControlEvent

    kinds = {"S": "StartCommit", "W": "DataWritten", "C": "CommitComplete"}
    return [ControlEvent(kinds[step[0]], f"connect-{NAME}", start_ms + 1000 * i, step[1:].encode().hex().ljust(32, "0"))
            for i, step in enumerate(order.split())]


def test_one_coordinators_cycles_never_overlap_and_an_abandoned_cycle_is_no_pair():
    from lakebus_dagster.monitor.coordinators import overlapping_cycles

    assert overlapping_cycles(_cycle_events("S1 W1 W1 C1 S2 W2 C2 S3 W3 W3 C3")) == ()
    # a failover: the dead coordinator's cycle 1 never completes, the new one runs 2 and 3
    assert overlapping_cycles(_cycle_events("S1 W1 S2 W2 W2 C2 S3 W3 C3")) == ()


def test_two_coordinators_cycles_overlap_as_measured_on_the_cluster_profile():
    """The order the bench cluster's control topic showed after a rejoin (BENCHMARKS.md, issue 29):
    one coordinator's cycles waited out the commit timeout while the other's began and finished."""
    from lakebus_dagster.monitor.coordinators import overlapping_cycles

    events = _cycle_events("Sa Sb Ca Sc Cb Sd Cd Se Ce Cc")
    assert overlapping_cycles(events) == ((1_000_000, 1_001_000), (1_001_000, 1_003_000), (1_003_000, 1_005_000),
                                          (1_003_000, 1_007_000))


def test_a_control_event_gives_its_cycle_and_time():
    from lakebus_dagster.monitor.control_events import decode_control

    event = decode_control(control_record("StartCommit", "connect-x", commit=bytes(range(16)), at_ms=1_795_805_776_104))
    assert (event.kind, event.group, event.at_ms, event.commit_id) == ("StartCommit", "connect-x", 1_795_805_776_104,
                                                                        bytes(range(16)).hex())
    assert decode_control(control_record("StartCommit", "connect-x")).commit_id == ""  # too short for a UUID


def _dual_ticks(policy, dual: int, single: int) -> list:
    """A sink whose control topic shows two coordinators for ``dual`` ticks (per 10 s tick one cycle
    of each, overlapping: A starts, B starts, A completes, B completes), then one for ``single``
    ticks (what a restart leaves); commits keep landing. Returns the run requests, tick by tick."""
    _lost_coordinator_setup()
    alerts, cursor, requests = RecordingAlerts(), None, []
    for n in range(dual + single):
        _records_arrive(5)
        a, b = f"a{n}".encode().ljust(16, b"-"), f"b{n}".encode().ljust(16, b"-")
        steps = (("StartCommit", a), ("StartCommit", b), ("CommitComplete", a), ("CommitComplete", b)) if n < dual \
            else (("StartCommit", a), ("CommitComplete", a))
        for kind, commit in steps:
            CONTROL[PROGRESS["control_end"]] = (kind, f"connect-{NAME}", commit, NOW[0] * 1000 - 5000)
            PROGRESS["control_end"] += 2
        PROGRESS["coordinator"] = PROGRESS["control_end"]
        cursor = _commit_and_tick(policy, alerts, cursor, requests)
    return requests


def _commit_and_tick(policy, alerts, cursor, requests: list) -> str:
    """A commit lands, the sensor ticks (its run requests' jobs appended to ``requests``), 10 s pass."""
    _commit_lands()
    result, cursor = tick(None, alerts, cursor, policy=policy)
    requests.append([r.job_name for r in result.run_requests])
    NOW[0] += INTERVAL_S
    return cursor


def test_two_coordinators_are_one_stall_incident_one_restart_and_a_ledger_at_recovery_when_healing_is_on():
    """Issue 29: the second overlapping pair opens the stall incident and restarts every task;
    cycles that overlapped before the restart are not counted again; one coordinator for
    ``recovery_stable_s`` is the recovery, and the stall ledger runs then."""
    requests = _dual_ticks(Policy(backoff_unit_seconds=60.0, recovery_stable_s=30.0, heal_dual_coordinators=True), 3, 6)
    assert requests[:2] == [[], ["restart_connector"]], requests
    assert sum(requests, []) == ["restart_connector", "offset_ledger_job"], requests
    assert [a["kind"] for a in SENT] == ["incident", "recovery"], SENT
    assert "runs two commit coordinators" in SENT[0]["title"] and "restarting it" in SENT[0]["title"], SENT


def test_two_coordinators_are_healed_by_default_and_shown_only_when_healing_is_off():
    assert _dual_ticks(Policy(backoff_unit_seconds=60.0), 3, 0)[1] == ["restart_connector"]
    SENT.clear()
    assert _dual_ticks(Policy(backoff_unit_seconds=60.0, heal_dual_coordinators=False), 6, 0) == [[]] * 6 and SENT == []


def _members_ticks(policy, members: list[int]) -> list:
    """A healthy sink (a commit every tick) whose coordinators' group has ``members[n]`` members at
    tick ``n`` (10 s apart), its control topic showing one coordinator's cycles only (the other holds
    no control partition). Returns the run requests, tick by tick."""
    _lost_coordinator_setup()
    alerts, cursor, requests = RecordingAlerts(), None, []
    for n, count in enumerate(members):
        PROGRESS["coordinators"] = {f"coordinator-{k}": ([0] if k == 0 else []) for k in range(count)}
        _records_arrive(5)
        PROGRESS["coordinator"] = PROGRESS["control_end"] = PROGRESS["control_end"] + 4
        cursor = _commit_and_tick(policy, alerts, cursor, requests)
    return requests


def test_two_members_of_the_coordinators_group_for_the_whole_window_are_two_coordinators():
    """Issue 29, measured on the cluster profile: after a killed worker rejoined, the interim
    coordinator a rebalance had started on task 1 kept running beside task 0's; it held no control
    partition, so no cycles overlapped, but the coordinators' group kept two members and commits
    came only at the commit timeout. Two members for 3 intervals (30 s) is the stall
    incident and one restart; the 10 s a failover's dead member lingers is not."""
    from lakebus_dagster.monitor.stall_rules import dual_members_window_seconds

    # shipped: 3 intervals; always 2 intervals past the control session (Kafka's 45 s when unset)
    assert (dual_members_window_seconds(10_000, 10_000), dual_members_window_seconds(10_000, None)) == (30.0, 65.0)
    failover = [1, 2, 1, 1, 2, 2, 1, 1, 1, 1, 1]  # a dead member's control session, twice
    assert _members_ticks(Policy(backoff_unit_seconds=60.0), failover) == [[]] * len(failover) and SENT == []
    stuck = [1, 2, 2, 2, 2, 2, 2]
    requests = _members_ticks(Policy(backoff_unit_seconds=60.0), stuck)
    assert requests.index(["restart_connector"]) == 4, requests  # tick 4: 30 s after tick 1
    # the restart starts the window over: the incident resolves on the next commit (its ledger runs),
    # and two members for another 30 s would be the next incident
    assert sum(requests, []) == ["restart_connector", "offset_ledger_job"], requests
    assert [a["kind"] for a in SENT] == ["incident", "recovery"], SENT
    assert "runs two commit coordinators: its coordinators' consumer group" in SENT[0]["title"]
    assert "has had 2 members for 30s" in SENT[0]["title"], SENT[0]["title"]
