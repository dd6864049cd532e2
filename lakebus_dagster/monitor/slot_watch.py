"""The replication slot of a change capture, watched by the status sensor: its lag in bytes and
age, and the incidents it can open. Pure logic over one ``pg_replication_slots`` row per tick and
the slot's entry in the incident book (plain JSON), no Dagster, no database.

- **Lag in bytes**: ``pg_current_wal_lsn() - confirmed_flush_lsn`` (WAL the consumer has not
  confirmed yet) and ``- restart_lsn`` (WAL the server keeps for the slot).
- **Lag age**: how long the confirmed position has not moved while the slot is behind — the time
  since the sensor last saw ``confirmed_flush_lsn`` change (0 when nothing is unconfirmed). The
  source's ``heartbeat.action.query`` writes to a published table every ``heartbeat.interval.ms``,
  so a healthy slot's position moves at least that often, idle tables or not.
- **Inactive slot** (``active`` false for ``inactive_threshold_s``): nothing reads it, yet the
  server keeps every WAL segment since its ``restart_lsn`` — a stopped, failed or deleted source,
  or a slot left behind by a retired capture. One incident (``connector:<source>:slot:inactive``),
  one alert, one recovery notice once a reader is back; a short gap (a task restart) is none.
- **Lost slot** (``wal_status`` ``lost``: PostgreSQL invalidated it past ``max_slot_wal_keep_size``):
  one incident at once (``connector:<source>:slot:lost``). The source fails on its next start (the
  existing lost-slot rule: its FAILED task); both are the source connector's, so they are *one*
  incident (:meth:`~lakebus_dagster.monitor.incidents.IncidentBook.update`: a part of the first).
- **Unreadable** (the database does not answer the sensor for ``unreadable_threshold_s``): an
  incident of its own (``connector:<source>:slot:unreadable``), never a silent gap.

A slot that does not exist is no incident here: before the source's first start there is none, and
after a lost slot the source's FAILED task is the incident.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lakebus_dagster.monitor.incidents import Incident

#: how often the slot is recorded as an observation when nothing about it changed
OBSERVE_EVERY_S = 60.0


def track(state: dict[str, Any], reading: Mapping[str, Any] | None, now: float) -> dict[str, Any]:
    """Update the slot's book ``state`` with this tick's ``reading`` (``None``: no slot); returns
    what the tick saw: the reading plus ``lag_age_s`` and ``inactive_s`` (``{}`` without a slot)."""
    state.pop("unreadable_since", None)
    if reading is None:
        for key in ("confirmed", "moved_at", "inactive_since"):
            state.pop(key, None)
        return {}
    if state.get("confirmed") != reading["confirmed_flush_lsn"]:
        state["confirmed"], state["moved_at"] = reading["confirmed_flush_lsn"], now
    if reading["active"]:
        state.pop("inactive_since", None)
    else:
        state.setdefault("inactive_since", now)
    behind = int(reading["unconfirmed_bytes"] or 0) > 0
    return {**reading, "lag_age_s": round(now - state["moved_at"], 1) if behind else 0.0,
            "inactive_s": round(now - state["inactive_since"], 1) if "inactive_since" in state else 0.0}


def slot_incidents(source: str, seen: Mapping[str, Any], now: float, inactive_threshold_s: float) -> list[Incident]:
    """The incidents one tick's slot (:func:`track`'s answer) shows; ``source`` owns the slot."""
    if not seen:
        return []
    slot, incidents = seen["slot"], []
    held = f"{_size(seen['retained_bytes'])} of WAL held, {_size(seen['unconfirmed_bytes'])} not confirmed"
    if seen["wal_status"] == "lost":
        incidents.append(Incident(f"connector:{source}:slot:lost", source,
                                  f"replication slot {slot} of {source} is LOST (wal_status lost: PostgreSQL invalidated it "
                                  "past max_slot_wal_keep_size); the source cannot resume from it — changes made since "
                                  "are gone from the WAL: reset the source's offsets for a full snapshot"))
    elif seen["inactive_s"] >= inactive_threshold_s:
        safe = seen.get("safe_wal_size")
        room = f"; {_size(safe)} more before PostgreSQL invalidates it" if safe is not None else ""
        incidents.append(Incident(f"connector:{source}:slot:inactive", source,
                                  f"replication slot {slot} of {source} is INACTIVE for {seen['inactive_s']:.0f}s "
                                  f"(wal_status {seen['wal_status']}; {held}{room}): no source reads it — resume or "
                                  "restart the source, or drop the slot of a retired capture"))
    return incidents


def unreadable_incident(state: dict[str, Any], source: str, slot: str, problem: str, now: float,
                        threshold_s: float) -> Incident | None:
    """An incident once the database has not answered the sensor for ``threshold_s``."""
    since = state.setdefault("unreadable_since", now)
    if now - since < threshold_s:
        return None
    return Incident(f"connector:{source}:slot:unreadable", source,
                    f"cannot read replication slot {slot} of {source} for {now - since:.0f}s: {problem}")


def observe_now(state: dict[str, Any], seen: Mapping[str, Any], now: float) -> bool:
    """Record this tick as an observation? The first reading, a change of ``active`` or ``wal_status``,
    else every :data:`OBSERVE_EVERY_S` (a sensor ticking every 10 s would flood the event log)."""
    shape = f"{seen.get('active')}/{seen.get('wal_status')}"
    due = state.get("observed_shape") != shape or now - float(state.get("observed_at", float("-inf"))) >= OBSERVE_EVERY_S
    if due:
        state["observed_shape"], state["observed_at"] = shape, now
    return due


def _size(n: Any) -> str:
    if n is None:
        return "?"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"
