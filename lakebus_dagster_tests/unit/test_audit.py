"""The operator audit: ``operator_audit_sensor`` evaluated the way the daemon does (``evaluate_tick`` on a
context built from the definitions) over real runs of an instance — one ``lakebus/audit`` observation
per finished run of an audited job (SUCCESS, FAILURE, CANCELED), none for other jobs, none twice."""

from __future__ import annotations

from types import SimpleNamespace

import dagster as dg
import pytest

from lakebus_dagster.defs import audit
from lakebus_dagster.defs.asset_keys import AUDIT_KEY
from lakebus_dagster.defs.audit.records import REDACTED, redact
from lakebus_dagster.defs.connectors.jobs import MAINTENANCE_JOBS
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster_tests.unit.test_guarded_jobs import FakeClient

JOBS = {j.name: j for j in MAINTENANCE_JOBS}
SINK = BusLayoutResource().layout().connector_name


class FakeConnect:
    url = "http://connect:8083"

    def client(self):
        return FakeClient()


RESOURCES = {"layout": BusLayoutResource(), "connect": FakeConnect(), "kafka": SimpleNamespace()}


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        yield inst


def tick(instance: dg.DagsterInstance, cursor: str | None):
    defs = audit.defs  # the domain as the code location registers it
    sensor = defs.resolve_sensor_def("operator_audit_sensor")
    with dg.build_sensor_context(instance=instance, cursor=cursor, definitions=defs, sensor_name=sensor.name) as context:
        result = sensor.evaluate_tick(context)
    return result.asset_events, result.cursor


def delete(instance: dg.DagsterInstance, confirm: str, **tags: str) -> dg.ExecuteInProcessResult:
    return JOBS["delete_connector"].execute_in_process(
        run_config={"ops": {"delete_connector_op": {"config": {"confirm": confirm}}}}, resources=RESOURCES,
        instance=instance, raise_on_error=False, tags=tags)


def by_outcome(events) -> dict[str, dict]:
    return {e.metadata["outcome"].value: {k: getattr(v, "value", v) for k, v in e.metadata.items()} for e in events}


def test_each_finished_operator_run_is_recorded_once_with_who_what_and_outcome(instance):
    ok = delete(instance, SINK, **{"dagster/user": "alice@example.com"})
    refused = delete(instance, "wrong")
    JOBS["connector_status_report"].execute_in_process(resources=RESOURCES, instance=instance, raise_on_error=False)
    restart = JOBS["restart_connector"]  # a run the daemon created for a sensor (it carries the job's tags), canceled
    canceled = instance.create_run_for_job(restart, run_config={}, tags={**restart.tags, "dagster/sensor_name": "x"})
    instance.report_run_canceled(canceled)

    events, cursor = tick(instance, None)
    assert [e.asset_key for e in events] == [AUDIT_KEY] * 3  # the status report is no operator action
    records = by_outcome(events)
    assert set(records) == {"SUCCESS", "FAILURE", "CANCELED"}
    success, failure = records["SUCCESS"], records["FAILURE"]
    assert (success["job"], success["run"], success["launched_by"]) == ("delete_connector", ok.run_id, "alice@example.com")
    assert success["config"] == {"ops": {"delete_connector_op": {"config": {"confirm": SINK}}}}
    assert success["launched_from"] == "launchpad, CLI or API" and success["started"] != "-" and success["ended"] != "-"
    assert (failure["run"], failure["launched_by"]) == (refused.run_id, "unknown")
    assert (records["CANCELED"]["job"], records["CANCELED"]["launched_from"]) == ("restart_connector", "sensor x")
    assert "canceled" in records["CANCELED"]["message"] and records["CANCELED"]["started"] == "-"

    # a second evaluation from the returned cursor records nothing again; a new run is recorded alone
    assert tick(instance, cursor)[0] == []
    again = delete(instance, SINK)
    events, cursor = tick(instance, cursor)
    assert [e.metadata["run"].value for e in events] == [again.run_id]
    assert tick(instance, cursor)[0] == []


def test_the_records_are_observations_the_ui_lists_on_the_audit_asset(instance):
    delete(instance, SINK)
    events, _ = tick(instance, None)
    for event in events:  # what the daemon does with a tick's asset events
        instance.report_runless_asset_event(event)
    (stored,) = instance.fetch_observations(AUDIT_KEY, limit=10).records
    assert stored.asset_observation.metadata["job"].value == "delete_connector"


def test_secret_looking_config_values_are_redacted():
    config = {"resources": {"kafka": {"config": {"sasl_password": "p4ss", "bootstrap_servers": "k:9092"}},
                            "alerts": {"config": {"webhook_url": "https://bot:tok3n@hooks.example/x", "api_key": "k",
                                                  "token": ""}}},
              "ops": {"x": {"config": {"confirm": "events-iceberg-sink", "secret_access_key": {"env": "S3_SECRET"}}}}}
    out = redact(config)
    assert out["resources"]["kafka"]["config"] == {"sasl_password": REDACTED, "bootstrap_servers": "k:9092"}
    assert out["resources"]["alerts"]["config"] == {"webhook_url": f"https://{REDACTED}@hooks.example/x",
                                                    "api_key": REDACTED, "token": ""}
    assert out["ops"]["x"]["config"] == {"confirm": "events-iceberg-sink", "secret_access_key": REDACTED}
    assert "p4ss" not in repr(out) and "tok3n" not in repr(out)


def test_a_failing_read_of_the_event_log_fails_the_tick_and_keeps_the_cursor(instance, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("event log unavailable")

    monkeypatch.setattr(type(instance), "fetch_run_status_changes", boom)
    with pytest.raises(Exception, match="event log unavailable"):
        tick(instance, '{"PIPELINE_SUCCESS": 7}')
