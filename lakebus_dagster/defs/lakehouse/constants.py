"""Names and defaults of the lakehouse domain (ODS sources, DWS assets, schedules, maintenance)."""

from __future__ import annotations

from datetime import timedelta

import dagster as dg

# -- asset keys ---------------------------------------------------------------------------------
ODS_PREFIX = "ods"
DWS_PREFIX = "dws"
ODS_EVENTS = ("bet", "recharge")
ODS_KEYS = {event: dg.AssetKey([ODS_PREFIX, f"dwd_biz_{event}"]) for event in ODS_EVENTS}
DWS_BET_HOUR_KEY = dg.AssetKey([DWS_PREFIX, "dws_biz_bet_hour"])
DWS_RECHARGE_HOUR_KEY = dg.AssetKey([DWS_PREFIX, "dws_biz_recharge_hour"])
DWS_USER_DAY_KEY = dg.AssetKey([DWS_PREFIX, "dws_user_day"])

ODS_GROUP = "ods"
DWS_GROUP = "dws"

# -- partitions ---------------------------------------------------------------------------------
#: first partition of the DWS tables (UTC); the ODS starts with the seed's data in November 2025
PARTITIONS_START = "2025-11-01"

# -- schedules ----------------------------------------------------------------------------------
#: the hourly DWS run starts this many minutes after the hour it aggregates has closed, so events
#: that arrive a little late (client clocks, producer retries, the sink's commit interval) are in
LATE_DATA_LAG_MINUTES = 15
#: the daily user table runs at 01:30 UTC for the day before
DAILY_RUN_HOUR, DAILY_RUN_MINUTE = 1, 30
#: at 02:00 UTC the hour tables of the day before are recomputed in one run (events later than the lag)
LATE_DATA_SWEEP_CRON = "0 2 * * *"
#: maintenance after the sweep, when no DWS write is expected
MAINTENANCE_CRON = "0 4 * * *"
#: the ODS tables' snapshots are observed this often (freshness is judged from the observations)
OBSERVE_ODS_CRON = "*/10 * * * *"

# -- freshness ----------------------------------------------------------------------------------
#: the sink commits every few seconds while events flow: an hour without a commit is worth a warning
ODS_MAX_COMMIT_AGE = timedelta(hours=1)

# -- maintenance defaults -----------------------------------------------------------------------
RETENTION_DAYS = 3
EXPIRE_SNAPSHOTS_OLDER_THAN_HOURS = 24.0
RETAIN_LAST_SNAPSHOTS = 5
ORPHAN_FILES_OLDER_THAN_HOURS = 72.0
MIN_INPUT_FILES = 2

# -- jobs ---------------------------------------------------------------------------------------
DWS_HOURLY_JOB = "dws_hourly_job"
DWS_DAILY_JOB = "dws_daily_job"
OBSERVE_ODS_JOB = "observe_ods_job"
MAINTENANCE_JOB = "lakehouse_maintenance"
