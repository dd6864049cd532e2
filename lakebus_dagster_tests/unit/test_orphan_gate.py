"""Orphan removal runs only while the sink and every task are RUNNING: a data file of a write the
sink has not committed yet is referenced only by the control topic, so while the sink is paused,
stopped, a task FAILED or Connect unreachable, the daily maintenance must not remove "orphans".

The gate (``sink_unhealthy``) and the plan it feeds (``_plans``) with the shipped MaintenanceConfig;
Connect is a stub answering one status. A unit test: the gate on a real paused sink is not run here."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.connect import ConnectError
from lakebus_dagster.connect.errors import ConnectUnavailable
from lakebus_dagster.connect.models import ConnectorStatus, TaskStatus
from lakebus_dagster.defs.lakehouse.jobs import MaintenanceConfig, _plans, sink_unhealthy
from lakebus_dagster.defs.resources import ConnectResource
from lakebus_dagster.lake.dws import DWS_TABLES, LakehouseTables

LAYOUT = BusLayout.default()
NOW = datetime(2026, 11, 29, 3, 0, tzinfo=timezone.utc)


class _Client:
    def __init__(self, answer) -> None:
        self.answer = answer

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def status(self, name: str) -> ConnectorStatus:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class StubConnect(ConnectResource):
    """Connect answering one status (or raising one error) for every connector."""

    def client(self):
        return _Client(ANSWER[0])


ANSWER: list = [None]


def _status(state: str, *tasks: str) -> ConnectorStatus:
    return ConnectorStatus(name=LAYOUT.connector_name, state=state, worker_id="w1:8083",
                           tasks=[TaskStatus(id=i, state=s, worker_id="w1:8083") for i, s in enumerate(tasks)])


def _orphan_cutoffs(blocked: str | None) -> set:
    tables = LakehouseTables.from_routes(LAYOUT.routes, DWS_TABLES)
    return {plan.orphans_older_than for _, plan in _plans(MaintenanceConfig(), tables, LAYOUT.tables, NOW, blocked)}


@pytest.mark.parametrize(("answer", "says"), [
    (_status("PAUSED", "PAUSED"), "is PAUSED (tasks 0:PAUSED)"),
    (_status("STOPPED"), "is STOPPED (tasks none)"),
    (_status("RUNNING", "RUNNING", "FAILED"), "is RUNNING (tasks 0:RUNNING, 1:FAILED)"),
    (_status("RUNNING"), "(tasks none)"),
    (ConnectUnavailable("no worker answered", method="GET", path="/connectors/x/status"), "Connect did not answer"),
    (ConnectError("HTTP 500", method="GET", path="/connectors/x/status", status=500), "Connect did not answer"),
], ids=["paused", "stopped", "a-task-failed", "no-tasks", "unreachable", "erroring"])
def test_an_unhealthy_sink_skips_orphan_removal_and_says_why(answer, says):
    ANSWER[0] = answer
    blocked = sink_unhealthy(LAYOUT, StubConnect(url="http://w1:8083"))
    assert blocked is not None and says in blocked, blocked
    assert _orphan_cutoffs(blocked) == {None}, "an orphan cutoff was planned while the sink is not healthy"


def test_a_healthy_sink_removes_orphans_older_than_the_shipped_72_hours():
    ANSWER[0] = _status("RUNNING", "RUNNING", "RUNNING")
    assert sink_unhealthy(LAYOUT, StubConnect(url="http://w1:8083")) is None
    assert _orphan_cutoffs(None) == {NOW - timedelta(hours=72)}
