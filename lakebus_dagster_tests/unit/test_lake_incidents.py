"""lake_incident_sensor evaluated the way the daemon does (``evaluate_tick`` on a context built from
the definitions, cursors chained tick to tick) over a real Dagster instance holding real runs, check
evaluations and observations: small stand-ins of the DWS assets (the real check specs, partitions
and jobs, a body that fails or yields failing checks on demand) and of an ODS source (the real
freshness check) are executed in-process. No service is involved."""

from __future__ import annotations

import warnings
from datetime import datetime, timedelta, timezone

import dagster as dg
import pytest

from lakebus_dagster.defs.alerts import ALERTS_ASSET_KEY, AlertDeliveryError, AlertResource
from lakebus_dagster.defs.asset_keys import dws_key, ods_key
from lakebus_dagster.defs.clock import ClockResource
from lakebus_dagster.defs.lakehouse import lake_outcomes, sensors
from lakebus_dagster.defs.lakehouse.checks import RECONCILES, dws_check_specs, ods_freshness
from lakebus_dagster.defs.lakehouse.constants import DWS_DAILY_JOB, DWS_HOURLY_JOB, EXCLUSIVE_TAG, OBSERVE_ODS_JOB
from lakebus_dagster.defs.lakehouse.jobs import dws_jobs, observe_ods_job
from lakebus_dagster.defs.lakehouse.partitions import PARTITIONS_BY_GRAIN
from lakebus_dagster_tests.clocks import FixedClock
from lakebus_dagster.defs.lakehouse.schedules import PARTITION_RANGE_END_TAG, PARTITION_RANGE_START_TAG
from lakebus_dagster.lake.dws import DWS_TABLES
from lakebus_dagster.monitor.runbooks import runbook_for

SPECS = [s for s in DWS_TABLES if s.name in ("dws_biz_bet_hour", "dws_biz_recharge_hour", "dws_user_day")]
BET_HOUR, RECHARGE_HOUR, USER_DAY = dws_key("dws_biz_bet_hour"), dws_key("dws_biz_recharge_hour"), dws_key("dws_user_day")
ODS = ods_key("bet")
H9, H10 = "2025-11-25-09:00", "2025-11-25-10:00"

# Dagster copies resources and runs the bodies in-process: the stand-ins' behaviour lives at module level
#: (table, first partition of the run) whose step raises
BROKEN_STEPS: set[tuple[str, str]] = set()
#: (table, first partition of the run) -> checks that fail
FAILING_CHECKS: dict[tuple[str, str], set[str]] = {}
#: the ODS table's last commit as the stand-in observation reports it (None: the table does not exist yet)
LAST_COMMIT: list[datetime | None] = []
SENT: list[dict] = []
FAIL: list[bool] = []
INSTANCE: list[dg.DagsterInstance] = []


@pytest.fixture(autouse=True)
def _reset():
    BROKEN_STEPS.clear(), FAILING_CHECKS.clear(), SENT.clear(), FAIL.clear()
    LAST_COMMIT[:] = [datetime.now(timezone.utc)]
    with dg.instance_for_test() as instance:
        INSTANCE[:] = [instance]
        yield


class RecordingAlerts(AlertResource):
    def send(self, alert, log):
        if FAIL and FAIL.pop(0):
            raise AlertDeliveryError("webhook down")
        SENT.append(alert)


def _stand_in(spec) -> dg.AssetsDefinition:
    """A DWS asset as lakehouse/assets.py declares it (key, partitions, the three checks, single-run
    backfills, subsettable), with a body that fails or yields failing checks when told to."""
    key = dws_key(spec.name)

    @dg.multi_asset(name=spec.name, specs=[dg.AssetSpec(key)], check_specs=dws_check_specs(spec),
                    partitions_def=PARTITIONS_BY_GRAIN[spec.grain], backfill_policy=dg.BackfillPolicy.single_run(),
                    can_subset=True)
    def _build(context):  # (an annotation would be a string here: from __future__ import annotations)
        first = context.partition_key_range.start
        if (spec.name, first) in BROKEN_STEPS:
            raise RuntimeError("Spark Connect at sc://127.0.0.1:15002 is unreachable (Connection refused)\nmore")
        if key in context.selected_asset_keys:
            yield dg.MaterializeResult(asset_key=key)
        failing = FAILING_CHECKS.get((spec.name, first), set())
        for check in context.selected_asset_check_keys:
            yield dg.AssetCheckResult(asset_key=key, check_name=check.name, passed=check.name not in failing,
                                      description=f"1 mismatch(es) in {first}" if check.name in failing else "ok")

    return _build


@dg.observable_source_asset(key=ODS)
def _ods_bet() -> dg.ObserveResult:
    if LAST_COMMIT[0] is None:  # as assets.observe_iceberg_table reports an absent table
        return dg.ObserveResult(data_version=dg.DataVersion("absent"), metadata={"exists": False})
    return dg.ObserveResult(metadata={"dagster/last_updated_timestamp": dg.MetadataValue.timestamp(LAST_COMMIT[0])})


def _definitions() -> dg.Definitions:
    assets = [_stand_in(spec) for spec in SPECS]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        freshness_checks, _ = ods_freshness([ODS])
    sensor = sensors.lake_incident_sensor([DWS_HOURLY_JOB, DWS_DAILY_JOB], [BET_HOUR, RECHARGE_HOUR, USER_DAY], [ODS])
    return dg.Definitions(assets=[*assets, _ods_bet], asset_checks=freshness_checks,
                          jobs=[*dws_jobs(SPECS, assets).values(), observe_ods_job([ODS])],
                          sensors=[sensor], resources={"alerts": RecordingAlerts(), "clock": ClockResource()})


DEFS = _definitions()


def run(job: str, partition: str | None = None, **tags: str) -> dg.ExecuteInProcessResult:
    """One run of a real DWS job (or the observe job) of the definitions, ended before it returns."""
    return DEFS.resolve_job_def(job).execute_in_process(instance=INSTANCE[0], partition_key=partition, tags=tags or None,
                                                         raise_on_error=False)


def automation_run(asset: dg.AssetKey, partition: str) -> dg.ExecuteInProcessResult:
    """What declarative automation launches: Dagster's implicit asset job, selecting the asset, with the run tags."""
    job = DEFS.resolve_implicit_global_asset_job_def()
    assert job.name == lake_outcomes.AUTOMATION_JOB
    return job.execute_in_process(instance=INSTANCE[0], asset_selection=[asset], partition_key=partition,
                                  tags={EXCLUSIVE_TAG: "lakehouse"}, raise_on_error=False)


def tick(cursor: str | None, clock: ClockResource | None = None) -> tuple[dg.SensorResult, str | None]:
    """One daemon-style evaluation; ``clock``: another time than now for the sensor."""
    sensor = DEFS.resolve_sensor_def(sensors.LAKE_INCIDENT_SENSOR)
    resources = {**DEFS.resources, **({"clock": clock} if clock is not None else {})}
    with dg.build_sensor_context(instance=INSTANCE[0], cursor=cursor, definitions=DEFS,
                                 sensor_name=sensors.LAKE_INCIDENT_SENSOR, resources=resources) as ctx:
        result = sensor.evaluate_tick(ctx)
    return result, result.cursor


def kinds() -> list[tuple[str, str]]:
    return [(a["kind"], a["key"]) for a in SENT]


def test_the_sensor_as_shipped():
    sensor = DEFS.resolve_sensor_def(sensors.LAKE_INCIDENT_SENSOR)
    assert sensor.name == "lake_incident_sensor" and sensor.minimum_interval_seconds == 60
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING and sensor.required_resource_keys == {"alerts", "clock"}
    assert lake_outcomes.FRESHNESS_CHECK in {k.name for k in DEFS.resolve_asset_graph().asset_check_keys if k.asset_key == ODS}
    result, _ = tick(None)
    assert SENT == [] and "saw 0 DWS run outcome(s)" in result.skip_message and "open incidents: none" in result.skip_message


def test_failed_dws_run_alerts_once_retries_stay_silent_a_success_recovers():
    BROKEN_STEPS.add(("dws_biz_bet_hour", H9))
    first = run(DWS_HOURLY_JOB, H9)
    assert not first.success
    result, cursor = tick(None)
    key = f"dws:{DWS_HOURLY_JOB}:{H9}"
    assert kinds() == [("incident", key)]
    alert = SENT[0]
    assert alert["title"] == f"DWS run {DWS_HOURLY_JOB} failed for partition {H9} (dws/dws_biz_bet_hour)"
    assert "step dws_biz_bet_hour: RuntimeError: Spark Connect at sc://127.0.0.1:15002 is unreachable" in alert["text"]
    assert f"rerun: lakebus launch {DWS_HOURLY_JOB} --tag dagster/partition={H9}" in alert["text"]
    assert alert["text"].endswith(f"runbook: {runbook_for('incident', key)}") and "dws-run-failed.md" in alert["text"]
    assert [e.asset_key for e in result.asset_events] == [ALERTS_ASSET_KEY]

    result, cursor = tick(cursor)  # nothing new
    assert len(SENT) == 1 and "no change" in result.skip_message and key in result.skip_message
    retry = run(DWS_HOURLY_JOB, H9, **{"dagster/root_run_id": first.run_id, "dagster/parent_run_id": first.run_id})
    assert not retry.success
    result, cursor = tick(cursor)  # the retry failed too: the same incident
    assert len(SENT) == 1 and "saw 1 DWS run outcome(s)" in result.skip_message

    BROKEN_STEPS.clear()
    assert run(DWS_HOURLY_JOB, H9).success
    _, cursor = tick(cursor)
    assert kinds() == [("incident", key), ("recovery", key)]
    assert SENT[1]["title"] == f"resolved: {alert['title']}" and "succeeded for partition" in SENT[1]["text"]
    tick(cursor)
    assert len(SENT) == 2


def test_a_success_of_another_partition_or_table_does_not_recover_it():
    BROKEN_STEPS.add(("dws_biz_bet_hour", H9))
    run(DWS_HOURLY_JOB, H9)
    _, cursor = tick(None)
    run(DWS_HOURLY_JOB, H10)  # another hour
    BROKEN_STEPS.clear()
    assert automation_run(RECHARGE_HOUR, H9).success  # the failed hour, but another table than the one that failed
    _, cursor = tick(cursor)
    assert kinds() == [("incident", f"dws:{DWS_HOURLY_JOB}:{H9}")]
    # an automation run of the failed table for the failed hour recovers it
    assert automation_run(BET_HOUR, H9).success
    _, cursor = tick(cursor)
    assert kinds() == [("incident", f"dws:{DWS_HOURLY_JOB}:{H9}"), ("recovery", f"dws:{DWS_HOURLY_JOB}:{H9}")]


def test_failed_automation_run_is_an_incident_of_its_own_job():
    BROKEN_STEPS.add(("dws_biz_bet_hour", H9))
    assert not automation_run(BET_HOUR, H9).success
    _, cursor = tick(None)
    key = f"dws:{lake_outcomes.AUTOMATION_JOB}:{H9}"
    assert kinds() == [("incident", key)] and "(dws/dws_biz_bet_hour)" in SENT[0]["title"]
    BROKEN_STEPS.clear()
    assert automation_run(BET_HOUR, H9).success
    tick(cursor)
    assert kinds() == [("incident", key), ("recovery", key)]


def test_a_failed_range_recovers_once_each_of_its_partitions_was_rebuilt():
    first, last = "2025-11-25-00:00", "2025-11-25-02:00"
    BROKEN_STEPS.add(("dws_biz_bet_hour", first))
    assert not run(DWS_HOURLY_JOB, **{PARTITION_RANGE_START_TAG: first, PARTITION_RANGE_END_TAG: last}).success
    _, cursor = tick(None)
    key = f"dws:{DWS_HOURLY_JOB}:{first}...{last}"
    assert kinds() == [("incident", key)] and f"partitions {first}...{last}" in SENT[0]["title"]
    BROKEN_STEPS.clear()
    for hour in (first, "2025-11-25-01:00"):
        assert run(DWS_HOURLY_JOB, hour).success
    _, cursor = tick(cursor)
    assert len(SENT) == 1  # 02:00 not rebuilt yet
    assert run(DWS_HOURLY_JOB, last).success
    tick(cursor)
    assert kinds() == [("incident", key), ("recovery", key)]


def test_failed_check_alerts_once_then_a_passing_evaluation_recovers():
    FAILING_CHECKS[("dws_biz_bet_hour", H10)] = {RECONCILES}
    assert run(DWS_HOURLY_JOB, H10).success  # non-blocking: the run succeeds, only the sensor tells
    result, cursor = tick(None)
    key = f"check:dws/dws_biz_bet_hour:{RECONCILES}:{H10}"
    assert kinds() == [("incident", key)]
    alert = SENT[0]
    assert alert["title"] == f"DWS check {RECONCILES} failed on dws/dws_biz_bet_hour for partition {H10}"
    assert "failed (ERROR)" in alert["text"] and f"1 mismatch(es) in {H10}" in alert["text"]
    assert alert["text"].endswith("runbook: docs/runbooks/dws-check-failed.md")
    assert "6 DWS check result(s)" in result.skip_message  # both hour tables checked; the passing ones open nothing
    _, cursor = tick(cursor)
    assert run(DWS_HOURLY_JOB, H10).success  # evaluated again, still failing
    _, cursor = tick(cursor)
    assert len(SENT) == 1
    FAILING_CHECKS.clear()
    assert run(DWS_HOURLY_JOB, H10).success
    _, cursor = tick(cursor)
    assert kinds() == [("incident", key), ("recovery", key)]
    tick(cursor)
    assert len(SENT) == 2


def test_a_range_checked_at_once_is_one_incident_named_by_its_range():
    first, last = "2025-11-25", "2025-11-26"
    FAILING_CHECKS[("dws_user_day", first)] = {RECONCILES}
    assert run(DWS_DAILY_JOB, **{PARTITION_RANGE_START_TAG: first, PARTITION_RANGE_END_TAG: last}).success
    _, cursor = tick(None)
    key = f"check:dws/dws_user_day:{RECONCILES}:{first}...{last}"
    assert kinds() == [("incident", key)]
    FAILING_CHECKS.clear()
    for day in (first, last):
        assert run(DWS_DAILY_JOB, day).success
    tick(cursor)
    assert kinds() == [("incident", key), ("recovery", key)]


def test_stale_ods_table_alerts_once_then_recovers():
    LAST_COMMIT[0] = datetime.now(timezone.utc) - timedelta(hours=3)
    assert run(OBSERVE_ODS_JOB).success
    result, cursor = tick(None)
    key = "fresh:ods/dwd_biz_bet"
    assert kinds() == [("incident", key)]
    assert SENT[0]["title"] == "ODS table ods/dwd_biz_bet is stale: freshness_check failed"
    assert "(WARN)" in SENT[0]["text"] and SENT[0]["text"].endswith("runbook: docs/runbooks/stale-ods.md")
    assert "1 freshness result(s)" in result.skip_message
    assert run(OBSERVE_ODS_JOB).success  # still stale
    _, cursor = tick(cursor)
    assert len(SENT) == 1
    LAST_COMMIT[0] = datetime.now(timezone.utc)
    assert run(OBSERVE_ODS_JOB).success
    _, cursor = tick(cursor)
    assert kinds() == [("incident", key), ("recovery", key)]


def test_an_ods_table_not_created_yet_is_not_stale():
    """The sink creates an ODS table with its first record: before it (a fresh stack, an event nobody
    sends) the freshness check fails, and nothing is stale."""
    LAST_COMMIT[0] = None
    assert run(OBSERVE_ODS_JOB).success
    result, cursor = tick(None)
    assert SENT == [] and "open incidents: none" in result.skip_message
    LAST_COMMIT[0] = datetime.now(timezone.utc) - timedelta(hours=3)  # committed once, long ago: stale
    assert run(OBSERVE_ODS_JOB).success
    tick(cursor)
    assert kinds() == [("incident", "fresh:ods/dwd_biz_bet")]


def test_a_delivery_failure_fails_the_tick_and_the_next_tick_sends_it():
    BROKEN_STEPS.add(("dws_biz_bet_hour", H9))
    run(DWS_HOURLY_JOB, H9)
    FAIL[:] = [True]
    with pytest.raises(AlertDeliveryError, match=r"1 lake alert\(s\) not delivered \(0 sent\): DWS run dws_hourly_job failed"):
        tick(None)  # the daemon records a failed tick and keeps the cursor of the last one that succeeded
    assert SENT == []
    _, cursor = tick(None)
    assert kinds() == [("incident", f"dws:{DWS_HOURLY_JOB}:{H9}")]
    tick(cursor)
    assert len(SENT) == 1


def test_a_failure_older_than_the_lookback_opens_nothing():
    BROKEN_STEPS.add(("dws_biz_bet_hour", H9))
    FAILING_CHECKS[("dws_biz_bet_hour", H10)] = {RECONCILES}
    run(DWS_HOURLY_JOB, H9), run(DWS_HOURLY_JOB, H10)
    later = datetime.now(timezone.utc).timestamp() + lake_outcomes.LOOKBACK_S + 60
    result, _ = tick(None, FixedClock(at=later))
    assert SENT == [] and "open incidents: none" in result.skip_message


def test_partition_ranges():
    assert lake_outcomes.partitions_of_range("2025-11-25-22:00", "2025-11-26-01:00") == {
        "2025-11-25-22:00", "2025-11-25-23:00", "2025-11-26-00:00", "2025-11-26-01:00"}
    assert lake_outcomes.partitions_of_range("2025-11-30", "2025-12-02") == {"2025-11-30", "2025-12-01", "2025-12-02"}
    assert lake_outcomes.run_partitions({"dagster/partition": H9}) == (H9, frozenset({H9}))
    assert lake_outcomes.run_partitions({}) == (lake_outcomes.UNPARTITIONED, frozenset())
