"""Snapshots expire within the hour: the time-travel tags keep the top of every hour and day, and the
readers of history (the late-data sensor, the offset ledger) notice when their mark expired unread.

Real Iceberg metadata, no service: a pyiceberg SQL catalog on SQLite with a file warehouse, appends
carrying the sink's summary keys, and pyiceberg's own snapshot expiry."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest

from lakebus_dagster.defs.lakehouse.late_data import read_marks
from lakebus_dagster.lake.late_hours import closed_slots, history_gap, sink_appends, unseen_slots
from lakebus_dagster.lake.time_travel import (
    DAY_TAG_PREFIX,
    HOUR_TAG_PREFIX,
    SnapshotRef,
    ancestry,
    instants,
    state_at,
    tags_to_create,
)
from lakebus_dagster.ledger.state import SnapshotInfo, rows_removed_since

UTC = timezone.utc


def _ms(*args) -> int:
    return int(datetime(*args, tzinfo=UTC).timestamp() * 1000)


# -- the tags (pure) ---------------------------------------------------------------------------
def test_every_hour_of_the_last_day_and_every_midnight_of_the_last_week_is_an_instant():
    got = instants(datetime(2026, 11, 28, 10, 10, tzinfo=UTC))
    hours = [n for n, _ in got if n.startswith(HOUR_TAG_PREFIX)]
    days = [n for n, _ in got if n.startswith(DAY_TAG_PREFIX)]
    assert len(hours) == 24 and hours[0] == "lakebus-hour-2026-11-28T10" and hours[-1] == "lakebus-hour-2026-11-27T11"
    assert len(days) == 7 and days[0] == "lakebus-day-2026-11-28" and days[-1] == "lakebus-day-2026-11-22"


def test_a_tag_names_the_state_at_its_instant_and_lives_until_its_reach_ends():
    # commits at 09:50, 09:59:50, 10:00:10 (the chain unbroken), now 10:10
    snaps = [SnapshotRef(1, None, _ms(2026, 11, 28, 9, 50)), SnapshotRef(2, 1, _ms(2026, 11, 28, 9, 59, 50)),
             SnapshotRef(3, 2, _ms(2026, 11, 28, 10, 0, 10))]
    tags = {t.name: t for t in tags_to_create(snaps, 3, [], datetime(2026, 11, 28, 10, 10, tzinfo=UTC))}
    assert tags["lakebus-hour-2026-11-28T10"].snapshot_id == 2  # at 10:00 the table was at the 09:59:50 commit
    # the table did not exist at 09:00 nor at midnight: no tag for a state it never had
    assert set(tags) == {"lakebus-hour-2026-11-28T10"}
    # kept 24 h + 1 h from 10:00, counted from the snapshot's commit (10 s before the hour)
    assert tags["lakebus-hour-2026-11-28T10"].retain_minutes == 25 * 60 + 1
    # a second run at 10:40 finds the tag and creates nothing
    assert tags_to_create(snaps, 3, tags, datetime(2026, 11, 28, 10, 40, tzinfo=UTC)) == []


def test_an_instant_whose_state_expired_is_skipped_never_tagged_with_a_wrong_snapshot():
    # a tag kept snapshot 1 (08:00); everything from 08:00 to 10:20 expired; head 10:30 with a missing parent
    snaps = [SnapshotRef(1, None, _ms(2026, 11, 28, 8, 0)), SnapshotRef(9, 8, _ms(2026, 11, 28, 10, 30))]
    chain = ancestry(snaps, 9)
    assert [s.snapshot_id for s in chain] == [9]  # the chain stops at the expired parent
    assert state_at(chain, _ms(2026, 11, 28, 10, 0)) is None  # 1 is older, but the snapshots after it are gone
    assert tags_to_create(snaps, 9, [], datetime(2026, 11, 28, 10, 40, tzinfo=UTC)) == []


def test_a_day_tag_is_kept_a_week():
    snaps = [SnapshotRef(1, None, _ms(2026, 11, 27, 23, 59, 50)), SnapshotRef(2, 1, _ms(2026, 11, 28, 0, 0, 30))]
    tags = {t.name: t for t in tags_to_create(snaps, 2, [], datetime(2026, 11, 28, 0, 10, tzinfo=UTC))}
    assert tags["lakebus-day-2026-11-28"].snapshot_id == 1 and tags["lakebus-hour-2026-11-28T00"].snapshot_id == 1
    assert tags["lakebus-day-2026-11-28"].retain_minutes == (7 * 24 + 1) * 60 + 1


# -- the readers of history --------------------------------------------------------------------
def test_the_ledger_reverifies_when_its_mark_expired_unread():
    kept = {"t": [SnapshotInfo(100, "append", 0), SnapshotInfo(110, "append", 0)]}
    assert rows_removed_since(kept, {"t": 100}) == []  # the mark is still there: nothing hidden
    assert rows_removed_since(kept, {"t": 50}) == ["t: its snapshots since 50 expired before this run read them"]
    assert rows_removed_since(kept, {"t": 0}) == []  # no mark yet (an empty table at the last run)


def test_the_late_data_cursor_of_the_former_shape_reads_as_sequence_zero():
    assert read_marks('{"demo.a": 1700000000000}') == {"demo.a": [1700000000000, 0]}
    assert read_marks('{"demo.a": [1700000000000, 42]}') == {"demo.a": [1700000000000, 42]}
    assert read_marks(None) == {}


@pytest.fixture
def table(tmp_path):
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse")
    catalog.create_namespace("demo")
    schema = pa.schema([pa.field("log_date", pa.string()), pa.field("hour", pa.int32()), pa.field("n", pa.int64())])
    return catalog.create_table("demo.dwd_biz_bet", schema=schema)


def _append(table, log_date: str, hour: int) -> None:
    rows = pa.table({"log_date": [log_date], "hour": pa.array([hour], pa.int32()), "n": [1]},
                    schema=table.schema().as_arrow())
    table.append(rows, snapshot_properties={"kafka.connect.commit-id": "x"})  # the sink's summary key


def test_commits_whose_snapshots_expired_unread_are_still_found_by_their_files(table):
    _append(table, "2026-11-27", 5)
    mark = table.current_snapshot()
    time.sleep(0.01)
    _append(table, "2026-11-26", 3)  # a late record, committed after the mark
    _append(table, "2026-11-28", 9)
    last = table.refresh().current_snapshot()
    assert not history_gap(table, mark.timestamp_ms)  # read in time: the snapshots say it all
    assert {s for a in sink_appends(table, mark.timestamp_ms) for s in a.slots} == {("2026-11-26", 3), ("2026-11-28", 9)}

    table.maintenance.expire_snapshots().older_than(datetime.fromtimestamp(last.timestamp_ms / 1000, UTC)).commit()  # what maintenance does while the reader is down
    table = table.refresh()
    assert [s.snapshot_id for s in table.snapshots()] == [last.snapshot_id]
    assert history_gap(table, mark.timestamp_ms)
    # the snapshots alone now show only the newest commit: the late record's would be missed
    assert {s for a in sink_appends(table, mark.timestamp_ms) for s in a.slots} == {("2026-11-28", 9)}
    missed = unseen_slots(table, mark.sequence_number)
    assert missed == {("2026-11-26", 3), ("2026-11-28", 9)}  # the mark's own file is not among them
    now = datetime(2026, 11, 28, 9, 30, tzinfo=UTC)  # 09:00 is not closed yet
    assert closed_slots(missed, now, timedelta(minutes=15)) == {("2026-11-26", 3)}


def test_the_tables_expiry_default_is_the_maintenance_window():
    from lakebus_dagster.bus.table_properties import MAX_SNAPSHOT_AGE_MS, METADATA_BOUNDS
    from lakebus_dagster.defs.lakehouse.constants import EXPIRE_SNAPSHOTS_OLDER_THAN_HOURS

    assert int(METADATA_BOUNDS[MAX_SNAPSHOT_AGE_MS]) == round(EXPIRE_SNAPSHOTS_OLDER_THAN_HOURS * 3600 * 1000)
