"""The status sensor's watch of change capture's replication slot (``LAKEBUS_POSTGRES=on``): one
``pg_replication_slots`` read per tick as the capture role, its lag (bytes and age) recorded as an
observation of the ``cdc/replication_slot`` asset; the decision core judges the reading
(:mod:`lakebus_dagster.monitor.slot_watch`: inactive past a threshold, lost, unreadable) with the
connectors' own incidents."""

from __future__ import annotations

from contextlib import closing

import dagster as dg

from lakebus_dagster.cdc.capture import CaptureError
from lakebus_dagster.defs.asset_keys import CDC_SLOT_KEY
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.monitor.status_tick import SlotObservation

slot_asset = dg.AssetSpec(
    CDC_SLOT_KEY,
    description="Change capture's PostgreSQL replication slot (LAKEBUS_POSTGRES=on): active, wal_status, the bytes it "
    "holds and has not confirmed, and how long its confirmed position has not moved while behind. Observed by "
    "connector_status_sensor (every minute, and at once when active or wal_status changes).",
    group_name="monitoring",
    kinds={"postgres"},
)


def _read_slot(spec):
    import psycopg2

    from lakebus_dagster.cdc.database import connect, slot_status

    try:
        with closing(connect(spec)) as conn:
            return slot_status(conn, spec.slot), None
    except (CaptureError, psycopg2.Error) as exc:
        return None, (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def read_slot(capture: ChangeCaptureResource) -> SlotObservation | None:
    """This tick's read of the slot (None when capture is off or declared wrong)."""
    if not capture.enabled:
        return None
    try:
        spec = capture.spec()
    except CaptureError:
        return None  # connector_names() has said why, once per tick
    reading, problem = _read_slot(spec)
    return SlotObservation(spec.slot, spec.source_name, reading, problem)


def slot_observation(seen: dict | None, slot: SlotObservation | None) -> list[dg.AssetObservation]:
    """The slot's reading as an observation of ``cdc/replication_slot``, when the core chose to record it."""
    if not seen or slot is None:
        return []
    return [dg.AssetObservation(asset_key=CDC_SLOT_KEY, metadata={
        "slot": seen["slot"], "connector": slot.source, "active": bool(seen["active"]),
        "wal_status": str(seen["wal_status"]),
        "lag_bytes": dg.MetadataValue.int(int(seen["unconfirmed_bytes"] or 0)),
        "retained_bytes": dg.MetadataValue.int(int(seen["retained_bytes"] or 0)),
        "safe_wal_size": dg.MetadataValue.int(int(seen["safe_wal_size"])) if seen["safe_wal_size"] is not None else "unbounded",
        "lag_age_s": dg.MetadataValue.float(float(seen["lag_age_s"])),
        "inactive_s": dg.MetadataValue.float(float(seen["inactive_s"])),
        "confirmed_flush_lsn": str(seen["confirmed_flush_lsn"]),
    })]
