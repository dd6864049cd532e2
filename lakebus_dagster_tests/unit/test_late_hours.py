"""Which closed hours a sink commit wrote into (expected slots written out)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from lakebus_dagster.lake.late_hours import SinkAppend, closed_days, hour_ranges, late_slots, slots_between


def _ms(*args) -> int:
    return int(datetime(*args, tzinfo=timezone.utc).timestamp() * 1000)


def test_a_files_bounds_cover_every_hour_between_them():
    assert slots_between(("2025-11-24", 22), ("2025-11-25", 1)) == {
        ("2025-11-24", 22), ("2025-11-24", 23), ("2025-11-25", 0), ("2025-11-25", 1)}
    assert slots_between(("2025-11-25", 9), ("2025-11-25", 9)) == {("2025-11-25", 9)}
    assert len(slots_between(("2025-01-01", 0), ("2025-12-31", 23), cap=48)) == 48


def test_only_hours_closed_before_the_commit_are_late():
    commit = SinkAppend(1, _ms(2025, 11, 25, 10, 20), frozenset({("2025-11-25", 8), ("2025-11-25", 9), ("2025-11-25", 10)}))
    # 09:00-10:00 was due at 10:15, the commit came at 10:20: late; 10:00 is still open
    assert late_slots([commit], timedelta(minutes=15)) == {("2025-11-25", 8), ("2025-11-25", 9)}
    early = SinkAppend(2, _ms(2025, 11, 25, 10, 10), frozenset({("2025-11-25", 9)}))
    assert late_slots([early], timedelta(minutes=15)) == set()


def test_ranges_and_days():
    slots = {("2025-11-24", 23), ("2025-11-25", 0), ("2025-11-25", 3), ("2025-11-25", 4), ("2025-11-26", 1)}
    assert hour_ranges(slots) == [(("2025-11-24", 23), ("2025-11-25", 0)), (("2025-11-25", 3), ("2025-11-25", 4)),
                                  (("2025-11-26", 1), ("2025-11-26", 1))]
    now = datetime(2025, 11, 26, 2, 0, tzinfo=timezone.utc)
    assert closed_days(slots, now, timedelta(hours=1, minutes=30)) == {"2025-11-24", "2025-11-25"}
