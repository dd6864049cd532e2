"""Reading what the ledger judges: the bus, the DLQ, the ODS provenance columns, the sink's
committed offsets. Every read is bounded (offset ranges, pyiceberg row filters) so a run costs
what is new since the verified point, not the whole history."""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import Message
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual, IsNull

from lakebus_dagster.bus.provenance import OFFSET_COLUMN, PARTITION_COLUMN, TOPIC_COLUMN
from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.kafka.reading import ConsumerFactory, read_range, watermarks
from lakebus_dagster.ledger.model import REPLAY_HEADER, REQUEUE_HEADER, BusRecord, DlqRecord, OdsRow, Position
from lakebus_dagster.ledger.state import SnapshotInfo

_ERRORS = "__connect.errors."


def committed_offsets(client: ConnectClient, connector: str, topic: str) -> dict[int, int]:
    """``{partition: next offset to consume}`` the sink has committed for ``topic`` (Connect's
    ``GET /connectors/<name>/offsets``); a partition it never committed is absent."""
    out = {}
    for entry in client.get_offsets(connector):
        part, off = entry.get("partition", {}), entry.get("offset") or {}
        if part.get("kafka_topic") == topic and off.get("kafka_offset") is not None:
            out[int(part["kafka_partition"])] = int(off["kafka_offset"])
    return out


def _header(msg: Message, name: str) -> str | None:
    for key, value in msg.headers() or []:
        if key == name and value is not None:
            return value.decode("utf-8", errors="replace")
    return None


def _position(msg: Message, name: str) -> Position | None:
    text = _header(msg, name)
    if text is None:
        return None
    try:
        return Position.parse(text)
    except ValueError as exc:
        raise ValueError(f"{msg.topic()}[{msg.partition()}]@{msg.offset()}: header {name}: {exc}") from None


def bus_record(msg: Message) -> BusRecord:
    return BusRecord(
        partition=msg.partition(),
        offset=msg.offset(),
        timestamp_ms=msg.timestamp()[1],
        tombstone=msg.value() is None,
        replay_of=_position(msg, REPLAY_HEADER),
        requeued_from=_position(msg, REQUEUE_HEADER),
    )


def read_bus(make_consumer: ConsumerFactory, topic: str, partition: int, start: int, end: int,
             timeout_s: float = 300.0) -> list[BusRecord]:
    return [bus_record(m) for m in read_range(make_consumer, topic, partition, start, end, timeout_s=timeout_s)]


def read_dlq(make_consumer: ConsumerFactory, dlq_topic: str, partitions: Iterable[int], start: dict[int, int]
             ) -> tuple[list[DlqRecord], dict[int, int], int]:
    """DLQ records from ``start`` (per DLQ partition; default: the low watermark) to the end.

    Returns the records that name their original (``__connect.errors.topic/partition/offset``),
    the next offset per DLQ partition, and how many records named none (not Connect's, not
    remediation's: reported, never silently dropped).
    """
    records, nxt, unattributed = [], {}, 0
    consumer = make_consumer("lakebus-ledger")
    try:
        bounds = {p: watermarks(consumer, dlq_topic, p) for p in partitions}
    finally:
        consumer.close()
    for p, (low, high) in bounds.items():
        begin = max(low, start.get(p, low))
        for m in read_range(make_consumer, dlq_topic, p, begin, high, timeout_s=300.0):
            topic, part, off = (_header(m, f"{_ERRORS}{k}") for k in ("topic", "partition", "offset"))
            try:
                records.append(DlqRecord(Position(dlq_topic, p, m.offset()), Position(topic or "", int(part or ""), int(off or ""))))
            except ValueError:
                unattributed += 1
        nxt[p] = max(begin, high)
    return records, nxt, unattributed


def _has_provenance(table) -> bool:
    names = {f.name for f in table.schema().fields}
    return {TOPIC_COLUMN, PARTITION_COLUMN, OFFSET_COLUMN} <= names


def read_ods(catalog: Catalog, tables: Iterable[str], topic: str, min_offset: int) -> list[OdsRow]:
    """Provenance of every ODS row from ``topic`` with offset >= ``min_offset``, in every table.

    The filter is pushed into pyiceberg's scan planning: data files whose ``_kafka_offset`` upper
    bound is below ``min_offset`` are never opened.
    """
    rows: list[OdsRow] = []
    for name in tables:
        try:
            table = catalog.load_table(name)
        except NoSuchTableError:
            continue
        if table.current_snapshot() is None or not _has_provenance(table):
            continue
        arrow = table.scan(
            row_filter=And(EqualTo(TOPIC_COLUMN, topic), GreaterThanOrEqual(OFFSET_COLUMN, min_offset)),
            selected_fields=(PARTITION_COLUMN, OFFSET_COLUMN),
        ).to_arrow()
        parts, offs = arrow.column(PARTITION_COLUMN).to_pylist(), arrow.column(OFFSET_COLUMN).to_pylist()
        rows.extend(OdsRow(name, p, o) for p, o in zip(parts, offs))
    return rows


def first_provenance_offsets(catalog: Catalog, tables: Iterable[str], topic: str) -> tuple[dict[int, int], list[str]]:
    """For a first run: the lowest provenance offset per partition, and the tables holding rows
    without provenance (written before the transform was added; the ledger cannot place them)."""
    lowest: dict[int, int] = {}
    legacy: list[str] = []
    for name in tables:
        try:
            table = catalog.load_table(name)
        except NoSuchTableError:
            continue
        if table.current_snapshot() is None:
            continue
        if not _has_provenance(table):
            legacy.append(name)
            continue
        if table.scan(row_filter=IsNull(OFFSET_COLUMN), selected_fields=(OFFSET_COLUMN,), limit=1).to_arrow().num_rows:
            legacy.append(name)
        arrow = table.scan(row_filter=EqualTo(TOPIC_COLUMN, topic), selected_fields=(PARTITION_COLUMN, OFFSET_COLUMN)).to_arrow()
        for p, o in zip(arrow.column(PARTITION_COLUMN).to_pylist(), arrow.column(OFFSET_COLUMN).to_pylist()):
            lowest[p] = min(o, lowest.get(p, o))
    return lowest, legacy


def table_snapshots(catalog: Catalog, tables: Iterable[str]) -> dict[str, list[SnapshotInfo]]:
    out = {}
    for name in tables:
        try:
            table = catalog.load_table(name)
        except NoSuchTableError:
            continue
        out[name] = [
            SnapshotInfo(
                s.timestamp_ms,
                s.summary.operation.value if s.summary else "unknown",
                int((s.summary.additional_properties if s.summary else {}).get("deleted-records", 0)),
            )
            for s in table.snapshots()
        ]
    return out
