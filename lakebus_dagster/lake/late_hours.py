"""Which closed hours a sink commit wrote into, read from Iceberg metadata alone (no data file).

A record that arrives after its hour was aggregated — a producer's retry, a client clock, a record
the offset ledger re-queued with its original event time, a replay from the DLQ — lands in a later
sink commit. The hourly DWS run has already built that hour, so the DWS table misses it until the
hour is rebuilt. The commit itself says which hours it touched: each data file it added carries the
lower and upper bounds of its ``log_date`` and ``hour`` columns in the manifest. :func:`late_slots`
turns the sink's appends since a point in time into the (log_date, hour) slots that were already
closed when they were committed; rebuilding those is idempotent (the DWS MERGE replaces a scope).

A file's bounds are a range: a file holding 09:00 and 11:00 records names 10:00 too, which is then
rebuilt for nothing (harmless). Commits by anyone but the sink (compaction, a retention DELETE) are
not new records and are skipped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

#: an hour counts as closed once its hourly DWS run was due: the hour's end + the schedule's lag
DEFAULT_LAG = timedelta(minutes=15)
#: the sink's own snapshot summary keys (its control-topic offsets, its watermark)
SINK_SUMMARY_PREFIX = "kafka.connect."

Slot = tuple[str, int]  # (log_date 'YYYY-MM-DD', hour 0-23)


@dataclass(frozen=True)
class SinkAppend:
    """One sink commit: when, and the slots its added files may hold."""

    snapshot_id: int
    committed_ms: int
    slots: frozenset[Slot]
    #: the commit's sequence number (a reader's mark that survives the snapshot's expiry)
    sequence_number: int = 0


def _hour_start(slot: Slot) -> datetime:
    day = datetime.fromisoformat(slot[0])
    return datetime(day.year, day.month, day.day, slot[1], tzinfo=timezone.utc)


def slots_between(lower: Slot, upper: Slot, cap: int = 24 * 31) -> frozenset[Slot]:
    """Every hour from ``lower`` to ``upper`` inclusive (at most ``cap`` of them, the newest)."""
    start, end = _hour_start(lower), _hour_start(upper)
    if end < start:
        start, end = end, start
    hours = min(int((end - start) / timedelta(hours=1)) + 1, cap)
    first = end - timedelta(hours=hours - 1)
    return frozenset(((first + timedelta(hours=i)).date().isoformat(), (first + timedelta(hours=i)).hour) for i in range(hours))


def is_sink_commit(snapshot: Any) -> bool:
    """Whether the sink wrote ``snapshot`` (its summary carries the sink's ``kafka.connect.*`` keys)."""
    summary = snapshot.summary.additional_properties if snapshot.summary else {}
    return any(key.startswith(SINK_SUMMARY_PREFIX) for key in summary)


def _is_sink_append(snapshot: Any) -> bool:
    return snapshot.summary is not None and snapshot.summary.operation.value == "append" and is_sink_commit(snapshot)


def _bound_slot(bounds: dict[int, bytes], date_field: Any, hour_field: Any) -> Slot | None:
    from pyiceberg.conversions import from_bytes

    if date_field.field_id not in bounds or hour_field.field_id not in bounds:
        return None
    log_date = from_bytes(date_field.field_type, bounds[date_field.field_id])
    hour = from_bytes(hour_field.field_type, bounds[hour_field.field_id])
    try:
        return str(log_date), int(hour)
    except (TypeError, ValueError):
        return None


def sink_appends(table: Any, after_ms: int) -> list[SinkAppend]:
    """The sink's appends to ``table`` (a pyiceberg table) committed after ``after_ms``, oldest first,
    each with the slots its added data files' ``log_date``/``hour`` bounds cover."""
    schema = table.schema()
    try:
        date_field, hour_field = schema.find_field("log_date"), schema.find_field("hour")
    except ValueError:
        return []  # not an ODS table of events (no time columns)
    out = []
    for snapshot in sorted(table.snapshots(), key=lambda s: s.timestamp_ms):
        if snapshot.timestamp_ms <= after_ms or not _is_sink_append(snapshot):
            continue
        slots: set[Slot] = set()
        for manifest in snapshot.manifests(table.io):
            if manifest.added_snapshot_id != snapshot.snapshot_id:
                continue
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                if entry.snapshot_id != snapshot.snapshot_id:
                    continue
                data = entry.data_file
                lower = _bound_slot(data.lower_bounds or {}, date_field, hour_field)
                upper = _bound_slot(data.upper_bounds or {}, date_field, hour_field)
                if lower and upper:
                    slots |= slots_between(lower, upper)
        out.append(SinkAppend(snapshot.snapshot_id, snapshot.timestamp_ms, frozenset(slots), snapshot.sequence_number or 0))
    return out


def history_gap(table: Any, after_ms: int) -> bool:
    """Whether the snapshots committed after ``after_ms`` may be incomplete: the table keeps none at or
    before it, so the ones between expired before a reader that stopped there read them."""
    kept = [s.timestamp_ms for s in table.snapshots()]
    return after_ms > 0 and bool(kept) and min(kept) > after_ms


def unseen_slots(table: Any, after_seq: int) -> frozenset[Slot]:
    """The slots of every data file the table holds that was written after sequence number
    ``after_seq``: what a reader whose mark expired may have missed. Their commits' times are gone
    with their snapshots, so a caller treats every closed one as late (a rebuild is idempotent);
    compaction's rewrites are among them too, rebuilt for nothing."""
    schema = table.schema()
    snapshot = table.current_snapshot()
    try:
        date_field, hour_field = schema.find_field("log_date"), schema.find_field("hour")
    except ValueError:
        return frozenset()
    if snapshot is None:
        return frozenset()
    slots: set[Slot] = set()
    for manifest in snapshot.manifests(table.io):
        if manifest.sequence_number is not None and manifest.sequence_number <= after_seq:
            continue  # every file it lists was written at or before the mark
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if entry.sequence_number is None or entry.sequence_number <= after_seq:
                continue
            lower = _bound_slot(entry.data_file.lower_bounds or {}, date_field, hour_field)
            upper = _bound_slot(entry.data_file.upper_bounds or {}, date_field, hour_field)
            if lower and upper:
                slots |= slots_between(lower, upper)
    return frozenset(slots)


def closed_slots(slots: Iterable[Slot], now: datetime, lag: timedelta = DEFAULT_LAG) -> set[Slot]:
    """The slots whose hourly DWS run was already due at ``now``."""
    return {slot for slot in slots if _hour_start(slot) + timedelta(hours=1) + lag <= now}


def late_slots(appends: Iterable[SinkAppend], lag: timedelta = DEFAULT_LAG) -> set[Slot]:
    """The slots written by a commit after the slot's hourly DWS run was due (hour end + ``lag``)."""
    late = set()
    for append in appends:
        committed = datetime.fromtimestamp(append.committed_ms / 1000, tz=timezone.utc)
        late |= {slot for slot in append.slots if _hour_start(slot) + timedelta(hours=1) + lag <= committed}
    return late


def hour_ranges(slots: Iterable[Slot]) -> list[tuple[Slot, Slot]]:
    """Contiguous runs of hours, oldest first: one DWS run per range (a single-run backfill)."""
    ordered = sorted(set(slots), key=_hour_start)
    ranges: list[tuple[Slot, Slot]] = []
    for slot in ordered:
        if ranges and _hour_start(slot) - _hour_start(ranges[-1][1]) == timedelta(hours=1):
            ranges[-1] = (ranges[-1][0], slot)
        else:
            ranges.append((slot, slot))
    return ranges


def closed_days(slots: Iterable[Slot], now: datetime, daily_due: timedelta) -> set[str]:
    """The days of ``slots`` whose daily DWS run was already due at ``now`` (day end + ``daily_due``)."""
    out = set()
    for log_date, _ in slots:
        day = datetime.fromisoformat(log_date).replace(tzinfo=timezone.utc)
        if day + timedelta(days=1) + daily_due <= now:
            out.add(log_date)
    return out
