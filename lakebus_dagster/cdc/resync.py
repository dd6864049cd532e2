"""Re-sync a captured table from a point in time on the running connector (seed 002's "set the sync
start point of an existing task", done the way PostgreSQL allows).

Moving the stored offset backwards is not a re-sync on PostgreSQL (decoding resumes at the slot's
``confirmed_flush_lsn``; lakebus refuses it, see
:func:`lakebus_dagster.connect.source_offsets.validate_source_offsets`). What works on a running
connector is Debezium's **incremental snapshot** with ``additional-conditions``: an
``execute-snapshot`` signal on the capture's Kafka signal channel (keyed by ``topic.prefix``) makes
the source re-read, in primary-key chunks beside its streaming, exactly the rows the filter selects
(``updated_at >= T``), emitted as ``__op='r'`` changes; rows deleted meanwhile are not re-emitted
(their deletes were streamed). With ``read.only=true`` nothing is written to the database. The
current-state MERGE absorbs the re-reads (the same values), so the result is idempotent.

A full re-snapshot (:func:`full_snapshot`) is the same signal without a filter: every row of the
tables again, on the running connector. Progress is the re-read rows counted in the change topics
(:func:`reread_ops`) against the rows the database holds, and the connector's offset: while a
snapshot runs it carries ``incremental_snapshot_*`` keys (:func:`snapshot_running`);
``stop-snapshot`` cancels it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from lakebus_dagster.cdc.capture import CaptureError, CaptureSpec

_COLUMN = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def resync_filter(spec: CaptureSpec, table: str, column: str, since: str) -> str:
    """The SQL condition ``<column> >= '<since>'``, with everything checked and named on refusal."""
    if table not in spec.tables:
        raise CaptureError(f"capture {spec.name!r}: {table!r} is not a captured table ({', '.join(spec.tables)})")
    if not _COLUMN.match(column):
        raise CaptureError(f"capture {spec.name!r}: column {column!r} of {spec.qualified(table)} is not a plain identifier")
    try:
        moment = datetime.fromisoformat(since)
    except ValueError as exc:
        raise CaptureError(f"capture {spec.name!r}: since {since!r} is not an ISO timestamp (e.g. 2026-11-27T10:00:00+00:00)") from exc
    if moment.tzinfo is None:
        raise CaptureError(f"capture {spec.name!r}: since {since!r} has no time zone; give one (e.g. +00:00)")
    return f"{column} >= '{moment.isoformat()}'"


def execute_snapshot(spec: CaptureSpec, table: str, condition: str) -> tuple[str, str]:
    """(key, value) of the signal that starts an incremental snapshot of ``table`` filtered by ``condition``."""
    collection = spec.qualified(table)
    data = {"data-collections": [collection], "type": "INCREMENTAL",
            "additional-conditions": [{"data-collection": collection, "filter": condition}]}
    return spec.name, json.dumps({"type": "execute-snapshot", "data": data})


def full_snapshot(spec: CaptureSpec, tables: Sequence[str]) -> tuple[str, str]:
    """(key, value) of the signal that re-reads ``tables`` whole (an incremental snapshot without a
    filter: the running connector, read-only, chunk by chunk beside streaming)."""
    unknown = [t for t in tables if t not in spec.tables]
    if unknown or not tables:
        raise CaptureError(f"capture {spec.name!r}: {', '.join(unknown) or 'no table'} is not a captured table "
                           f"({', '.join(spec.tables)})")
    data = {"data-collections": [spec.qualified(t) for t in tables], "type": "INCREMENTAL"}
    return spec.name, json.dumps({"type": "execute-snapshot", "data": data})


def reread_ops(values: Iterable[bytes | None]) -> Counter:
    """The Debezium change events among ``values`` (Schema+JSON envelopes of a change topic) by
    ``op``: once the initial snapshot is done, every ``r`` is a row an incremental snapshot re-read."""
    ops: Counter = Counter()
    for value in values:
        if value is None:
            continue  # a tombstone (none are sent: tombstones.on.delete=false)
        payload = json.loads(value).get("payload") or {}
        ops[str(payload.get("op"))] += 1
    return ops


def stop_snapshot(spec: CaptureSpec, table: str) -> tuple[str, str]:
    """(key, value) of the signal that cancels the incremental snapshot of ``table``."""
    data = {"data-collections": [spec.qualified(table)], "type": "INCREMENTAL"}
    return spec.name, json.dumps({"type": "stop-snapshot", "data": data})


def snapshot_state(offsets: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``incremental_snapshot_*`` keys of the source's stored offset (empty: none running)."""
    for entry in offsets:
        offset = entry.get("offset") or {}
        keys = {k: v for k, v in offset.items() if k.startswith("incremental_snapshot")}
        if keys:
            return keys
    return {}


def snapshot_running(offsets: Sequence[Mapping[str, Any]]) -> bool:
    return bool(snapshot_state(offsets))
