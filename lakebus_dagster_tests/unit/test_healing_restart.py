"""``restart_connector`` when the restarted task fails again: a restart the status sensor requested
for an open incident succeeds and says what it saw (the incident is the sensor's to answer: a
quarantine, another restart, an escalation), so a poison record leaves no red run behind; the same
restart launched by hand fails, naming the state."""

from __future__ import annotations

import dagster as dg
import pytest

from lakebus_dagster.connect import ConnectorStatus, ConnectStateFailed, TaskStatus
from lakebus_dagster.defs.connectors.jobs import INCIDENT_TAG, MAINTENANCE_JOBS
from lakebus_dagster.defs.monitoring.healing import RESTART_JOB
from lakebus_dagster.defs.resources import BusLayoutResource

SINK = BusLayoutResource().layout().connector_name
FAILED_AGAIN = ConnectorStatus(name=SINK, state="RUNNING", worker_id="w:8083",
                               tasks=[TaskStatus(id=0, state="FAILED", worker_id="w:8083", trace="DataException: poison\n at x")])


class _FailsAgain:
    """Connect whose restarted task fails again at once."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def status(self, name):
        return FAILED_AGAIN

    def restart_and_wait(self, name, **kwargs):
        raise ConnectStateFailed(f"FAILED while waiting for ['RUNNING']: {FAILED_AGAIN.describe()}", method="GET",
                                 path=f"/connectors/{name}/status", connector=name, last_status=FAILED_AGAIN)


class _Connect:
    def client(self):
        return _FailsAgain()


def _restart(tags: dict[str, str]) -> dg.ExecuteInProcessResult:
    job = {j.name: j for j in MAINTENANCE_JOBS}["restart_connector"]
    with dg.instance_for_test() as instance:
        return job.execute_in_process(
            run_config={"ops": {"restart_connector_op": {"config": {"connector": SINK}}}},
            resources={"layout": BusLayoutResource(), "connect": _Connect()}, instance=instance, tags=tags,
            raise_on_error=False)


def test_the_sensors_restart_succeeds_and_reports_the_task_failed_again():
    assert RESTART_JOB.name == "restart_connector"  # the job the sensor requests, tagged with its incident
    result = _restart({INCIDENT_TAG: f"task:{SINK}:0@1"})
    assert result.success
    (output_event,) = [e for e in result.all_events if e.is_successful_output]
    outcome = output_event.event_specific_data.metadata["outcome"].value
    assert outcome.startswith("failed again") and f"task:{SINK}:0@1" in outcome
    assert output_event.event_specific_data.metadata["after_state"].value == "RUNNING"


def test_a_restart_by_hand_fails_naming_the_state():
    result = _restart({})
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert "FAILED while waiting for ['RUNNING']: RUNNING; tasks 0=FAILED" in str(failure.step_failure_data.error.cause.message)


@pytest.mark.parametrize("tags", [{INCIDENT_TAG: "x"}, {}])
def test_nothing_failed_is_a_plain_restart(tags, monkeypatch):
    monkeypatch.setattr(_FailsAgain, "restart_and_wait", lambda self, name, **kw: ConnectorStatus(
        name=SINK, state="RUNNING", worker_id="w", tasks=[TaskStatus(id=0, state="RUNNING", worker_id="w")]))
    result = _restart(tags)
    assert result.success
    (output_event,) = [e for e in result.all_events if e.is_successful_output]
    assert output_event.event_specific_data.metadata["outcome"].value == "running"
