"""Every lakehouse schedule run by the daemon itself, and the lake's alerts as deployed.

A ``dagster dev`` of the test's own with the shipped sensors and schedules, and one deployment
config file (``LAKEBUS_CONFIG``, as a user writes it) that moves the lakehouse schedules to every
minute — the only way to see the daemon's own ticks of a daily or 04:00 schedule within a test —
and the ODS freshness limit to 2 minutes (so a table goes stale within the test). Alerts go to a
webhook of the test's.

Asserted, all from the outside (the instance's run records, the webhook):
- the daemon's own ticks of ``dws_hourly_schedule``, ``dws_daily_schedule``, ``dws_late_data_sweep``,
  ``observe_ods_schedule``, ``lakehouse_maintenance_hourly`` and ``lakehouse_maintenance_schedule``
  create runs that succeed (a schedule that ticked but whose run failed fails the test);
- an ODS table past its freshness limit raises one ``incident`` (``fresh:``) from
  ``lake_incident_sensor``, and one ``recovery`` once a commit lands again;
- (each schedule but ``observe_ods_schedule`` is stopped through GraphQL, as the UI's toggle does,
  once one of its runs succeeded, so that its runs do not queue ahead)
- Spark Connect unreachable across a scheduled DWS run (the instance reaches the stack's server
  through a TCP gate of the test's, closed; ``dws_hourly_schedule`` started again) raises one
  ``incident`` (``dws:``) and one ``recovery`` when a later run of the same partition succeeds after
  the gate is open again.
"""

from __future__ import annotations

from datetime import datetime, timezone

import dagster as dg
import pytest
import requests
from dagster import DagsterRunStatus

from lakebus_dagster.events import Bet, EventProducer, Recharge
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.lake.spark import connect_address
from lakebus_dagster.stack.launch import LOCATION, launch

from .dagster_instance import running_dagster
from .helpers import Traffic, wait_for
from .outage import TcpGate
from .webhook import alert_webhook

#: any default-profile stack: the lake stage's (it stops that stack's Spark Connect server), to balance the lanes
pytestmark = [pytest.mark.integration, pytest.mark.lake]

EVERY_MINUTE = ("dws_hourly_schedule", "dws_daily_schedule", "dws_late_data_sweep", "observe_ods_schedule",
                "lakehouse_maintenance_hourly", "lakehouse_maintenance_schedule")
CONFIG = "schedules:\n" + "".join(f"  {name}: {{cron: '* * * * *'}}\n" for name in EVERY_MINUTE) + \
    "freshness:\n  ods_max_commit_age_minutes: 2\n"
#: a tick a minute, runs one at a time behind the lakehouse exclusivity: generous but bounded
DEADLINE_S = 600.0


def _events(n: int, start: int) -> list:
    now = datetime.now(timezone.utc)
    common = dict(category="biz", log_date=now.date().isoformat(), hour=f"{now.hour:02d}", plat_id=1, app_id=10406,
                  ts=int(now.timestamp() * 1000), schema_version=1, currency="BRL")
    out = []
    for i in range(start, start + n):
        out.append(Bet(event="bet", user_id=i % 5, order_id=f"s{i}", amount=2.0, game_id=777, **common))
        out.append(Recharge(event="recharge", user_id=i % 5, order_id=f"r{i}", amount=5.0, status="success", **common))
    return out


def _send(stack, layout, events) -> None:
    with EventProducer(layout.bus_topic.name, {"bootstrap.servers": stack.kafka.bootstrap_servers}) as producer:
        for e in events:
            producer.send(e)


def _runs(home, **filters) -> list:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return list(instance.get_run_records(dg.RunsFilter(**filters)))


#: after step 1 only the observation keeps ticking (the freshness checks it records); each other
#: schedule starts a run process every minute, and on a loaded machine their queue outgrows the
#: minute and steps 2 and 3 wait behind it. Step 3 starts the hourly DWS schedule again.
KEPT = ("observe_ods_schedule",)
OUTAGE = "dws_hourly_schedule"
_SCHEDULES = "{ repositoriesOrError { ... on RepositoryConnection { nodes { schedules { id name } } } } }"
_STOP = ("mutation($id: String) { stopRunningSchedule(id: $id) { __typename "
         "... on PythonError { message } } }")
_START = ("mutation($selector: ScheduleSelector!) { startSchedule(scheduleSelector: $selector) { __typename "
          "... on PythonError { message } } }")


def _start_schedule(url: str, name: str) -> None:
    """Start ``name`` through the webserver's GraphQL, as the UI's toggle does."""
    selector = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__", "scheduleName": name}
    done = requests.post(f"{url}/graphql", json={"query": _START, "variables": {"selector": selector}}, timeout=30).json()
    assert done["data"]["startSchedule"]["__typename"] == "ScheduleStateResult", (name, done)


_QUEUED = ("query($filter: RunsFilter) { runsOrError(filter: $filter) { ... on Runs { results { runId } } } }")
_TERMINATE = ("mutation($runId: String!) { terminateRun(runId: $runId) { __typename "
              "... on PythonError { message } } }")


def _cancel_queued(url: str, name: str) -> int:
    """Cancel the runs of schedule ``name`` still waiting in the queue, as an operator does in the UI's
    run list (a queued run is canceled without starting); how many."""
    runs_filter = {"statuses": ["QUEUED"], "tags": [{"key": "dagster/schedule_name", "value": name}]}
    body = requests.post(f"{url}/graphql", json={"query": _QUEUED, "variables": {"filter": runs_filter}}, timeout=30).json()
    queued = [r["runId"] for r in body["data"]["runsOrError"]["results"]]
    for run_id in queued:
        requests.post(f"{url}/graphql", json={"query": _TERMINATE, "variables": {"runId": run_id}}, timeout=30).raise_for_status()
    return len(queued)


def _stop_schedules(url: str, names: set[str]) -> None:
    """Stop ``names`` through the webserver's GraphQL, as the UI's toggle does, and cancel their runs
    still queued (each ticked every minute while the lakehouse runs went one at a time)."""
    body = requests.post(f"{url}/graphql", json={"query": _SCHEDULES}, timeout=30).json()
    found = {s["name"]: s["id"] for repo in body["data"]["repositoriesOrError"]["nodes"] for s in repo["schedules"]}
    assert names <= set(found), f"schedules not in the code location: {names - set(found)}"
    for name in sorted(names):
        done = requests.post(f"{url}/graphql", json={"query": _STOP, "variables": {"id": found[name]}}, timeout=30).json()
        assert done["data"]["stopRunningSchedule"]["__typename"] == "ScheduleStateResult", (name, done)
        _cancel_queued(url, name)


def _alerts(received: list[dict], kind: str, key_prefix: str) -> list[dict]:
    return [a for a in received if a.get("kind") == kind and str(a.get("key", "")).startswith(key_prefix)]


def test_the_daemon_runs_every_lakehouse_schedule_and_the_lake_alerts_once(stack, tmp_path_factory):
    config = tmp_path_factory.mktemp("schedules-config") / "lakebus.yaml"
    config.write_text(CONFIG)
    # the instance reaches the stack's Spark Connect server through a gate of the test's: closed, the
    # server is unreachable for this instance alone, and stays up and warm for everything else
    spark_gate = TcpGate(*connect_address(stack.spark.remote))
    spark_gate.open()
    try:
        _every_schedule_and_the_lake_alerts(stack, tmp_path_factory, config, spark_gate)
    finally:
        spark_gate.close()


def _every_schedule_and_the_lake_alerts(stack, tmp_path_factory, config, spark_gate: TcpGate) -> None:
    with alert_webhook("schedules_daemon") as (hook, received):
        env = {"LAKEBUS_CONFIG": str(config), "LAKEBUS_ALERT_SINK": "webhook", "LAKEBUS_ALERT_WEBHOOK_URL": hook,
               "LAKEBUS_ALERT_FORMAT": "generic", "LAKEBUS_SPARK_REMOTE": f"sc://{spark_gate.address}",
               # a step's wait for an unanswering Spark Connect: shorter than the shipped 60 s (the outage
               # phase waits it out; the lake lane is make test's longest)
               "LAKEBUS_SPARK_CONNECT_WAIT_S": "20"}
        with running_dagster(stack, tmp_path_factory, "schedules", env=env) as dagster:
            _, status = launch("provision_lakebus", port=dagster.port, timeout=300)
            assert status == DagsterRunStatus.SUCCESS
            layout, catalog = dagster.layout, load_catalog(stack)
            _send(stack, layout, _events(20, 0))
            wait_for(lambda: all(catalog.table_exists(t) for t in layout.tables), "both ODS tables created", timeout=180)

            # 1. the daemon's own ticks: a successful run of every schedule moved to every minute; each
            # but the kept ones stopped once it has one
            stopped: set[str] = set()

            def succeeded() -> set[str] | bool:
                done = {name for name in EVERY_MINUTE
                        if _runs(dagster.home, tags={"dagster/schedule_name": name}, statuses=[DagsterRunStatus.SUCCESS])}
                failed = [(r.dagster_run.tags.get("dagster/schedule_name"), r.dagster_run.run_id)
                          for r in _runs(dagster.home, statuses=[DagsterRunStatus.FAILURE])]
                assert not failed, f"scheduled runs failed: {failed}"
                if done - set(KEPT) - stopped:
                    _stop_schedules(dagster.url, done - set(KEPT) - stopped)
                    stopped.update(done - set(KEPT))
                return done == set(EVERY_MINUTE) and done

            wait_for(succeeded, f"a successful daemon-ticked run of each of {EVERY_MINUTE}", timeout=DEADLINE_S)

            # 2. a stale ODS table: no commit for over a minute -> one incident; a commit -> one recovery
            stale = wait_for(lambda: _alerts(received, "incident", "fresh:"), "a stale-table incident", timeout=DEADLINE_S)
            assert "is stale" in stale[0]["title"], stale[0]
            with Traffic(stack.kafka.bootstrap_servers, layout.bus_topic.name, lambda i: _events(1, 1000 + i)):  # commits keep coming: the next observation finds the table fresh
                wait_for(lambda: _alerts(received, "recovery", "fresh:"), "the stale table's recovery", timeout=DEADLINE_S)
            for key in {a["key"] for a in _alerts(received, "incident", "fresh:")}:
                assert len([a for a in received if a.get("key") == key and a["kind"] == "incident"]) == 1, received

            # 3. Spark Connect unreachable across a scheduled DWS run: one incident, one recovery once it is back
            since = datetime.now(timezone.utc)
            spark_gate.close()
            _start_schedule(dagster.url, OUTAGE)
            try:
                wait_for(lambda: _runs(dagster.home, statuses=[DagsterRunStatus.FAILURE], updated_after=since),
                         "a scheduled run failing while Spark Connect is unreachable", timeout=DEADLINE_S)
                wait_for(lambda: _alerts(received, "incident", "dws:"), "a DWS-run incident", timeout=DEADLINE_S)
            finally:
                spark_gate.open()
            # the hourly run asks for the same closed hour at every tick: its incident closes as soon as a
            # run succeeds (an hour that rolled over meanwhile heals at :45, by the gap fill)
            wait_for(lambda: _alerts(received, "recovery", "dws:"), "a DWS incident's recovery", timeout=DEADLINE_S)
            for key in {a["key"] for a in _alerts(received, "incident", "dws:")}:
                opened = [a for a in received if a.get("key") == key and a["kind"] == "incident"]
                assert len(opened) == 1, f"{key} alerted {len(opened)} times (its retries must stay inside it)"
