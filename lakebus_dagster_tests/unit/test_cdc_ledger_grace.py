"""The offset ledger over change capture calls no record of the current commit cycle lost.

The change-table sink commits a record's Kafka offset a commit cycle before the Iceberg commit
makes its row visible; every change-ledger run judges with at least two of the sink's commit cycles
of grace (:func:`in_flight_grace_s`), as the events ledger's runs after a stall do. Judged with the
ledger's own rule (:func:`verify`) and through the ``cdc_offset_ledger`` job with its reads stubbed."""

from __future__ import annotations

import time

import pytest

from lakebus_dagster.cdc.capture import capture_from_mapping
from lakebus_dagster.cdc.ledger import in_flight_grace_s
from lakebus_dagster.defs.alerts import AlertResource
from lakebus_dagster.defs.cdc.ledger import cdc_offset_ledger
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.resources import ConnectResource, IcebergCatalogResource, KafkaResource
from lakebus_dagster.ledger.model import BusRecord, OdsRow
from lakebus_dagster.ledger.run import LedgerRun
from lakebus_dagster.ledger.state import LedgerState, advance
from lakebus_dagster.ledger.verify import Window, verify

NOW_MS = 1_800_000_000_000
TOPIC = "shop.app.orders"


def _spec(**over):
    return capture_from_mapping({"name": "shop", "host": "db", "port": 5432, "database": "shop", "user": "u",
                                 "schema": "app", "tables": ["orders"], "heartbeat_table": "heartbeat",
                                 "namespace": "demo_cdc", **over})


def _judge(grace_s: float, ages_s: dict[int, float], landed: set[int]):
    """One partition whose sink committed past every record; ``ages_s``: offset -> record age."""
    records = [BusRecord(0, o, NOW_MS - int(age * 1000), False) for o, age in ages_s.items()]
    rows = [OdsRow("demo_cdc.pg_app_orders", 0, o) for o in landed]
    end = max(ages_s) + 1
    return verify(TOPIC, [Window(0, 0, end, end)], records, rows, [], now_ms=NOW_MS, grace_ms=int(grace_s * 1000))


def test_the_grace_is_never_below_two_of_the_sink_s_commit_cycles():
    spec = _spec()  # commit interval 10 s, commit timeout 30 s
    assert in_flight_grace_s(spec, 0.0) == 80.0
    assert in_flight_grace_s(spec, 300.0) == 300.0  # the scheduled run's grace stands
    assert in_flight_grace_s(_spec(commit_interval_ms=300_000), 300.0) == 660.0
    assert spec.sink_config(_Lake())["iceberg.control.commit.timeout-ms"] == str(spec.commit_timeout_ms)


def test_records_newer_than_the_grace_are_pending_an_older_absent_one_is_lost_as_before():
    grace = in_flight_grace_s(_spec(), 0.0)
    ages = {0: 500.0, 1: 200.0, 2: 60.0, 3: 5.0}  # 0 landed; 1 is older than the grace; 2, 3 in flight
    verdict = _judge(grace, ages, landed={0})
    part = verdict.partitions[0]
    assert (part.gaps, part.pending, part.verified_to) == ([1], [2, 3], 1)
    assert verdict.problem_summary() == f"{TOPIC}[0]: lost 1"
    # what the same run judged with the bare grace of 0 before: the commit cycle's records were "lost"
    assert _judge(0.0, ages, landed={0}).partitions[0].gaps == [1, 2, 3]


class _Lake:
    catalog_uri, warehouse, s3_endpoint, region, path_style = "http://c", "s3://w/", "http://s3", "r", True


class _Catalog(IcebergCatalogResource):
    def load(self):
        return None


class _Alerts(AlertResource):
    def send(self, alert, log):
        SENT.append(alert)


SENT: list[dict] = []


class _FakeLedger:
    """A change topic's ledger whose reads are fixed: records aged ``AGES`` seconds, offset 0 landed."""

    AGES = {0: 500.0, 1: 60.0, 2: 5.0}

    def __init__(self):
        self.grace_s: list[float] = []

    def run(self, *, grace_s, persist, full):
        self.grace_s.append(grace_s)
        now = int(time.time() * 1000)
        records = [BusRecord(0, o, now - int(age * 1000), False) for o, age in self.AGES.items()]
        windows = [Window(0, 0, 3, 3)]
        verdict = verify(TOPIC, windows, records, [OdsRow("t", 0, 0)], [], now_ms=now, grace_ms=int(grace_s * 1000))
        state = advance(LedgerState(TOPIC, {0: 0}, {0: 0}), verdict, [], {}, {})
        return LedgerRun(verdict, state, None, 1, 0, 0, len(records))

    def mark_alerted(self, summary, persist=True):
        pass


@pytest.fixture
def ledgers(monkeypatch):
    import lakebus_dagster.cdc.ledger as cdc_ledger

    made: list[_FakeLedger] = []

    def change_ledgers(spec, kafka_config, catalog, connect):
        made.append(_FakeLedger())
        return {"orders": made[-1]}

    monkeypatch.setattr(cdc_ledger, "change_ledgers", change_ledgers)
    SENT.clear()
    return made


def test_a_cdc_ledger_run_with_grace_zero_passes_with_the_commit_cycle_pending_and_sends_no_alert(ledgers):
    resources = {"capture": ChangeCaptureResource(enabled=True, tables=["orders"]),
                 "kafka": KafkaResource(bootstrap_servers="127.0.0.1:1"), "iceberg": _Catalog(
                     catalog_uri="http://c", warehouse="s3://w/", s3_endpoint="http://s3", region="r",
                     access_key_id="a", secret_access_key="s"),
                 "connect": ConnectResource(url="http://127.0.0.1:1"), "alerts": _Alerts()}
    result = cdc_offset_ledger.execute_in_process(resources=resources, run_config={"ops": {"cdc_offset_ledger_op": {
        "config": {"grace_s": 0.0, "persist": False}}}}, raise_on_error=False)
    assert result.success and SENT == []
    assert ledgers[0].grace_s == [80.0]
    (output,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    topics = output.event_specific_data.metadata["topics"].value
    assert topics[TOPIC]["pending"] == 2 and topics[TOPIC]["passed"]
    assert output.event_specific_data.metadata["grace_s"].value == 80.0
    _FakeLedger.AGES = {0: 500.0, 1: 200.0, 2: 5.0}  # offset 1 older than the grace and absent: lost
    try:
        failed = cdc_offset_ledger.execute_in_process(resources=resources, run_config={"ops": {"cdc_offset_ledger_op": {
            "config": {"grace_s": 0.0, "persist": False}}}}, raise_on_error=False)
    finally:
        _FakeLedger.AGES = {0: 500.0, 1: 60.0, 2: 5.0}
    assert not failed.success
    assert [a["title"] for a in SENT] == [f"offset ledger of {TOPIC}: 1 record(s) lost, 0 duplicated"]

