"""The gap fill runs at its minute: the shipped automation conditions of the DWS assets, evaluated by
Dagster's own ``evaluate_automation_conditions`` against an instance where no DWS partition was ever
built, request nothing before :45 and the hourly tables' whole lookback at :45; the daily table waits
for 02:45 UTC. A recovery that crosses the top of the hour is rebuilt at that hour's :45, not sooner.
(The rows such a run builds: ``integration/test_dws_gap_fill.py``.)"""

from __future__ import annotations

from datetime import datetime, timezone

import dagster as dg

from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.lakehouse import build_lakehouse
from lakebus_dagster.defs.lakehouse.automation import GAP_CRON_BY_GRAIN, GAP_LOOKBACK

LAKEHOUSE = build_lakehouse()
SELECTION = dg.AssetSelection.assets(*LAKEHOUSE.dws_assets.values())
BET_HOUR, USER_DAY = dg.AssetKey(["dws", "dws_biz_bet_hour"]), dg.AssetKey(["dws", "dws_user_day"])


def at(day: int, hour: int, minute: int) -> datetime:
    return datetime(2025, 11, day, hour, minute, tzinfo=timezone.utc)


def test_the_hourly_gap_fill_waits_for_minute_45_and_the_daily_one_for_0245():
    assert GAP_CRON_BY_GRAIN == {"hour": "45 * * * *", "day": "45 2 * * *"}
    requested = {}
    with dg.instance_for_test() as instance:
        cursor = None
        for when in (at(21, 10, 30), at(21, 10, 44), at(21, 10, 45), at(21, 10, 59), at(21, 11, 44), at(22, 2, 44),
                     at(22, 2, 46)):
            result = dg.evaluate_automation_conditions(defs, instance, asset_selection=SELECTION, evaluation_time=when,
                                                       cursor=cursor)
            cursor = result.cursor
            requested[when] = (len(result.get_requested_partitions(BET_HOUR)), len(result.get_requested_partitions(USER_DAY)))
    hours = int(GAP_LOOKBACK.total_seconds() // 3600)
    assert requested[at(21, 10, 30)] == (0, 0), "the first evaluation marks the condition handled"
    assert requested[at(21, 10, 44)] == (0, 0), "nothing before :45"
    assert requested[at(21, 10, 45)] == (hours, 0), "every missing hour of the lookback at :45"
    assert requested[at(21, 10, 59)] == (0, 0), "once per tick: a requested hour is not requested again before the next"
    assert requested[at(21, 11, 44)] == (0, 0), "the next hour's gap fill waits for 11:45"
    assert requested[at(22, 2, 44)][1] == 0 and requested[at(22, 2, 46)][1] > 0, "the daily table at 02:45"
