"""Monitoring as deployed: the real ``dagster dev`` (webserver + daemon) with the shipped sensors,
schedules and policy defaults (auto-restart and quarantine on, 90 s recovery window) — except the
restart backoff's unit, 10 s instead of 60 s through the deployment's config file (``LAKEBUS_CONFIG``,
as a user configures it), so that the outage test sees a second restart and its spacing in 20 s
instead of 2 minutes — against the real stack. The test only acts as the outside world does — it produces records, it cuts the
connector's network path to the catalog — and observes from the outside: the alert webhook, the
run list and the sensor ticks over GraphQL, Connect's status, the Iceberg rows.

The instance provisions an isolated bus (``LAKEBUS_BUS_SUFFIX``) whose connector reaches the REST
catalog through a :class:`TcpGate` and a :class:`CatalogWriteGate` (``LAKEBUS_CONNECT_CATALOG_URI``),
so an outage or refused commits here hit this connector alone. The tests run in order on one bus.

After each test the instance of the test's own ``dagster dev`` is read directly
(``DagsterInstance.from_config(home)``): no tick of any shipped sensor or schedule failed during the
test, no run started during it failed except the ones the test names (the poison record's restart,
which fails again on the record by design), and the ``lakebus/alerts`` asset's observations are
exactly the alerts the webhook received (same kind, title, text and count).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlparse

import pytest
import dagster as dg
from dagster import DagsterRunStatus

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.alerts import ALERTS_ASSET_KEY
from lakebus_dagster.defs.resources import KafkaResource
from lakebus_dagster.events import Bet, EventProducer, Recharge
from lakebus_dagster.kafka import read_range
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.ledger import Ledger, ledger_complete
from lakebus_dagster.ledger.sources import committed_offsets
from lakebus_dagster.stack.local_settings import StackSettings
from lakebus_dagster.stack import launch
from lakebus_dagster_tests.integration.helpers import wait_for
from lakebus_dagster_tests.integration.dagster_instance import running_dagster
from lakebus_dagster_tests.integration.outage import CatalogWriteGate, TcpGate
from lakebus_dagster_tests.integration.webhook import alert_webhook

pytestmark = [
    pytest.mark.integration,
    pytest.mark.daemon,
    pytest.mark.filterwarnings("ignore:Using variable_values and operation_name:DeprecationWarning"),
]

SERVICE = "dagster-monitoring-test"
SENSORS = ("connector_status_sensor", "dlq_sensor")
#: the daemon ticks every 30 s; runs start in their own processes: generous, but bounded
STEP_S = 240.0


@dataclass
class Deployed:
    settings: StackSettings  # state_dir: the instance's pid file, log, dagster_home
    port: int
    layout: BusLayout
    gate: TcpGate  # the connector's road to the catalog (cut = outage)
    writes: CatalogWriteGate  # behind the road: may refuse commits (a stall)
    alerts: list[dict]
    home: Path  # the instance's DAGSTER_HOME: ticks, runs and asset events, read directly

    def alerts_of(self, kind: str) -> list[dict]:
        return [a for a in self.alerts if a.get("kind") == kind]


@pytest.fixture(scope="module")
def deployed(stack: StackSettings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    with alert_webhook("monitoring_daemon") as (hook_url, received):
        writes = CatalogWriteGate(stack.lake.catalog_uri)
        gate = TcpGate("127.0.0.1", urlparse(writes.uri).port)
        gate.open()
        config = tmp_path_factory.mktemp("monitoring-config") / "lakebus.yaml"
        config.write_text(f"monitoring:\n  backoff_unit_seconds: {BACKOFF_UNIT_S}\n")
        env = {
            # the connector reaches the catalog through both gates; Dagster itself goes direct
            "LAKEBUS_CONNECT_CATALOG_URI": f"http://{gate.address}",
            "LAKEBUS_CONFIG": str(config),
            "LAKEBUS_ALERT_SINK": "webhook",
            "LAKEBUS_ALERT_WEBHOOK_URL": hook_url,
            "LAKEBUS_ALERT_FORMAT": "generic",
        }
        try:
            with running_dagster(stack, tmp_path_factory, SERVICE, env=env) as dagster:
                # the gap fill (at :45) and the late-data rebuild (the records' 2025 hours closed long ago)
                # build DWS hours from this module's records, some with a null currency on purpose: their
                # check incidents are the lakehouse's, not this module's
                dagster.stop_sensors("dws_gap_fill_sensor", "dws_late_data_sensor")
                run_id = launch.submit("provision_lakebus", port=dagster.port)
                status = launch.wait(run_id, timeout=STEP_S, port=dagster.port)
                assert status == DagsterRunStatus.SUCCESS, launch.log_messages(run_id, port=dagster.port)
                # a bus with both event types, as deployed: the stall rule must see its recovery with
                # two tables (stop 8 saw it never come once a recharge had landed: an older table's
                # watermark stood in for a partial commit's missing one)
                land_one_recharge(stack, dagster.layout)
                yield Deployed(dagster.settings, dagster.port, dagster.layout, gate, writes, received, dagster.home)
        finally:
            gate.close()
            writes.shutdown()


# -- observing from the outside: GraphQL, as the UI does ------------------------------------------------
_RUNS = """
query Runs($filter: RunsFilter) {
  runsOrError(filter: $filter) { ... on Runs { results { runId jobName status tags { key value } } } }
}
"""


def runs_of(d: Deployed, job: str) -> list[dict]:
    data = launch.client(d.port)._execute(_RUNS, {"filter": {"pipelineName": job}})  # noqa: SLF001
    return data["runsOrError"]["results"]


#: every sensor and schedule the code location ships (the daemon ticks those RUNNING by default)
SHIPPED = {x.name for x in defs.get_repository_def().sensor_defs} | {x.name for x in defs.get_repository_def().schedule_defs}


def chain(error) -> str:
    """A step's error with its causes (Dagster wraps the op's exception in a DagsterExecutionStepExecutionError)."""
    messages = []
    while error is not None:
        messages.append(error.message.strip())
        error = error.cause
    return " <- ".join(messages)


def assert_daemon_clean(d: Deployed, since: float) -> None:
    """Read from the instance itself: no tick of any shipped sensor or schedule since ``since`` failed,
    and no run started since then failed (a healing restart whose task fails again succeeds and says
    so: the incident is the sensor's to answer)."""
    with dg.DagsterInstance.from_config(str(d.home)) as instance:
        ticked, failed = set(), []
        for state in instance.all_instigator_state():
            ticks = instance.get_ticks(state.instigator_origin_id, state.selector_id, after=since)
            if ticks:
                ticked.add(state.instigator_name)
            failed += [f"{state.instigator_name}: {t.error.message[:1500] if t.error else t.status}"
                       for t in ticks if t.status.value == "FAILURE"]  # TickStatus: no public export in Dagster 1.13
        runs = instance.get_runs(dg.RunsFilter(created_after=datetime.fromtimestamp(since, tz=timezone.utc)))
        failed_runs = []
        for run in runs:
            if run.status != DagsterRunStatus.FAILURE:
                continue
            errors = [chain(e.dagster_event.step_failure_data.error)
                      for e in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_FAILURE)]
            failed_runs.append((run.job_name, run.run_id, errors))
    assert not failed, f"{len(failed)} failed tick(s): {failed}"
    assert ticked <= SHIPPED and set(SENSORS) <= ticked, f"ticked during the test: {sorted(ticked)}; shipped: {sorted(SHIPPED)}"
    assert not failed_runs, f"failed runs: {failed_runs}"


#: the restart backoff's unit in the test's deployment (config file); shipped: 60 s
BACKOFF_UNIT_S = 10
#: restart n+1 comes no sooner than this many seconds after restart n: the shipped schedule n² + n
#: units, written out here (not read from the code under test)
BACKOFF_AFTER_RESTART_S = {1: 2 * BACKOFF_UNIT_S, 2: 6 * BACKOFF_UNIT_S, 3: 12 * BACKOFF_UNIT_S}
#: the task FAILED while the catalog was cut: one restart at once as the incident opens; it fails
#: again on the cut road; the second waits the backoff (2 units) — the test reopens the road when
#: it is launched, so it heals and no third is due
OUTAGE_RESTARTS = 2
#: the catalog refuses commits: Iceberg 1.12's coordinator terminates, the task FAILS — a restart at
#: once; each later failure of the restarted task waits the backoff (2, then 6 units): within the
#: test's refusal (two more refused commits) at most three
REFUSED_RESTARTS_MAX = 3


def restart_runs(d: Deployed, since: float) -> list:
    """The restart_connector runs the daemon launched since ``since``, oldest first."""
    with dg.DagsterInstance.from_config(str(d.home)) as instance:
        records = instance.get_run_records(dg.RunsFilter(
            job_name="restart_connector", created_after=datetime.fromtimestamp(since, tz=timezone.utc)))
    return sorted(records, key=lambda r: r.create_timestamp)


def assert_restarts(d: Deployed, since: float, expected: int) -> list[float]:
    """Exactly ``expected`` restart runs since ``since``; per incident, attempts 1, 2, ... each launched
    no sooner after the previous one than the deployment's backoff allows. Returns each run's seconds
    after ``since`` (for the failure message of the caller, and to see the spacing in the log)."""
    records = restart_runs(d, since)
    at = [r.create_timestamp.timestamp() - since for r in records]
    by_incident: dict[str, list] = {}
    for record in records:
        by_incident.setdefault(record.dagster_run.tags.get("lakebus/incident", "?"), []).append(record)
    print(f"[restarts] {len(records)} restart run(s) at {[round(t) for t in at]} s, incidents {sorted(by_incident)}")
    assert len(records) == expected, f"{len(records)} restart runs, expected {expected}: at {at} s"
    for incident, runs in by_incident.items():
        assert [r.dagster_run.tags.get("lakebus/attempt") for r in runs] == [str(n) for n in range(1, len(runs) + 1)], incident
        for n, (earlier, later) in enumerate(zip(runs, runs[1:]), start=1):
            gap = (later.create_timestamp - earlier.create_timestamp).total_seconds()
            assert gap >= BACKOFF_AFTER_RESTART_S[n] - 1.0, f"{incident}: restart {n + 1} only {gap:.0f}s after {n}"
    return at


def observed_alert(alert: dict) -> tuple[str, str, str, str]:
    """What ``lakebus/alerts`` records of a delivered alert (``alert_observations``: title cut at 500,
    text at 2000 characters in a code block)."""
    return alert["kind"], alert["title"][:500], f"```\n{alert.get('text', '')[:2000]}\n```", alert.get("key") or ""


def assert_alerts_observed(d: Deployed) -> None:
    """The ``lakebus/alerts`` observations in the instance are exactly the alerts the webhook received
    (the daemon stores a tick's observations after the tick delivered them: polled, with a deadline)."""
    def observations() -> list[tuple[str, str, str, str]]:
        with dg.DagsterInstance.from_config(str(d.home)) as instance:
            records = instance.fetch_observations(ALERTS_ASSET_KEY, limit=10_000).records
        return sorted(tuple(r.asset_observation.metadata[k].value for k in ("kind", "title", "text", "incident"))
                      for r in records)

    def same() -> bool:
        return observations() == sorted(observed_alert(a) for a in d.alerts)

    try:
        wait_for(same, "lakebus/alerts observations equal to the delivered alerts", timeout=60)
    except AssertionError:
        seen, sent = Counter(observations()), Counter(observed_alert(a) for a in d.alerts)
        raise AssertionError(f"delivered but not observed: {list(sent - seen)}; observed but not delivered: {list(seen - sent)}")
    assert d.alerts, "no alert was delivered: nothing was compared"


#: the poison bet's offset on the one-partition bus: after the fixture's recharge (offset 0) and 21 bets
POISON_OFFSET = 22


def land_one_recharge(stack: StackSettings, layout: BusLayout) -> None:
    """One recharge through the bus, waited for until its ODS table holds it."""
    with EventProducer(layout.bus_topic.name, {"bootstrap.servers": stack.kafka.bootstrap_servers}) as producer:
        producer.send(Recharge(category="biz", event="recharge", log_date="2025-11-27", hour="10", plat_id=1, app_id=2,
                               ts=1764237600000, schema_version=1, status="success", user_id=100, order_id="r0",
                               amount=5.0, currency="BRL"))
    catalog, table = load_catalog(stack), layout.routes["recharge"]
    wait_for(lambda: catalog.table_exists(table) and catalog.load_table(table).scan().to_arrow().num_rows == 1,
             f"the recharge in {table}", STEP_S)


def bet(i: int, currency: str | None = "BRL") -> Bet:
    return Bet(category="biz", event="bet", log_date="2025-11-27", hour="10", plat_id=1, app_id=2, ts=1764237600000 + i,
               schema_version=1, user_id=100 + i % 7, order_id=f"o{i}", amount=float(i), currency=currency, game_id=1)


def send(stack: StackSettings, topic: str, ids: range, currency: str | None = "BRL") -> None:
    with EventProducer(topic, {"bootstrap.servers": stack.kafka.bootstrap_servers}) as producer:
        for i in ids:
            producer.send(bet(i, currency))


def order_ids(stack: StackSettings, d: Deployed) -> list[str]:
    table = d.layout.routes["bet"]
    catalog = load_catalog(stack)
    if not catalog.table_exists(table):
        return []
    return catalog.load_table(table).scan(selected_fields=("order_id",)).to_arrow().column("order_id").to_pylist()


def duplicates_described(stack: StackSettings, d: Deployed, since: float) -> str:
    """For a failure message: every row of a duplicated order id at its Kafka position, and each
    snapshot since ``since`` (ms, records added, the sink's commit id) — a copy at a new offset is a
    re-queue or a second send; one at the same offset is the sink committing a record twice."""
    table = load_catalog(stack).load_table(d.layout.routes["bet"])
    rows = table.scan(selected_fields=("order_id", "_kafka_partition", "_kafka_offset")).to_arrow().to_pylist()
    twice = {i for i, n in Counter(r["order_id"] for r in rows).items() if n > 1}
    snapshots = [(s.timestamp_ms, s.summary.get("added-records"), s.summary.get("kafka.connect.commit-id"))
                 for s in table.snapshots() if s.timestamp_ms >= since * 1000]
    return f"rows of duplicated ids: {sorted((r['order_id'], r['_kafka_partition'], r['_kafka_offset']) for r in rows if r['order_id'] in twice)}; snapshots since: {snapshots}"


def wait_rows(stack: StackSettings, d: Deployed, n: int, timeout: float = STEP_S) -> list[str]:
    return wait_for(lambda: (ids := order_ids(stack, d)) and len(ids) >= n and ids, f"{n} rows in {d.layout.routes['bet']}", timeout)


def wait_alert(d: Deployed, kind: str, count: int = 1, timeout: float = STEP_S) -> list[dict]:
    return wait_for(lambda: len(found := d.alerts_of(kind)) >= count and found, f"{count} {kind!r} alert(s); got {d.alerts}", timeout)


def drift_currency_to_int(stack: StackSettings, d: Deployed) -> None:
    """Someone changes the ODS table by hand: ``currency`` (string) is dropped and re-added as int.
    Records with a null currency still land; one that carries a currency passes the door (it is a
    valid registered ``bet``) and fails inside the sink's writer: a record-level failure."""
    from pyiceberg.types import IntegerType

    table = load_catalog(stack).load_table(d.layout.routes["bet"])
    with table.update_schema() as update:
        update.delete_column("currency")
    with table.update_schema() as update:
        update.add_column("currency", IntegerType())


def test_poison_record_one_alert_restart_then_quarantine_nothing_lost(deployed: Deployed, stack: StackSettings):
    d, topic, since = deployed, deployed.layout.bus_topic.name, time.time()
    send(stack, topic, range(20), currency=None)
    wait_rows(stack, d, 20)
    drift_currency_to_int(stack, d)
    send(stack, topic, range(20, 21), currency=None)
    wait_rows(stack, d, 21)  # a commit after the drift: the sink's next writer sees the new schema
    with ConnectClient(stack.connect.urls[0]) as client:
        poison = sum(int(o["offset"]["kafka_offset"]) for o in client.get_offsets(d.layout.connector_name))
    assert poison == POISON_OFFSET, "the sink's committed offset should be right after the fixture's recharge and the 21 bets"
    send(stack, topic, range(21, 22), currency="BRL")  # the poison: order o21 at offset POISON_OFFSET
    send(stack, topic, range(22, 32), currency=None)

    incident = wait_alert(d, "incident")[0]
    assert "task 0 FAILED" in incident["title"] and "NumberFormatException" in incident["title"], incident
    # the daemon restarts once (backoff 0), the restart fails again on the same record → quarantine
    quarantined = wait_alert(d, "quarantined")[0]
    assert f"{topic}[0]@{POISON_OFFSET}" in quarantined["title"] and "replay_dlq" in quarantined["text"], quarantined
    ids = wait_rows(stack, d, 31)
    assert sorted(ids) == sorted(f"o{i}" for i in range(32) if i != 21), "a record was lost or duplicated"
    wait_alert(d, "recovery")
    # the quarantined record's reason is new in the DLQ: one alert, waited for here so that the next
    # phases count every alert they see
    dlq_alert = wait_alert(d, "dlq")[0]
    assert d.layout.dlq_topic.name in dlq_alert["title"], dlq_alert

    remediations = runs_of(d, "remediate_poison_record")
    assert_restarts(d, since, expected=1)  # the first restart waits no backoff; it fails again → quarantine
    assert [r["status"] for r in remediations] == ["SUCCESS"]
    assert {"key": "lakebus/quarantine", "value": f"{topic}[0]@{POISON_OFFSET}"} in remediations[0]["tags"]
    with ConnectClient(stack.connect.urls[0]) as client:
        assert client.status(d.layout.connector_name).in_states({"RUNNING"})
    kinds = [a["kind"] for a in d.alerts]
    assert kinds.count("incident") == 1 and kinds.count("quarantined") == 1 and kinds.count("recovery") == 1, kinds
    assert kinds.count("dlq") == 1, kinds
    assert "escalation" not in kinds, kinds
    # the daemon runs the offset ledger after the remediation (ledger_after_recovery_sensor), with the
    # shipped 300 s grace: it passes (the poison record in the DLQ, the re-queued records counted), so
    # requeue_after_loss_sensor finds nothing lost and launches no re-queue
    after_job = {"key": "lakebus/after_job", "value": "remediate_poison_record"}
    ledger_runs = wait_for(lambda: [r for r in runs_of(d, "offset_ledger_job") if after_job in r["tags"]
                                    and r["status"] in ("SUCCESS", "FAILURE")] or None,
                           "the offset ledger run launched after the remediation", STEP_S)
    assert [r["status"] for r in ledger_runs] == ["SUCCESS"], ledger_runs
    with dg.DagsterInstance.from_config(str(d.home)) as instance:
        checks = [e.dagster_event.event_specific_data for e in
                  instance.all_logs(ledger_runs[0]["runId"], of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)]
    assert len(checks) == 2 and all(c.passed and c.metadata["lost_count"].value == 0 for c in checks), checks
    assert runs_of(d, "requeue_lost_records") == []
    assert_daemon_clean(d, since)
    assert_alerts_observed(d)
    assert len(order_ids(stack, d)) == 31
    # the quarantined record is in the DLQ, whole, with the sink's error
    dlq = read_range(KafkaResource(bootstrap_servers=stack.kafka.bootstrap_servers).consumer, d.layout.dlq_topic.name, 0, 0, 10, 30)
    quarantined_records = [m for m in dlq if dict(m.headers() or []).get("__connect.errors.offset") == str(POISON_OFFSET).encode()]
    assert len(quarantined_records) == 1 and b'"o21"' in quarantined_records[0].value()


def test_catalog_outage_one_incident_heals_by_itself_nothing_lost(deployed: Deployed, stack: StackSettings):
    d, topic, since = deployed, deployed.layout.bus_topic.name, time.time()
    before = len(d.alerts)
    rows_before = len(order_ids(stack, d))
    d.gate.close()  # the connector's road to the catalog is cut
    try:
        send(stack, topic, range(100, 120), currency=None)  # the table's currency drifted to int above
        new_incident = wait_for(
            lambda: [a for a in d.alerts[before:] if a.get("kind") == "incident"], "an incident alert for the outage", STEP_S
        )
        # the outage outlasts the first restart: the restarted task fails again on the cut road, and the
        # daemon restarts it a second time only after the backoff; the road reopens when that one is launched
        wait_for(lambda: len(restart_runs(d, since)) >= 2, "a second restart run during the outage", STEP_S, interval=1)
    finally:
        d.gate.open()
    ids = wait_rows(stack, d, rows_before + 20)
    assert len(ids) == len(set(ids)) == rows_before + 20, "a record was lost or duplicated"
    wait_for(lambda: [a for a in d.alerts[before:] if a.get("kind") == "recovery"], "the recovery notice", STEP_S)
    phase = [a["kind"] for a in d.alerts[before:]]  # every alert, the DLQ's included
    assert sorted(phase) == ["incident", "recovery"], (phase, new_incident)
    assert_restarts(d, since, expected=OUTAGE_RESTARTS)
    assert_daemon_clean(d, since)  # restart 1 ran into the cut road
    assert_alerts_observed(d)


def test_refused_commits_fail_the_task_one_incident_restarts_heal_once_allowed(deployed: Deployed, stack: StackSettings):
    """The catalog refuses commits (403, as after a change of grants). Iceberg 1.12's coordinator
    terminates on a refused *full* commit, so the task FAILS (1.11 stayed RUNNING and stalled): one
    incident naming the failed task and a restart at once. The restarted sink is refused again — its
    commit either fails the task again (a further restart, after the backoff) or, when the cycle
    timed out into a *partial* commit, is retried while the task stays RUNNING: a stall inside the
    same incident, no restart (seen here on 1.12.0). Commits allowed again → rows land once (the data
    files written meanwhile were never committed, nor were their offsets: the records are read
    again), one recovery."""
    d, topic, since = deployed, deployed.layout.bus_topic.name, time.time()
    wait_for(lambda: len(d.alerts_of("recovery")) == len(d.alerts_of("incident")), "every earlier incident resolved", STEP_S)
    before, rows_before = len(d.alerts), len(order_ids(stack, d))
    d.writes.refuse_commits = True
    try:
        send(stack, topic, range(200, 210), currency=None)
        incident = wait_for(lambda: [a for a in d.alerts[before:] if a.get("kind") == "incident"], "an incident", STEP_S)[0]
        assert "task 0 FAILED" in incident["title"], incident
        wait_for(lambda: restart_runs(d, since), "the restart as the incident opens", STEP_S, interval=1)
        refused_at_restart = d.writes.refused
        # the restarted sink tries again and is refused twice more (whatever the outcome of each)
        wait_for(lambda: d.writes.refused >= refused_at_restart + 2, "the restarted sink refused again", STEP_S)
        assert len(order_ids(stack, d)) == rows_before
        # The records are consumed and answered (the sink's offsets moved past them with its answer, in
        # one transaction) and in no table. The offset ledger, even with no grace, calls them pending:
        # a gap here is what a re-queue would copy, and the copies would land beside the originals
        with ConnectClient(stack.connect.urls[0]) as client:
            committed = committed_offsets(client, d.layout.connector_name, topic)
            run = ledger_complete(Ledger.from_kafka_config(d.layout, stack.kafka.client_config(), load_catalog(stack), client))
        assert sum(committed.values()) >= sum(w.end for w in (v.window for v in run.verdict.partitions.values())), \
            f"the sink's offsets did not pass the refused records: {committed}"
        assert not run.verdict.gaps, f"records in flight (answered, commit refused) judged lost: {run.verdict.gaps}"
        assert sum(len(v.pending) for v in run.verdict.partitions.values()) >= 10, run.verdict.partitions
    finally:
        d.writes.refuse_commits = False
    ids = wait_rows(stack, d, rows_before + 10)
    assert len(ids) == len(set(ids)) == rows_before + 10, f"a record was lost or duplicated: {duplicates_described(stack, d, since)}"
    wait_for(lambda: [a for a in d.alerts[before:] if a.get("kind") == "recovery"], "the incident's recovery notice", STEP_S)
    phase = [a["kind"] for a in d.alerts[before:]]  # every alert, the DLQ's included
    assert sorted(phase) == ["incident", "recovery"], \
        [(a["kind"], a.get("title", "")[:160]) for a in d.alerts[before:]]
    assert not runs_of(d, "remediate_poison_record")[1:], "a refusal must not quarantine anything"
    restarts = len(restart_runs(d, since))
    assert 1 <= restarts <= REFUSED_RESTARTS_MAX, restarts
    assert_restarts(d, since, expected=restarts)  # and each attempt after its backoff
    assert_daemon_clean(d, since)
    assert_alerts_observed(d)
