"""Check a source connector's new start position *before* anything is stopped or changed.

KIP-875 offsets are ``[{"partition": {...}, "offset": {...}}]`` in the connector's own format (a
JDBC source's timestamp, a file source's position). Connect hands a PATCH to the connector's
``alterOffsets`` only after the connector has been stopped, and a malformed offset then fails with
an HTTP 500 while the connector sits stopped. So the job checks the shape here first:

* every entry is an object with a ``partition`` object and an ``offset`` object (or null = reset);
* the partition and offset keys match those of the offsets the connector already stored (its own
  format, learnt from ``GET .../offsets``), with values of the same JSON type;
* for connectors whose format lakebus knows (FileStreamSource), the exact rules of that connector.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lakebus_dagster.bus.connector_specs import FILE_SOURCE_CLASS
from lakebus_dagster.jsontypes import json_type


class OffsetFormatError(ValueError):
    """The offsets are not in the connector's format; the message names the connector and the entry."""


#: Debezium's PostgreSQL source (issue 30): its stored offsets are not a start position (see below)
DEBEZIUM_POSTGRES_CLASS = "io.debezium.connector.postgresql.PostgresConnector"


def validate_source_offsets(
    connector: str, connector_class: str, config: Mapping[str, str], offsets: Sequence[Any], stored: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Return ``offsets`` as plain dicts if they fit the connector's format; raise :class:`OffsetFormatError` otherwise."""
    if connector_class == DEBEZIUM_POSTGRES_CLASS:
        # verified on PostgreSQL 15 (research notes, issue 30): a PATCHed LSN behind the slot is accepted
        # and silently ignored — logical decoding resumes at the slot's confirmed_flush_lsn; WAL before the
        # slot's restart_lsn is gone. Offering it would look like a re-sync and re-read nothing.
        raise OffsetFormatError(
            f"connector {connector!r} is Debezium's PostgreSQL source: moving its stored offset does not move its start "
            "position (PostgreSQL resumes decoding at the replication slot's confirmed_flush_lsn; older WAL is gone). "
            "Re-read rows with resync_captured_table (an incremental snapshot since a time, on the running connector) "
            "instead")
    if not offsets:
        raise OffsetFormatError(f"connector {connector!r}: no offsets given")
    checked: list[dict[str, Any]] = []
    for i, entry in enumerate(offsets):
        where = f"connector {connector!r}: offsets[{i}]"
        if not isinstance(entry, Mapping) or set(entry) != {"partition", "offset"}:
            raise OffsetFormatError(f"{where} must be an object with exactly the keys 'partition' and 'offset', got {entry!r}")
        partition, offset = entry["partition"], entry["offset"]
        if not isinstance(partition, Mapping) or not partition:
            raise OffsetFormatError(f"{where}.partition must be a non-empty object, got {partition!r}")
        if offset is not None and not isinstance(offset, Mapping):
            raise OffsetFormatError(f"{where}.offset must be an object (or null to reset), got {offset!r}")
        if connector_class == FILE_SOURCE_CLASS:
            _check_file_source(where, config, partition, offset)
        else:
            _check_against_stored(where, partition, offset, stored)
        checked.append({"partition": dict(partition), "offset": dict(offset) if offset is not None else None})
    return checked


def _check_file_source(where: str, config: Mapping[str, str], partition: Mapping, offset: Mapping | None) -> None:
    """FileStreamSource: partition ``{"filename": <its file>}``, offset ``{"position": <integer >= 0>}``."""
    file = config.get("file", "")
    if dict(partition) != {"filename": file}:
        raise OffsetFormatError(f"{where}.partition must be {{'filename': {file!r}}} (the connector's file), got {dict(partition)!r}")
    if offset is None:
        return
    position = offset.get("position")
    if set(offset) != {"position"} or json_type(position) != "integer" or position < 0:
        raise OffsetFormatError(f"{where}.offset must be {{'position': <integer >= 0>}} (characters into {file!r}), got {dict(offset)!r}")


def _check_against_stored(where: str, partition: Mapping, offset: Mapping | None, stored: Sequence[Mapping[str, Any]]) -> None:
    """Unknown connector class: the keys and JSON types must match an offset the connector stored itself."""
    if not stored:
        return  # nothing to learn the format from: Connect and the connector's alterOffsets decide
    sample = stored[0]
    want_partition = {k: json_type(v) for k, v in sample["partition"].items()}
    got_partition = {k: json_type(v) for k, v in partition.items()}
    if want_partition != got_partition:
        raise OffsetFormatError(f"{where}.partition has keys/types {got_partition}, the connector's own offsets have {want_partition}")
    if offset is not None and sample.get("offset") is not None:
        want_offset = {k: json_type(v) for k, v in sample["offset"].items()}
        got_offset = {k: json_type(v) for k, v in offset.items()}
        if want_offset != got_offset:
            raise OffsetFormatError(f"{where}.offset has keys/types {got_offset}, the connector's own offsets have {want_offset}")
