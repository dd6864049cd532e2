"""``lakebus demo`` as a newcomer runs it (``make demo`` after ``lakebus stack up``): the console
script, the shipped defaults (10 s commits, every sensor and schedule the code location ships), a
fresh stack with an empty bus — ``make test``'s lake stage brings one up in a state dir of its own.

The only thing not as shipped is where alerts go: to a webhook of the test's (a user setting,
``LAKEBUS_ALERT_SINK=webhook``), so that "what was sent" can be compared with what the UI shows.

First demo, then asserted from the outside:
- the bus balances: every record on ``events`` is one ODS row (no position twice) or one DLQ record;
- the DWS tables equal an aggregate of the ODS rows computed here in plain Python (read with pyiceberg);
- the ODS assets were observed with lag 0 and the sink's last commit;
- the runs are exactly the demo's launches (plus schedule runs, if the wall clock crossed one, and
  the freshness-checks sensor's evaluations), all succeeded; no tick of any shipped sensor or
  schedule failed; no healing sensor launched anything (no restart, quarantine, re-verification);
- the alerts sent are exactly the ``lakebus/alerts`` observations, and a first demo sends none.
Then the second demo: no event sent, the bus, the ODS rows and the DWS rows unchanged (reruns of the
partitions replace), runs again exactly the demo's launches minus the sample generator.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from datetime import date
from pathlib import Path

import dagster as dg
import pytest
from confluent_kafka import Consumer

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.defs.asset_keys import ods_key
from lakebus_dagster.defs.alerts import ALERTS_ASSET_KEY
from lakebus_dagster.defs.events.jobs import SampleEventsConfig
from lakebus_dagster.events import generate_events
from lakebus_dagster.kafka import end_offsets
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.lake.dws import DWS_TABLES, LakehouseTables, Scope
from lakebus_dagster.settings import Settings
from lakebus_dagster.stack import dagster_ui

from .helpers import wait_for
from .test_lakehouse import assert_same, expected_rows
from .test_monitoring_daemon import SHIPPED, observed_alert
from .webhook import alert_webhook

pytestmark = [pytest.mark.integration, pytest.mark.lake]

LAKEBUS = Path(sys.executable).with_name("lakebus")
#: `lakebus demo`'s defaults (stack/demo.py): 20,000 events over two days from 2025-11-25
DAYS = [date(2025, 11, 25), date(2025, 11, 26)]
#: sensors whose runs only evaluate something (Dagster's freshness-checks sensor runs the ODS freshness
#: checks when the tables change); every other sensor launching a run means it is healing something
#: sensors whose runs evaluate or build (the freshness checks; the DWS gap fill, which at :45 builds the
#: last 48 h's empty partitions of a fresh deployment; the late-data rebuild, when a tick saw the demo's
#: 2025 events land in part), never heal
EVALUATING_SENSORS = {"ods_freshness_checks_sensor", "dws_gap_fill_sensor", "dws_late_data_sensor"}
#: a run the wall clock started (a schedule at :15, :40, :45) may still be queued behind the demo's:
#: the check waits for it to end (what a user sees a moment later), with a deadline
IN_FLIGHT = {dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
             dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING}
DEMO_JOBS = ["dws_daily_job", "dws_hourly_job", "generate_sample_events", "observe_ods_job", "offset_ledger_job",
             "provision_lakebus"]


def lakebus(*args: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """The console script, its output echoed (pytest shows it for a failing test)."""
    started = time.monotonic()
    proc = subprocess.run([str(LAKEBUS), *args], env=env, capture_output=True, text=True, timeout=timeout)
    print(f"$ lakebus {' '.join(args)}  ({time.monotonic() - started:.0f}s, exit {proc.returncode})\n{proc.stdout}{proc.stderr}")
    return proc


def bus_state(settings: Settings, layout: BusLayout) -> dict[str, dict[int, int]]:
    """End offsets of the bus and DLQ topics."""
    consumer = Consumer({**settings.kafka.client_config(), "group.id": "lakebus-demo-test"})
    try:
        return {t.name: dict(end_offsets(consumer, t.name)) for t in (layout.bus_topic, layout.dlq_topic)}
    finally:
        consumer.close()


def ods_rows(settings: Settings, layout: BusLayout) -> dict[str, list[dict]]:
    catalog = load_catalog(settings)
    return {event: catalog.load_table(table).scan().to_arrow().to_pylist() for event, table in layout.routes.items()}


def dws_tables(settings: Settings, layout: BusLayout) -> dict[str, dict[tuple, dict]]:
    """Each DWS table, every row, keyed by the table's keys (a key twice fails here)."""
    catalog, tables, out = load_catalog(settings), LakehouseTables.from_routes(layout.routes), {}
    for spec in DWS_TABLES:
        rows = {}
        for r in catalog.load_table(tables.dws(spec)).scan().to_arrow().to_pylist():
            key = tuple(r[k] for k in spec.keys)
            assert key not in rows, f"{spec.name}: duplicate key {key}"
            rows[key] = {m: r[m] for m in spec.measures}
        out[spec.name] = rows
    return out


def runs(home: Path, since: float = 0.0) -> list[dg.DagsterRun]:
    """The instance's runs created at or after ``since`` (epoch seconds)."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return [r.dagster_run for r in instance.get_run_records() if r.create_timestamp.timestamp() >= since]


def failed_ticks(home: Path) -> tuple[set[str], list[str]]:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        ticked, failed = set(), []
        for state in instance.all_instigator_state():
            ticks = instance.get_ticks(state.instigator_origin_id, state.selector_id, limit=10_000)
            if ticks:
                ticked.add(state.instigator_name)
            failed += [f"{state.instigator_name}: {t.error.message[:800] if t.error else t.status}"
                       for t in ticks if t.status.value == "FAILURE"]
        return ticked, failed


def observations(home: Path, key: dg.AssetKey) -> list:
    """Every observation of ``key``, oldest first (Dagster returns the newest first unless asked)."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return [r.asset_observation for r in instance.fetch_observations(key, limit=10_000, ascending=True).records]


def assert_ran_clean(home: Path, since: float, launched: list[str]) -> None:
    """Runs created after ``since``: the demo's ``launched`` jobs (+ schedule runs) only, all successful;
    no sensor launched a run; no tick of a shipped sensor or schedule failed."""
    wait_for(lambda: not [r for r in runs(home, since) if r.status in IN_FLIGHT], "the runs in flight to end", timeout=600)
    new = runs(home, since)
    by_schedule = [r for r in new if "dagster/schedule_name" in r.tags]
    by_sensor = [(r.job_name, r.tags["dagster/sensor_name"]) for r in new if "dagster/sensor_name" in r.tags]
    manual = sorted(r.job_name for r in new if r not in by_schedule and "dagster/sensor_name" not in r.tags)
    assert manual == sorted(launched), manual
    healing = [(job, sensor) for job, sensor in by_sensor if sensor not in EVALUATING_SENSORS]
    assert healing == [], f"a clean demo made a sensor restart, quarantine or re-verify something: {healing}"
    assert [(r.job_name, r.status) for r in new if r.status != dg.DagsterRunStatus.SUCCESS] == []
    ticked, failed = failed_ticks(home)
    assert failed == [], f"{len(failed)} failed tick(s): {failed}"
    assert ticked <= SHIPPED and {"connector_status_sensor", "dlq_sensor"} <= ticked, sorted(ticked)


def test_lakebus_demo_twice_as_a_newcomer_runs_it(stack: Settings):
    layout = BusLayout.default(stack.lake.namespace)
    settings = stack
    home = dagster_ui.dagster_home(settings)
    with alert_webhook("demo") as (hook_url, sent):
        env = {**os.environ, "LAKEBUS_ALERT_SINK": "webhook", "LAKEBUS_ALERT_WEBHOOK_URL": hook_url,
               "LAKEBUS_ALERT_FORMAT": "generic"}
        assert lakebus("ui", "up", env=env, timeout=300).returncode == 0
        try:
            before = bus_state(settings, layout) if layout.bus_topic.name in _topics(settings) else {}
            assert sum(before.get(layout.bus_topic.name, {}).values()) == 0, "the lake stage's stack must be fresh: its bus empty"
            first = lakebus("demo", env=env, timeout=1500)
            assert first.returncode == 0
            assert "[demo] done: open " in first.stdout

            # the bus balances, and the DWS tables are the ODS rows aggregated
            state = bus_state(settings, layout)
            on_bus = sum(state[layout.bus_topic.name].values())
            in_dlq = sum(state[layout.dlq_topic.name].values())
            ods = ods_rows(settings, layout)
            positions = Counter((r["_kafka_partition"], r["_kafka_offset"]) for rows in ods.values() for r in rows)
            assert on_bus == 20_000 and [p for p, n in positions.items() if n > 1] == []
            assert len(positions) + in_dlq == on_bus, (len(positions), in_dlq, on_bus)
            # the events the demo sent, regenerated from its seed (as generate_sample_events ran with the demo's
            # config), not read back from the lake: every one is in its ODS table, and they are the oracle below
            events = list(generate_events(SampleEventsConfig(count=20_000, start_date=DAYS[0].isoformat(), days=len(DAYS)).generator_config()))
            assert in_dlq == 0 and sorted(r["order_id"] for rows in ods.values() for r in rows) == sorted(e.order_id for e in events)
            dws = dws_tables(settings, layout)
            for spec in DWS_TABLES:
                scope = Scope.days(DAYS[0], len(DAYS))
                scopes = [Scope.hours(scope.start, 24 * len(DAYS))] if spec.grain == "hour" else [scope]
                assert_same(spec, dws[spec.name], expected_rows(spec, events, scopes))
                assert dws[spec.name], spec.name

            # the ODS observed with the sink's progress
            for event in layout.routes:
                meta = {k: v.value for k, v in observations(home, ods_key(event))[-1].metadata.items()}
                assert meta["sink_lag_records"] == 0 and meta["sink_last_commit"], (event, meta)

            assert_ran_clean(home, 0.0, DEMO_JOBS)
            first_done = time.time()

            second = lakebus("demo", env=env, timeout=1500)
            assert second.returncode == 0
            assert f"{layout.bus_topic.name} already holds 20000 records: not sending the sample again" in second.stdout
            assert bus_state(settings, layout) == state
            assert {e: len(r) for e, r in ods_rows(settings, layout).items()} == {e: len(r) for e, r in ods.items()}
            rerun = dws_tables(settings, layout)
            for spec in DWS_TABLES:  # the same keys and counts; double sums equal up to summation order
                assert_same(spec, rerun[spec.name], dws[spec.name])
            assert_ran_clean(home, first_done, [j for j in DEMO_JOBS if j != "generate_sample_events"])

            # what was sent is what the UI shows, and a clean first hour sends nothing
            recorded = sorted(observed_alert_of(o) for o in observations(home, ALERTS_ASSET_KEY))
            assert recorded == sorted(observed_alert(a) for a in sent)
            assert sent == [], f"a clean demo alerted: {[a['title'] for a in sent]}"
        finally:
            lakebus("ui", "down", env=env, timeout=120)


def observed_alert_of(observation) -> tuple:
    return tuple(observation.metadata[k].value for k in ("kind", "title", "text", "incident"))


def _topics(settings: Settings) -> set[str]:
    consumer = Consumer({**settings.kafka.client_config(), "group.id": "lakebus-demo-test"})
    try:
        return set(consumer.list_topics(timeout=10).topics)
    finally:
        consumer.close()
