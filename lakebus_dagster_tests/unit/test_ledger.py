"""The offset ledger's pure rules: places, gaps, duplicates, tombstones, replays, re-queues,
range compression and the incremental state (no broker, no catalog)."""

from __future__ import annotations

from lakebus_dagster.ledger.model import BusRecord, DlqRecord, OdsRow, Position
from lakebus_dagster.ledger.ranges import compress, describe
from lakebus_dagster.ledger.state import LedgerState, SnapshotInfo, advance, rows_removed_since
from lakebus_dagster.ledger.verify import Window, verify

T = "events"
NOW = 1_000_000_000
OLD = NOW - 3_600_000


def rec(o: int, *, p: int = 0, tomb: bool = False, ts: int = OLD, replay: str | None = None, requeue: str | None = None) -> BusRecord:
    return BusRecord(p, o, ts, tomb, Position.parse(replay) if replay else None, Position.parse(requeue) if requeue else None)


def ods(*offsets: int, table: str = "demo.dwd_biz_bet", p: int = 0) -> list[OdsRow]:
    return [OdsRow(table, p, o) for o in offsets]


def dlq(dlq_offset: int, original: int, p: int = 0) -> DlqRecord:
    return DlqRecord(Position("dlq-events", 0, dlq_offset), Position(T, p, original))


def judge(records, rows, letters=(), *, start=0, committed=None, end=None, grace_ms=0, claims=None):
    end = end if end is not None else max(r.offset for r in records) + 1
    window = Window(0, start, end if committed is None else committed, end)
    return verify(T, [window], records, rows, letters, now_ms=NOW, grace_ms=grace_ms, known_claims=claims)


def test_ranges_compress_and_describe():
    assert compress([9, 3, 4, 5, 5, 12, 11]) == [(3, 5), (9, 9), (11, 12)]
    assert describe([3, 4, 5, 9]) == "3-5, 9"
    assert describe(range(0, 100, 2), max_ranges=3) == "0, 2, 4, … +47 more range(s)"
    assert compress([]) == [] and describe([]) == ""


def test_every_offset_in_one_place_passes_and_counts_places():
    records = [rec(0), rec(1), rec(2, tomb=True), rec(3)]
    v = judge(records, ods(0) + ods(1, table="demo.dwd_biz_recharge"), [dlq(0, 3)])
    assert v.passed and v.complete
    assert dict(v.partitions[0].by_place) == {"ods": 2, "tombstone": 1, "dlq": 1}
    assert v.partitions[0].verified_to == 4


def test_gap_is_named_and_stops_the_verified_point():
    v = judge([rec(o) for o in range(6)], ods(0, 1, 4, 5))
    assert not v.passed and v.gaps == {0: [2, 3]}
    assert v.partitions[0].verified_to == 2
    assert v.problem_summary() == "events[0]: lost 2-3"


def test_duplicate_rows_and_row_plus_dlq_are_duplicates():
    v = judge([rec(0), rec(1)], ods(0) + ods(0, table="demo.dwd_biz_recharge") + ods(1), [dlq(0, 1)])
    assert not v.passed
    assert [(d.offset, len(d.places)) for d in v.duplicates] == [(0, 2), (1, 2)]
    assert "duplicated 0-1" in v.problem_summary()


def test_unaccounted_past_the_committed_offset_or_within_grace_is_pending_not_lost():
    records = [rec(0), rec(1), rec(2, ts=NOW - 1_000)]
    v = judge(records, ods(0), committed=2, end=3, grace_ms=60_000)
    # 1 is below the committed offset and old: lost; 2 is not committed yet: pending
    assert v.gaps == {0: [1]} and v.partitions[0].pending == [2]
    fresh = judge([rec(0), rec(1, ts=NOW - 1_000)], ods(0), grace_ms=60_000)
    assert fresh.passed and not fresh.complete and fresh.partitions[0].pending == [1]


def test_offsets_the_broker_never_delivers_are_not_records():
    v = judge([rec(0), rec(2)], ods(0, 2), end=3)  # 1: a transaction marker
    assert v.complete and v.partitions[0].not_records == 1


def test_tombstone_sent_to_the_dlq_is_counted_once():
    v = judge([rec(0, tomb=True)], [], [dlq(0, 0)])
    assert v.complete and dict(v.partitions[0].by_place) == {"dlq": 1}


def test_replay_original_stays_in_the_dlq_and_copy_lands_on_its_own():
    # 1 failed conversion -> dlq@0; replayed as bus offset 3 which landed as a row
    records = [rec(0), rec(1), rec(2), rec(3, replay="dlq-events:0:0")]
    v = judge(records, ods(0, 2, 3), [dlq(0, 1)])
    assert v.complete, v.problem_summary()
    assert dict(v.partitions[0].by_place) == {"ods": 3, "dlq": 1}
    assert v.claims == {"dlq-events:0:0": "events:0:3"}


def test_replaying_the_same_dlq_record_twice_is_a_duplicate_copy():
    records = [rec(0), rec(1, replay="dlq-events:0:0"), rec(2, replay="dlq-events:0:0")]
    v = judge(records, ods(1, 2), [dlq(0, 0)])
    assert not v.passed and [d.offset for d in v.duplicates] == [2]
    assert "copy of dlq-events:0:0" in v.duplicates[0].places


def test_second_copy_is_caught_against_claims_of_earlier_runs():
    v = judge([rec(5, replay="dlq-events:0:0")], ods(5), start=5, claims={"dlq-events:0:0": "events:0:1"})
    assert [d.offset for d in v.duplicates] == [5]


def test_requeued_originals_are_accounted_by_their_copies():
    # remediation: committed=1, poison at 3 -> DLQ; 1 and 2 re-queued as 5 and 6; 4 consumed after
    records = [rec(0), rec(1), rec(2), rec(3), rec(4), rec(5, requeue="events:0:1"), rec(6, requeue="events:0:2")]
    v = judge(records, ods(0, 4, 5, 6), [dlq(0, 3)])
    assert v.complete, v.problem_summary()
    assert dict(v.partitions[0].by_place) == {"ods": 4, "dlq": 1, "requeued": 2}


def test_requeued_original_that_also_landed_is_a_duplicate():
    v = judge([rec(0), rec(1, requeue="events:0:0")], ods(0, 1))
    assert [(d.offset, d.places) for d in v.duplicates] == [(0, ("ods:demo.dwd_biz_bet", "requeued:events:0:1"))]


def test_requeue_claim_from_an_earlier_run_still_accounts_for_its_original():
    v = judge([rec(3)], ods(), start=3, claims={"events:0:3": "events:0:9"})
    assert v.complete


def test_incremental_state_advances_carries_unverified_dlq_records_and_round_trips():
    state = LedgerState(topic=T, verified_to={0: 0}, baseline={0: 0})
    v = judge([rec(0), rec(1), rec(2), rec(3)], ods(0), [dlq(0, 1), dlq(1, 3)])
    nxt = advance(state, v, [dlq(0, 1), dlq(1, 3)], {0: 2}, {"demo.dwd_biz_bet": 7})
    assert nxt.verified_to == {0: 2} and nxt.dlq_next == {0: 2}
    assert nxt.dlq_carried == [dlq(1, 3)]  # its original (3) is beyond the verified point
    assert LedgerState.from_json(nxt.to_json()) == nxt
    # the next run judges only [2, 5): the row for 2 arrived late, 4 is new
    later = judge([rec(2), rec(3), rec(4)], ods(2, 4), nxt.dlq_carried, start=2)
    assert later.complete and later.partitions[0].verified_to == 5


def test_rows_removed_after_the_mark_force_a_full_reverification():
    snaps = {"t": [SnapshotInfo(5, "append", 0), SnapshotInfo(9, "replace", 10), SnapshotInfo(12, "delete", 1)]}
    assert rows_removed_since(snaps, {"t": 9}) == ["t: delete removed 1 row(s) at 12"]
    assert rows_removed_since(snaps, {"t": 12}) == []
    assert rows_removed_since(snaps, {}) == []


def test_position_parsing_names_bad_text():
    assert Position.parse("dlq-events.v2:3:17") == Position("dlq-events.v2", 3, 17)
    try:
        Position.parse("events:x")
    except ValueError as exc:
        assert "events:x" in str(exc)
    else:
        raise AssertionError("accepted a malformed position")


def test_ever_verified_never_drops_on_reverification_and_reads_old_states():
    state = LedgerState(topic=T, verified_to={0: 0}, baseline={0: 0})
    v = judge([rec(o) for o in range(6)], ods(*range(6)))
    nxt = advance(state, v, [], {}, {})
    assert nxt.verified_to == {0: 6} and nxt.ever_verified == {0: 6}
    # a delete forces a re-verification from the baseline: the verified point falls back to the
    # first gap, the highest point ever verified stays
    rebuilt = LedgerState(topic=T, verified_to={0: 0}, baseline={0: 0}, ever_verified=dict(nxt.ever_verified))
    again = advance(rebuilt, judge([rec(o) for o in range(6)], ods(0, 1, 2, 4, 5)), [], {}, {})
    assert again.verified_to == {0: 3} and again.ever_verified == {0: 6}
    assert LedgerState.from_json(again.to_json()) == again
    # a state stored before the field existed: its verified point is the lower bound
    old = b'{"topic": "events", "verified_to": {"0": 4}, "baseline": {"0": 0}}'
    assert LedgerState.from_json(old).ever_verified == {0: 4}


def test_requeue_plan_copies_what_never_landed_and_leaves_what_was_removed():
    from lakebus_dagster.ledger.requeue import plan_requeue

    gaps = {0: [3, 12, 13], 1: [2]}
    plan = plan_requeue(T, gaps, {0: 10, 1: 0})
    assert plan.requeue == {0: [12, 13], 1: [2]} and plan.removed == {0: [3]}
    assert (plan.requeue_count, plan.removed_count) == (3, 1)
    assert plan.describe(plan.requeue) == "events[0]: 12-13; events[1]: 2" and plan.describe({}) == "-"
    forced = plan_requeue(T, gaps, {0: 10, 1: 0}, include_removed=True)
    assert forced.requeue == {0: [3, 12, 13], 1: [2]} and forced.removed == {}
    assert plan_requeue(T, {}, {0: 10}).requeue_count == 0


def test_requeued_copies_carry_the_header_naming_their_original():
    from lakebus_dagster.ledger.model import REQUEUE_HEADER
    from lakebus_dagster.ledger.requeue import requeue_items

    class Msg:
        def topic(self): return "events"
        def partition(self): return 1
        def offset(self): return 42
        def key(self): return b"k"
        def value(self): return b"v"
        def headers(self): return [("h", b"x")]

    assert requeue_items([Msg()]) == [("events", b"k", b"v", [("h", b"x"), (REQUEUE_HEADER, b"events:1:42")])]
    # the ledger reads that header back as the copy's origin: the original is accounted as re-queued
    v = judge([rec(42, p=0), rec(50, requeue="events:0:42")], ods(50), start=42)
    assert v.partitions[0].by_place["requeued"] == 1 and not v.gaps


def test_retired_ranges_merge_and_answer_membership():
    from lakebus_dagster.ledger.retired import RetiredOffsets, merge_ranges

    assert merge_ranges([(5, 7), (1, 2), (3, 3), (9, 9), (6, 8)]) == [(1, 3), (5, 9)]
    retired = RetiredOffsets().merged({0: [(0, 4)], 1: [(10, 10)]}, "run a").merged({0: [(5, 9), (20, 21)]}, "run b")
    assert retired.ranges == {0: [(0, 9), (20, 21)], 1: [(10, 10)]} and retired.notes == ("run a", "run b")
    assert [o for o in range(25) if retired.contains(0, o)] == [*range(10), 20, 21]
    assert retired.contains(1, 10) and not retired.contains(1, 9) and not retired.contains(2, 0)
    assert retired.count() == 13
    assert RetiredOffsets.from_json(retired.to_json()) == retired


def test_rows_deleted_by_the_retention_are_retired_not_lost_and_a_row_still_there_wins():
    from lakebus_dagster.ledger.retired import RetiredOffsets

    retired = RetiredOffsets({0: [(0, 2)]})
    records = [rec(o) for o in range(5)]
    # 0-2 deleted by the retention, 3 lost for real, 4 in the ODS
    v = verify(T, [Window(0, 0, 5, 5)], records, ods(4), [], now_ms=NOW, grace_ms=0, retired=retired)
    assert v.partitions[0].gaps == [3] and v.partitions[0].by_place["retired"] == 3
    # a delete that failed after the ranges were written: the rows are simply in the ODS, once
    v = verify(T, [Window(0, 0, 5, 5)], records, ods(0, 1, 2, 3, 4), [], now_ms=NOW, grace_ms=0, retired=retired)
    assert v.complete and dict(v.partitions[0].by_place) == {"ods": 5}


def test_expired_provenance_is_one_islands_query_over_every_ods_table():
    from datetime import date

    from lakebus_dagster.lake.maintenance import expired_provenance_sql

    sql = expired_provenance_sql(["demo.dwd_biz_bet", "demo.dwd_biz_recharge"], "events", date(2025, 11, 25))
    assert sql.count("UNION ALL") == 1 and sql.count("log_date < '2025-11-25'") == 2
    assert "_kafka_topic = 'events'" in sql and "row_number() OVER (PARTITION BY p ORDER BY o)" in sql
