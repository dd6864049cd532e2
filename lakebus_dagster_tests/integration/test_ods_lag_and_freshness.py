"""The ODS observations' sink metadata with values, and the ODS freshness check failing for a stale
table and passing again, on the real stack.

The test's own bus (``BusLayoutResource(name_suffix=run_id)``, provisioned by ``provision_lakebus``)
gets 3 bets and 2 recharges; ``observe_ods_job`` (the shipped job: the observations and their
freshness checks) then reports lag 0, the bus's end offsets as read from Kafka and the newest
commit as read from the catalog. With the sink stopped, 4 more bets are lag 4 exactly.

Staleness without waiting an hour: the freshness check (``build_last_update_freshness_checks``,
1 h lower bound on the observation's ``dagster/last_updated_timestamp`` = the snapshot's commit
time) judges against Dagster's clock, so the job runs under ``dagster._core.test_utils.freeze_time``
set past the tables' real last commit + 1 h: both tables are stale. After the sink resumes and
commits the 4 bets, the job runs at a time between "an hour after the old commit" and "an hour after
the new one": the bet table passes again, the recharge table (no new commit) still fails.
"""

from __future__ import annotations

from datetime import datetime, timezone

import dagster as dg
import pytest
# private: Dagster 1.13 has no public way to set the clock a freshness check judges by
from dagster._core.test_utils import freeze_time

from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.asset_keys import ods_key
from lakebus_dagster.defs.lakehouse.constants import DEFAULT_ODS_MAX_COMMIT_AGE, OBSERVE_ODS_JOB
from lakebus_dagster.events import Bet, Recharge
from lakebus_dagster.events.registry import default_registry
from lakebus_dagster.kafka import end_offsets
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster_tests.integration.helpers import produce, provisioned_bus, wait_for

pytestmark = pytest.mark.integration

EVENTS = ("bet", "recharge")


def bet(i: int) -> Bet:
    return Bet(category="biz", event="bet", log_date="2025-11-27", hour="10", plat_id=1, app_id=2, ts=1764237600000 + i,
               schema_version=1, user_id=100 + i % 7, order_id=f"o{i}", amount=float(i), currency="BRL", game_id=1)


def recharge(i: int) -> Recharge:
    return Recharge(category="biz", event="recharge", log_date="2025-11-27", hour="10", plat_id=2, app_id=2,
                    ts=1764237600000 + i, schema_version=1, status="success", user_id=200 + i, order_id=f"r{i}",
                    amount=5.0, currency="USD", reason=None)


@pytest.fixture
def bus(stack, run_id):
    with provisioned_bus(stack, run_id) as provisioned:
        yield provisioned


def observe(resources: dict, instance: dg.DagsterInstance) -> tuple[dict[str, dict], dict[str, bool]]:
    """One run of the shipped observe job: (metadata values by event, freshness passed by event)."""
    result = defs.resolve_job_def(OBSERVE_ODS_JOB).execute_in_process(resources=resources, instance=instance)
    assert result.success
    by_key = {ods_key(e): e for e in default_registry.events()}
    observations = {by_key[e.asset_key]: e.asset_observation_data.asset_observation for e in result.get_asset_observation_events()}
    assert set(observations) == set(default_registry.events())
    meta = {event: {k: v.value for k, v in o.metadata.items()} | {"data_version": o.tags["dagster/data_version"]}
            for event, o in observations.items()}
    checks = {by_key[e.asset_key]: e.passed for e in result.get_asset_check_evaluations()}
    assert set(checks) == set(default_registry.events())
    return meta, checks


def commit_ms(catalog, table: str) -> int:
    return catalog.load_table(table).current_snapshot().timestamp_ms


def utc_text(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def test_ods_lag_and_last_commit_with_values_and_freshness_fails_when_stale_then_passes(bus, stack, wait_for_rows):
    assert set(default_registry.events()) == set(EVENTS), "the test produces every event of the registry"
    resources, layout, client = bus
    topic, catalog, name = layout.bus_topic.name, load_catalog(stack), layout.connector_name
    produce(resources, topic, [bet(1), recharge(2), bet(3), recharge(4), bet(5)])
    assert wait_for_rows(catalog, layout.routes["bet"], 3, connector=name) == 3
    assert wait_for_rows(catalog, layout.routes["recharge"], 2, connector=name) == 2

    def bus_end() -> dict[str, int]:
        consumer = resources["kafka"].consumer("lakebus-test-end-offsets")
        try:
            return {str(p): o for p, o in sorted(end_offsets(consumer, topic).items())}
        finally:
            consumer.close()

    def consumed() -> dict[str, int]:
        return {str(o["partition"]["kafka_partition"]): int(o["offset"]["kafka_offset"]) for o in client.get_offsets(name)
                if o["partition"]["kafka_topic"] == topic}

    end = bus_end()
    assert sum(end.values()) == 5
    # the sink commits its consumer offsets with its Iceberg commit: wait until they reach the end
    wait_for(lambda: consumed() == end, f"{name}'s committed offsets at the bus's end {end}", timeout=60)
    commits = {e: commit_ms(catalog, layout.routes[e]) for e in EVENTS}
    snapshots = {e: str(catalog.load_table(layout.routes[e]).current_snapshot().snapshot_id) for e in EVENTS}

    instance = dg.DagsterInstance.ephemeral()
    meta, fresh = observe(resources, instance)
    for event in EVENTS:  # the sink's metadata is the bus's: the same on every ODS table
        m = meta[event]
        assert (m["sink_lag_records"], m["bus_end_offsets"], m["sink_consumed_offsets"]) == (0, end, end), event
        assert m["sink_last_commit"] == utc_text(max(commits.values()))
        assert m["dagster/last_updated_timestamp"] == pytest.approx(commits[event] / 1000, abs=1e-3)  # to the millisecond (approx's default is ±30 min on epoch seconds)
        assert m["data_version"] == snapshots[event]
    assert fresh == {"bet": True, "recharge": True}

    # the sink stops; 4 more bets are exactly 4 records of lag, and no commit moves
    client.stop(name)
    client.wait_for_state(name, {"STOPPED"}, timeout=60, require_tasks=False)
    produce(resources, topic, [bet(6), bet(7), bet(8), bet(9)])
    end_stopped = bus_end()
    assert sum(end_stopped.values()) == 9
    stale_at = max(commits.values()) / 1000 + DEFAULT_ODS_MAX_COMMIT_AGE.total_seconds() + 1.0
    with freeze_time(stale_at):  # an hour and a second after the newest real commit
        meta, fresh = observe(resources, instance)
    for event in EVENTS:
        m = meta[event]
        assert (m["sink_lag_records"], m["bus_end_offsets"], m["sink_consumed_offsets"]) == (4, end_stopped, end), event
        assert m["sink_last_commit"] == utc_text(max(commits.values()))
        assert m["data_version"] == snapshots[event]
    assert fresh == {"bet": False, "recharge": False}

    # the sink resumes and commits the 4 bets: lag 0, and the bet table is fresh again
    client.resume(name)
    assert wait_for_rows(catalog, layout.routes["bet"], 7, connector=name) == 7
    wait_for(lambda: consumed() == end_stopped, f"{name}'s committed offsets at {end_stopped}", timeout=60)
    new_bet = commit_ms(catalog, layout.routes["bet"])
    assert commit_ms(catalog, layout.routes["recharge"]) == commits["recharge"], "no recharge arrived: no new commit"
    old = max(commits.values())
    assert new_bet > old
    # between "an hour after the old commits" and "an hour after the new bet commit"
    with freeze_time((old + new_bet) / 2000 + DEFAULT_ODS_MAX_COMMIT_AGE.total_seconds()):
        meta, fresh = observe(resources, instance)
    for event in EVENTS:
        m = meta[event]
        assert (m["sink_lag_records"], m["bus_end_offsets"], m["sink_consumed_offsets"]) == (0, end_stopped, end_stopped)
        assert m["sink_last_commit"] == utc_text(new_bet)
    assert meta["bet"]["data_version"] != snapshots["bet"] and meta["recharge"]["data_version"] == snapshots["recharge"]
    assert meta["bet"]["dagster/last_updated_timestamp"] == pytest.approx(new_bet / 1000, abs=1e-3)
    assert fresh == {"bet": True, "recharge": False}
