"""Which commit the stall watch reads: the newest *sink* commit and the watermark it carries.

Seen at stop 8: with a recharge table beside the bet table, the stall test's recovery never came.
The sink's first commit after refused ones carried no ``valid-through-ts`` (a partial cycle), the
older recharge table's watermark stood in for it, and every bet that partial commit wrote counted
as owed for ever on a quiet bus. A compaction by lakebus's own maintenance (no sink keys) must not
count as the sink paying its debt either."""

from __future__ import annotations

from types import SimpleNamespace

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.observe.sink_progress import newest_commit, sink_snapshot

MARK = "kafka.connect.valid-through-ts"
OFFSETS = "kafka.connect.offsets.control-iceberg.cg-control-events-iceberg-sink"


def _snap(sid: int, ts: int, parent: int | None, **summary: str):
    return SimpleNamespace(snapshot_id=sid, timestamp_ms=ts, parent_snapshot_id=parent,
                           summary=SimpleNamespace(additional_properties=dict(summary)))


class _Table:
    def __init__(self, *snapshots):
        self.by_id = {s.snapshot_id: s for s in snapshots}
        self.current = snapshots[-1]

    def current_snapshot(self):
        return self.current

    def snapshot_by_id(self, sid):
        return self.by_id.get(sid)


class _Catalog:
    def __init__(self, tables):
        self.tables = tables

    def table_exists(self, name):
        return name in self.tables

    def load_table(self, name):
        return self.tables[name]


def _iceberg(tables):
    return SimpleNamespace(load=lambda: _Catalog(tables), catalog_uri="http://catalog")


BUS = BusLayout.default()
BET, RECHARGE = BUS.routes["bet"], BUS.routes["recharge"]


def test_a_partial_commit_after_an_older_watermark_leaves_the_watermark_unknown():
    tables = {
        RECHARGE: _Table(_snap(1, 1_000, None, **{MARK: "1970-01-01T00:00:00.900Z", OFFSETS: "{}"})),
        BET: _Table(_snap(2, 1_500, None, **{MARK: "1970-01-01T00:00:01.400Z", OFFSETS: "{}"}),
                    _snap(3, 5_000, 2, **{OFFSETS: "{}"})),  # partial cycle: no watermark
    }
    assert newest_commit(BUS, _iceberg(tables)) == (5_000, None, "")


def test_the_newest_full_commit_gives_its_watermark():
    tables = {
        RECHARGE: _Table(_snap(1, 6_000, None, **{MARK: "1970-01-01T00:00:05.900Z", OFFSETS: "{}"})),
        BET: _Table(_snap(2, 5_000, None, **{OFFSETS: "{}"})),
    }
    assert newest_commit(BUS, _iceberg(tables)) == (6_000, 5_900, "")


def test_a_compaction_is_not_a_sink_commit():
    bet = _Table(_snap(2, 1_500, None, **{MARK: "1970-01-01T00:00:01.400Z", OFFSETS: "{}"}),
                 _snap(3, 9_000, 2, **{"added-data-files": "1", "deleted-data-files": "30"}))
    assert sink_snapshot(bet).snapshot_id == 2
    assert newest_commit(BUS, _iceberg({BET: bet})) == (1_500, 1_400, "")
    assert sink_snapshot(_Table(_snap(9, 1, None))) is None
