"""Every destructive or repair job refuses a run whose ``config.confirm`` does not name the object it
acts on (empty or wrong), touching nothing, and runs with it; the schedule and sensors that launch such
jobs confirm in their own run config. The jobs run through ``execute_in_process`` with fakes for
Connect, Kafka, Spark and the capture; the fakes record every call, so a refusal is seen to touch none."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any, Callable

import dagster as dg
import pytest

from lakebus_dagster.connect import ConnectorStatus
from lakebus_dagster.connect.models import ConnectorInfo, TaskStatus
from lakebus_dagster.defs.cdc import jobs as cdc_jobs
from lakebus_dagster.defs.cdc import reread
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.connector_fleet import jobs as fleet_jobs
from lakebus_dagster.defs.connectors.jobs import MAINTENANCE_JOBS
from lakebus_dagster.defs.lakehouse.retention import retention_job
from lakebus_dagster.defs.monitoring import requeue_sensor as requeue_sensor_module
from lakebus_dagster.defs.recovery import jobs as recovery_jobs
from lakebus_dagster.defs.recovery import requeue
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster.monitor.traces import RecordRef

LAYOUT = BusLayoutResource()
BUS = LAYOUT.layout()
SINK = BUS.connector_name
#: every call a fake saw: (what, name)
CALLS: list[tuple[str, Any]] = []
POISON_TRACE = ("org.apache.kafka.connect.errors.DataException: An error occurred converting record, topic: events, "
                "partition, 0, offset: 20\nCaused by: java.lang.NumberFormatException: For input string: \"x\"\n")


def _status(name: str, state: str = "RUNNING") -> ConnectorStatus:
    return ConnectorStatus(name=name, state=state, worker_id="w:8083", tasks=[TaskStatus(id=0, state=state, worker_id="w:8083")])


class FakeClient:
    """Connect as the jobs use it; ``kind`` and ``connector_class`` describe every connector."""

    def __init__(self, kind: str = "sink", connector_class: str = "org.apache.iceberg.connect.IcebergSinkConnector"):
        self.kind, self.connector_class = kind, connector_class

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def __getattr__(self, verb: str) -> Callable:
        def call(name, *args, **kwargs):
            CALLS.append((verb, name))
            if verb in {"status"}:
                return _status(name)
            if verb == "wait_for_state":
                return _status(name, next(iter(args[0])))
            if verb == "info":
                return ConnectorInfo(name=name, config={"connector.class": self.connector_class}, type=self.kind)
            if verb == "get_offsets":
                return []
            return "ok"

        return call


@dataclass
class FakeConnect:
    kind: str = "sink"
    connector_class: str = "org.apache.iceberg.connect.IcebergSinkConnector"
    url: str = "http://connect:8083"

    def client(self):
        CALLS.append(("connect", self.url))
        return FakeClient(self.kind, self.connector_class)


class FakeKafka:
    def consumer(self, group_id, **overrides):
        CALLS.append(("consumer", group_id))
        return SimpleNamespace(close=lambda: None)

    def producer(self, **overrides):
        CALLS.append(("producer", ""))
        return object()

    def admin(self, **overrides):
        CALLS.append(("admin", ""))
        return object()

    def clients(self):
        return self


def _record(what: str, result: Any = None) -> Callable:
    def call(*args, **kwargs):
        CALLS.append((what, args[1] if len(args) > 1 else ""))
        return result

    return call


class FakeLedger:
    def __init__(self, *args):
        CALLS.append(("ledger", ""))

    def run(self, **_):
        return SimpleNamespace(verdict=SimpleNamespace(gaps={}), state=SimpleNamespace(ever_verified={}))


def _spark():
    catalog = SimpleNamespace(tableExists=_record("tableExists", False))
    return SimpleNamespace(spark_session=SimpleNamespace(catalog=catalog))


def _message(offset: int):
    return SimpleNamespace(offset=lambda: offset, partition=lambda: 0, key=lambda: b"k", value=lambda: b'{"x": 1}',
                           headers=lambda: [])


@dataclass
class Case:
    """One guarded job: its op, the config besides ``confirm``, what ``confirm`` must be, its resources,
    the module functions replaced by recording fakes, and the call that shows it acted."""

    job: dg.JobDefinition
    op: str
    config: dict[str, Any]
    expected: str
    resources: dict[str, Any]
    patches: list[tuple[Any, str, Any]] = field(default_factory=list)
    acted: tuple[str, Any] = ("", "")


def _job(name: str) -> dg.JobDefinition:
    jobs = {j.name: j for j in (*MAINTENANCE_JOBS, *fleet_jobs.FLEET_JOBS)}
    return jobs[name]


def _cases() -> dict[str, Case]:
    capture = ChangeCaptureResource(enabled=True, signal_bootstrap="kafka:9092")
    cdc = {"capture": capture, "connect": FakeConnect(), "kafka": FakeKafka()}
    reread_patches = [(reread, "start_reread", _record("start_reread", {})), (reread, "follow_reread", _record("follow_reread", {}))]
    return {
        "delete_connector": Case(_job("delete_connector"), "delete_connector_op", {}, SINK,
                                 {"layout": LAYOUT, "connect": FakeConnect()}, acted=("delete", SINK)),
        "set_connector_offsets": Case(_job("set_connector_offsets"), "set_connector_offsets_op",
                                      {"mode": "reset", "resume": False}, SINK,
                                      {"layout": LAYOUT, "connect": FakeConnect(), "kafka": FakeKafka()},
                                      acted=("delete_offsets", SINK)),
        "move_source_start_position": Case(
            _job("move_source_start_position"), "move_source_start_position_op",
            {"connector": "file-source", "offsets": [{"partition": {"filename": "/in.txt"}, "offset": {"position": 4}}]},
            "file-source",
            {"layout": LAYOUT, "connect": FakeConnect("source", "org.apache.kafka.connect.file.FileStreamSourceConnector"),
             "kafka": FakeKafka(), "connector_specs": SimpleNamespace(specs=lambda layout: [])},
            [(fleet_jobs, "validate_source_offsets", lambda name, cls, cfg, offsets, before: offsets)],
            acted=("patch_offsets", "file-source")),
        "provision_connector_specs": Case(
            _job("provision_connector_specs"), "provision_connector_specs_op", {"prune": True}, BUS.bus_topic.name,
            {"layout": LAYOUT, "connect": FakeConnect(), "kafka": FakeKafka(), "connector_specs": SimpleNamespace(specs=lambda layout: [])},
            [(fleet_jobs, "reconcile_specs", _record("reconcile_specs", [])), (fleet_jobs, "read_declared", _record("read_declared", {}))],
            acted=("reconcile_specs", object)),
        "replay_dlq": Case(
            recovery_jobs.replay_dlq, "replay_dlq_op", {}, BUS.dlq_topic.name, {"layout": LAYOUT, "kafka": FakeKafka()},
            [(recovery_jobs, "_ledger_keys", _record("ledger_keys", set())),
             (recovery_jobs.kafka_reading, "watermarks", lambda consumer, topic, partition: (0, 0)),
             (recovery_jobs, "read_range", _record("read_range", [])), (recovery_jobs, "produce_all", _record("produce_all", []))],
            acted=("produce_all", [])),
        "remediate_poison_record": Case(
            recovery_jobs.remediate_poison_record, "remediate_poison_record_op", {}, SINK,
            {"layout": LAYOUT, "connect": FakeConnect(), "kafka": FakeKafka(), "alerts": object()},
            [(recovery_jobs, "_failing_task", lambda client, name: (TaskStatus(0, "FAILED", "w", POISON_TRACE),
                                                                    RecordRef("events", 0, 20))),
             (recovery_jobs, "_committed_offset", lambda *a: 20), (recovery_jobs, "read_range", lambda *a: [_message(20)]),
             (recovery_jobs, "produce_all", _record("produce_all", [(0, 7)])),
             (recovery_jobs, "send_and_record", _record("send_and_record"))],
            acted=("patch_offsets", SINK)),
        "requeue_lost_records": Case(
            requeue.requeue_lost_records, "requeue_lost_records_op", {}, BUS.bus_topic.name,
            {"layout": LAYOUT, "kafka": FakeKafka(), "connect": FakeConnect(), "alerts": object(),
             "iceberg": SimpleNamespace(load=lambda: None)},
            [(requeue, "Ledger", FakeLedger)], acted=("ledger", "")),
        "lakehouse_retention": Case(retention_job(), "expire_ods_days", {}, ",".join(BUS.namespaces),
                                    {"spark": _spark(), "layout": LAYOUT, "kafka": FakeKafka()}, acted=("tableExists", object)),
        "resync_captured_table": Case(cdc_jobs.resync_captured_table, "resync_captured_table_op",
                                      {"table": "orders", "since": "2026-11-27T10:00:00+00:00"}, "orders", cdc, reread_patches,
                                      acted=("start_reread", object)),
        "resnapshot_captured_table": Case(cdc_jobs.resnapshot_captured_table, "resnapshot_captured_table_op",
                                          {"tables": ["orders"]}, "orders", cdc, reread_patches, acted=("start_reread", object)),
    }


CASES = _cases()


INSTANCE: list[dg.DagsterInstance] = []


@pytest.fixture(scope="module", autouse=True)
def _instance():
    with dg.instance_for_test() as instance:
        INSTANCE[:] = [instance]
        yield


@pytest.fixture(autouse=True)
def _calls():
    CALLS.clear()
    yield
    CALLS.clear()


def run(case: Case, monkeypatch, **config) -> dg.ExecuteInProcessResult:
    for module, name, fake in case.patches:
        monkeypatch.setattr(module, name, fake)
    # the bus-changing jobs take the operations principal's Kafka resource too: the same fake here
    resources = {**case.resources, **({"operations": case.resources["kafka"]} if "kafka" in case.resources else {})}
    required = case.job.required_resource_keys
    return case.job.execute_in_process(run_config={"ops": {case.op: {"config": {**case.config, **config}}}},
                                       resources={k: v for k, v in resources.items() if k in required or k != "operations"},
                                       instance=INSTANCE[0], raise_on_error=False)


def failure_message(result: dg.ExecuteInProcessResult) -> str:
    (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    return failure.step_failure_data.error.message


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("confirm", ["", "not-it"])
def test_a_guarded_job_refuses_without_the_right_confirmation_and_touches_nothing(name, confirm, monkeypatch):
    case = CASES[name]
    result = run(case, monkeypatch, **({"confirm": confirm} if confirm else {}))
    assert not result.success
    message = failure_message(result)
    assert f"{case.job.name}: refused, nothing was changed" in message
    assert "config.confirm" in message and repr(case.expected) in message
    assert ("is empty" if not confirm else "does not match") in message and "not-it" not in message
    assert CALLS == []  # refused before Connect, Kafka, Spark or the capture were touched


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_guarded_job_runs_with_its_confirmation(name, monkeypatch):
    case = CASES[name]
    result = run(case, monkeypatch, confirm=case.expected)
    assert result.success, name
    verb, target = case.acted
    assert any(v == verb and (target is object or t == target) for v, t in CALLS), CALLS


def test_every_guarded_job_says_what_to_type_in_its_config_schema():
    for name, case in CASES.items():
        fields = case.job.graph.node_named(case.op).definition.config_schema.config_type.fields
        assert "to confirm" in fields["confirm"].description, name
        assert case.job.tags.get("lakebus/audit") == "operator-action", name


def test_a_resnapshot_of_every_table_confirms_them_all_in_the_captures_order(monkeypatch):
    case = CASES["resnapshot_captured_table"]
    every = ",".join(ChangeCaptureResource().tables)
    assert every == "users,orders"
    refused = run(case, monkeypatch, tables=[], confirm="orders")
    assert not refused.success and repr(every) in failure_message(refused)
    assert run(case, monkeypatch, tables=[], confirm=every).success


def test_provisioning_the_specs_without_prune_needs_no_confirmation(monkeypatch):
    case = CASES["provision_connector_specs"]
    assert run(case, monkeypatch, prune=False).success
    assert any(v == "reconcile_specs" for v, _ in CALLS)


# -- the schedule and the sensors that launch guarded jobs confirm themselves ----------------------
def test_the_retention_schedule_confirms_the_ods_namespace():
    from lakebus_dagster.defs.lakehouse.schedules import retention_schedule

    job = retention_job()
    schedule = retention_schedule(job, "30 4 * * *")
    context = dg.build_schedule_context(scheduled_execution_time=datetime(2025, 11, 26, 4, 30, tzinfo=timezone.utc),
                                        resources={"layout": LAYOUT})
    (request,) = schedule.evaluate_tick(context).run_requests
    assert request.run_config == {"ops": {"expire_ods_days": {"config": {"confirm": ",".join(BUS.namespaces)}}}}
    assert dg.validate_run_config(job, request.run_config)


@dg.op
def _noop() -> None:
    return None


@dg.job(name="offset_ledger_job")
def _finished_job():
    _noop()


def test_the_requeue_after_a_loss_confirms_the_bus_topic(monkeypatch):
    monkeypatch.setattr(requeue_sensor_module, "lost_count_of_run", lambda instance, run_id: 3)
    ledger_run = dg.DagsterRun(job_name="offset_ledger_job", run_config={"ops": {"offset_ledger": {"config": {"grace_s": 80.0}}}})
    done = _finished_job.execute_in_process(instance=INSTANCE[0])
    event = next(e for e in done.all_events if e.event_type == dg.DagsterEventType.RUN_SUCCESS)
    context = dg.build_run_status_sensor_context(
        sensor_name="requeue_after_loss_sensor", dagster_event=event, dagster_instance=INSTANCE[0], dagster_run=ledger_run,
        resources={"monitoring_policy": SimpleNamespace(auto_requeue_lost=True), "layout": LAYOUT})
    request = requeue_sensor_module.requeue_after_loss_sensor(context)
    assert request.run_config == {"ops": {"requeue_lost_records_op": {"config": {"grace_s": 80.0, "confirm": BUS.bus_topic.name}}}}
    assert dg.validate_run_config(requeue.requeue_lost_records, request.run_config)
