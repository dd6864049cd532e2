"""Names and defaults of the lakehouse domain (ODS sources, DWS assets, schedules, maintenance)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeAlias

from lakebus_dagster.config_file import LoadedConfig
from lakebus_dagster.deployment import instance

# the asset keys (ods_key, dws_key) are in lakebus_dagster.defs.asset_keys, with every other key
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
#: maintenance that deletes no data, on by default: every hour at :40 (after the :15 DWS run) the
#: recent days' small files are merged and old snapshots expired; every day at 04:00 (after the
#: sweep) the whole tables are compacted, manifests rewritten and orphan files removed
MAINTENANCE_HOURLY_CRON = "10,40 * * * *"
MAINTENANCE_CRON = "0 4 * * *"
#: the ODS retention (a DELETE of old days): opt-in, its schedule ships STOPPED
RETENTION_CRON = "30 4 * * *"
#: the ODS tables' snapshots are observed this often (freshness is judged from the observations)
OBSERVE_ODS_CRON = "*/10 * * * *"

# -- freshness ----------------------------------------------------------------------------------
#: the sink commits every few seconds while events flow: an hour without a commit is worth a warning
DEFAULT_ODS_MAX_COMMIT_AGE = timedelta(hours=1)

# -- maintenance defaults -----------------------------------------------------------------------
DEFAULT_RETENTION_DAYS = 3



@dataclass(frozen=True)
class LakehouseLimits:
    """The deployment's own lakehouse values — the ODS freshness limit, the ODS retention and the
    schedules' times — from the config file of the code location's one settings load
    (``Settings.deployment_file``: ``freshness.ods_max_commit_age_minutes``,
    ``maintenance.retention_days``, ``schedules:``); the shipped values where the file says nothing.
    :func:`lakebus_dagster.defs.lakehouse.build_lakehouse` bakes them into the asset, check, job and
    schedule definitions, so they are passed in there, not read at import."""

    ods_max_commit_age: timedelta = DEFAULT_ODS_MAX_COMMIT_AGE
    retention_days: int = DEFAULT_RETENTION_DAYS
    #: schedule name -> cron (names are checked where the schedules are built)
    schedule_crons: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, deployment_file: LoadedConfig | None) -> "LakehouseLimits":
        """The file's values (its keys were checked when it was read), else the shipped ones."""
        if deployment_file is None:
            return cls()
        minutes = deployment_file.freshness.get("ods_max_commit_age_minutes")
        return cls(ods_max_commit_age=DEFAULT_ODS_MAX_COMMIT_AGE if minutes is None else timedelta(minutes=minutes),
                   retention_days=deployment_file.maintenance.get("retention_days", DEFAULT_RETENTION_DAYS),
                   schedule_crons=dict(deployment_file.schedules))

#: snapshot expiry: older than 18 min, and always the newest 100 and the time-travel tags
#: (lake/time_travel.py). Run twice an hour, a table keeps at most 48 min of commits: at the 10 s
#: commit interval ~285 snapshots + 31 tagged, a metadata.json ~0.4 MiB (6 h kept it at ~2.6 MiB). What reads
#: history reads minutes of it (the offset ledger every 10 min, the late-data sensor every 5), and
#: each notices when its mark has expired (a daemon down longer) and falls back
EXPIRE_SNAPSHOTS_OLDER_THAN_HOURS = 0.3
RETAIN_LAST_SNAPSHOTS = 100
#: orphan files: Iceberg's default age; a sink data file is unreferenced until its commit lands,
#: which after an outage can be hours later, so never near Iceberg's 24 h floor
ORPHAN_FILES_OLDER_THAN_HOURS = 72.0
MIN_INPUT_FILES = 2
#: compaction's target file size (Iceberg's default 512 MiB is for far bigger partitions)
TARGET_FILE_SIZE_BYTES = 128 * 1024 * 1024
#: the hourly pass: only files under 8 MiB are candidates (the sink's; earlier outputs stay), in
#: groups of at least 5, over the days the sink still appends to (today and yesterday)
RECENT_MIN_FILE_SIZE_BYTES = 8 * 1024 * 1024
RECENT_MIN_INPUT_FILES = 5
RECENT_DAYS = 2

# -- concurrency --------------------------------------------------------------------------------
#: run tag whose value the run queue allows one run at a time: no two lakehouse writes (MERGEs,
#: compaction, expiry) ever overlap on a table; declared with the run queue that limits it
#: (lakebus_dagster/deployment/instance.py, rendered into deploy/dagster.yaml)
EXCLUSIVE_TAG = instance.EXCLUSIVE_TAG

#: what ``dg.define_asset_job`` returns (resolved to a job by Definitions); its class is not public
#: in Dagster 1.13, and lakebus imports nothing private from Dagster
AssetJob: TypeAlias = Any

# -- jobs ---------------------------------------------------------------------------------------
DWS_HOURLY_JOB = "dws_hourly_job"
DWS_DAILY_JOB = "dws_daily_job"
#: one DWS job per grain; a table's grain decides which job builds it
DWS_JOB_BY_GRAIN = {"hour": DWS_HOURLY_JOB, "day": DWS_DAILY_JOB}
#: retries of a failed DWS run (the instance's run_retries must be enabled; see deploy/dagster.yaml)
DWS_RUN_RETRIES = 2
OBSERVE_ODS_JOB = "observe_ods_job"
MAINTENANCE_JOB = "lakehouse_maintenance"
RETENTION_JOB = "lakehouse_retention"
