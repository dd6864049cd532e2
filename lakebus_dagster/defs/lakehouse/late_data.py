"""dws_late_data_sensor: DWS hours (and days) rebuilt when records land in them after they were built.

The hourly schedule builds an hour 15 minutes after it closed, and the 02:00 sweep rebuilds the day
before once. A record that lands later than that — a late producer, a record re-queued by
``requeue_lost_records`` (its copy keeps the original event time), a DLQ replay — would otherwise be
missing from the DWS tables for up to a day, or for good when older. Every few minutes this sensor
reads, from Iceberg metadata only (:mod:`lakebus_dagster.lake.late_hours`: the bounds of the files
each sink commit added), which already-closed hours the sink's new commits wrote into, and requests
one ``dws_hourly_job`` run per contiguous range of them and one ``dws_daily_job`` run per closed day.
The runs carry the jobs' lakehouse exclusivity tag (never beside another DWS write) and their
retries; the MERGE makes a rebuild idempotent.

The cursor holds, per ODS table, the commit time and sequence number it has read up to; its first
tick only records where the tables are (a new deployment does not rebuild history). Maintenance
expires snapshots within the hour: when those after the mark expired unread (a daemon down longer),
the files written since the mark's sequence number say which closed hours to rebuild. A table the sink has not created
yet is skipped until it exists.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

import dagster as dg

from lakebus_dagster.defs.lakehouse.constants import (
    AssetJob,
    DAILY_RUN_HOUR,
    DAILY_RUN_MINUTE,
    LATE_DATA_LAG_MINUTES,
)
from lakebus_dagster.defs.lakehouse.partitions import HOUR_KEY_FORMAT
from lakebus_dagster.defs.lakehouse.schedules import PARTITION_RANGE_END_TAG, PARTITION_RANGE_START_TAG
from lakebus_dagster.defs.resources import BusLayoutResource, IcebergCatalogResource
from lakebus_dagster.lake.late_hours import (
    Slot,
    closed_days,
    closed_slots,
    history_gap,
    hour_ranges,
    late_slots,
    sink_appends,
    unseen_slots,
)

LATE_DATA_SENSOR = "dws_late_data_sensor"
LATE_DATA_INTERVAL_S = 300


def _key(slot: Slot) -> str:
    day = datetime.fromisoformat(slot[0])
    return day.replace(hour=slot[1]).strftime(HOUR_KEY_FORMAT)


def _requests(late: set[Slot], now: datetime, hourly: str, daily: str | None, tick: str) -> list[dg.RunRequest]:
    requests = []
    for first, last in hour_ranges(late):
        start, end = _key(first), _key(last)
        requests.append(dg.RunRequest(job_name=hourly, run_key=f"late-{start}-{end}-{tick}",
                                      tags={PARTITION_RANGE_START_TAG: start, PARTITION_RANGE_END_TAG: end,
                                            "lakebus/late_data": "true"}))
    if daily:
        due = timedelta(hours=DAILY_RUN_HOUR, minutes=DAILY_RUN_MINUTE)
        for day in sorted(closed_days(late, now, due)):
            requests.append(dg.RunRequest(job_name=daily, run_key=f"late-{day}-{tick}", partition_key=day,
                                          tags={"lakebus/late_data": "true"}))
    return requests


def read_marks(cursor: str | None) -> dict[str, list[int]]:
    """The cursor: per ODS table [commit time read up to (ms), its sequence number]. A cursor of the
    former shape (the time alone) reads as sequence 0: were its snapshots to expire unread, every
    closed hour of the table would be rebuilt, never one missed."""
    raw = json.loads(cursor) if cursor else {}
    return {table: list(mark) if isinstance(mark, list) else [int(mark), 0] for table, mark in raw.items()}


def late_data_sensor(hourly_job: AssetJob, daily_job: AssetJob | None) -> dg.SensorDefinition:
    """The sensor over the ODS tables of the bus layout, requesting ``hourly_job`` / ``daily_job`` runs."""
    jobs = [hourly_job] + ([daily_job] if daily_job is not None else [])
    daily_name = daily_job.name if daily_job is not None else None

    @dg.sensor(
        name=LATE_DATA_SENSOR,
        jobs=jobs,
        minimum_interval_seconds=LATE_DATA_INTERVAL_S,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Every 5 minutes: the closed DWS hours (and days) that new sink commits wrote records into "
        "(late or re-queued records, DLQ replays), read from Iceberg metadata, rebuilt by one run per range.",
    )
    def dws_late_data_sensor(context: dg.SensorEvaluationContext, layout: BusLayoutResource,
                             iceberg: IcebergCatalogResource):
        marks = read_marks(context.cursor)
        catalog = iceberg.load()
        now = datetime.now(timezone.utc)
        lag = timedelta(minutes=LATE_DATA_LAG_MINUTES)
        late: set[Slot] = set()
        commits = 0
        for table_name in layout.layout().tables:
            if not catalog.table_exists(table_name):
                continue
            table = catalog.load_table(table_name)
            if table_name not in marks:  # first sight: start from here, history is not late data
                current = table.current_snapshot()
                marks[table_name] = [current.timestamp_ms, current.sequence_number or 0] if current else [0, 0]
                continue
            after_ms, after_seq = marks[table_name]
            if history_gap(table, after_ms):
                # the commits since the mark expired unread (the daemon was down longer than the expiry
                # window): every closed hour written since the mark's sequence number is rebuilt
                missed = closed_slots(unseen_slots(table, after_seq or 0), now, lag)
                context.log.warning(f"{table_name}: the snapshots after {after_ms} expired before this sensor read "
                                    f"them; rebuilding the {len(missed)} closed hour(s) written since (sequence {after_seq})")
                late |= missed
            appends = sink_appends(table, after_ms)
            if appends:
                marks[table_name] = [appends[-1].committed_ms, appends[-1].sequence_number]
                commits += len(appends)
                late |= late_slots(appends, lag)
        context.update_cursor(json.dumps(marks, sort_keys=True))
        if not late:
            return dg.SkipReason(f"{commits} new sink commit(s) on {len(marks)} ODS table(s); none into a closed hour")
        tick = str(max(ms for ms, _ in marks.values()))
        requests = _requests(late, now, hourly_job.name, daily_name, tick)
        ranges = ", ".join(f"{r.tags[PARTITION_RANGE_START_TAG]}..{r.tags[PARTITION_RANGE_END_TAG]}"
                           for r in requests if PARTITION_RANGE_START_TAG in r.tags)
        context.log.info(f"{commits} new sink commit(s) wrote into {len(late)} closed hour(s): rebuilding {ranges}"
                         + "".join(f"; day {r.partition_key}" for r in requests if r.partition_key))
        return requests

    return dws_late_data_sensor


def late_data_sensors(dws_jobs: dict[str, AssetJob]) -> Sequence[dg.SensorDefinition]:
    """The sensor when the code location has an hourly DWS job (none otherwise)."""
    from lakebus_dagster.defs.lakehouse.constants import DWS_DAILY_JOB, DWS_HOURLY_JOB

    hourly = dws_jobs.get(DWS_HOURLY_JOB)
    return [late_data_sensor(hourly, dws_jobs.get(DWS_DAILY_JOB))] if hourly is not None else []
