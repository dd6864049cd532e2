"""How far the sink has got: what its workers consumed (Connect), the bus's and the control topic's
end offsets and the coordinator's committed control offset (Kafka), and the newest commit on its
tables (catalog). Read by the status sensor's stall watch (see :mod:`lakebus_dagster.monitor.stall`),
shown on the ODS assets' observations and by ``lakebus status``.

Plain clients, no Dagster: the sensor and the assets pass their resources' clients, the CLI builds
them from the settings. The catalog comes as a :class:`CatalogSource` that opens it when read, not
as an open catalog: opening the REST catalog already asks the server, and an unreachable catalog
must become the ``problem`` of :func:`newest_commit` (context for the stall alert), not a failed
sensor tick.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from pyiceberg.catalog import Catalog

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.kafka import KafkaClients, end_offsets, read_range
from lakebus_dagster.kafka.reading import offsets_for_times
from lakebus_dagster.lake.late_hours import is_sink_commit
from lakebus_dagster.monitor.coordinators import RECENT_CONTROL_OFFSETS, overlapping_cycles
from lakebus_dagster.monitor.control_events import ControlEvent, decode_control
from lakebus_dagster.monitor.stall import SinkProgress


#: the Iceberg sink's watermark in each snapshot summary: every record stamped up to it is committed
VALID_THROUGH = "kafka.connect.valid-through-ts"

class CatalogSource(Protocol):
    """Where the catalog is (for messages) and how to open it, when read: the Dagster
    ``IcebergCatalogResource`` is one, ``lakebus status`` builds one from the settings."""

    @property
    def catalog_uri(self) -> str: ...

    def load(self) -> Catalog: ...


#: at most this many control-topic offsets are read past the coordinator's committed offset; more
#: than that pending is not the short tail of a finished cycle (:attr:`SinkProgress.cycle_under_way`)
CONTROL_READ_LIMIT = 1000


def coordinator_group(connector: str) -> str:
    """The consumer group the Iceberg 1.11 sink's commit coordinator commits its control-topic
    offsets under (``<Connect's sink group>-coord``; observed on the live sink)."""
    return f"{sink_group(connector)}-coord"


def sink_group(connector: str) -> str:
    """Connect's consumer group of a sink's tasks (``connect-<connector>``, Connect's default)."""
    return f"connect-{connector}"


@dataclass(frozen=True)
class GroupMembership:
    """Who is in a consumer group: a short digest of its state and each member id with its assignment
    (None: no member), and how many members it has."""

    digest: str | None
    members: int


def group_memberships(admin, groups: list[str], timeout: float = 10) -> list[GroupMembership]:
    """Describe consumer ``groups`` in one request (:class:`GroupMembership` each, in order).

    Why: the status sensor's lost-coordinator window must run from the moments a failover goes
    through, not from Connect's placement of the tasks. The Iceberg sink elects its commit coordinator
    when the tasks' group (``connect-<connector>``) settles — after a worker dies the survivor runs
    task 0 seconds before the dead task's consumer session ends — and a coordinator is a member of the
    coordinators' group (``connect-<connector>-coord``) from its start until it stops or its control
    session ends: a dead coordinator leaves it ~10 s after the kill, before the tasks move at all.
    Two members of the coordinators' group for long are two coordinators (the dual rule)."""
    futures = admin.describe_consumer_groups(groups)
    return [_membership(futures[group].result(timeout=timeout)) for group in groups]


def live_brokers(admin, timeout: float = 10) -> str:
    """The cluster's live broker ids, e.g. ``1,2,3``.

    Why: a broker that dies with a Connect worker takes group coordinators with it, and the groups
    rebuild on another broker before the worker's tasks move: on Kafka 4.3.1 the Connect group
    rebalanced ~16.5 s after such a kill and task 0 restarted ~22.5 s after it (~12 s for both on 3.9.2,
    BENCHMARKS.md#kafka-4), so a lost-coordinator window counted from the last move of the tasks ran
    out before they moved. A broker leaving or joining is a move of its own: the window starts again."""
    described = admin.describe_cluster(request_timeout=timeout).result(timeout=timeout)
    return ",".join(str(node_id) for node_id in sorted(node.id for node in described.nodes))


def _membership(described) -> GroupMembership:
    members = sorted(
        f"{m.member_id}:" + ",".join(sorted(f"{tp.topic}/{tp.partition}" for tp in (m.assignment.topic_partitions if m.assignment else [])))
        for m in described.members or []
    )
    if not members:
        return GroupMembership(None, 0)
    return GroupMembership(hashlib.sha1(f"{described.state}|{'|'.join(members)}".encode()).hexdigest()[:12], len(members))


def sink_progress(bus: BusLayout, client: ConnectClient, kafka: KafkaClients, iceberg: CatalogSource) -> SinkProgress:
    """Consumed offsets (Connect), bus and control end offsets (Kafka), the coordinator's committed
    control offset (its consumer group) and the newest ODS commit (catalog)."""
    consumed = {
        int(o["partition"]["kafka_partition"]): int(o["offset"]["kafka_offset"])
        for o in client.get_offsets(bus.connector_name)
        if o["partition"].get("kafka_topic") == bus.bus_topic.name
    }
    consumer = kafka.consumer("lakebus-status-sensor")
    try:
        ends = end_offsets(consumer, bus.bus_topic.name)
        control_end = sum(end_offsets(consumer, bus.control_topic.name).values())
    finally:
        consumer.close()
    group = coordinator_group(bus.connector_name)
    admin = kafka.admin()  # held until the answer arrives: a collected client cancels its requests (_DESTROY)
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=10)
    positions = [tp.offset for tp in listed.topic_partitions if tp.topic == bus.control_topic.name and tp.offset >= 0]
    coordinator = sum(positions) if positions else None
    tasks_group, coordinators = group_memberships(admin, [sink_group(bus.connector_name), group])
    brokers = live_brokers(admin)
    newest_ms, valid_through_ms, problem = newest_commit(bus, iceberg)
    pending, overlaps = control_view(kafka, bus, coordinator, control_end)
    return SinkProgress(consumed, ends, coordinator, control_end, newest_ms, problem,
                        uncommitted=_newer_than(kafka, bus.bus_topic.name, ends, valid_through_ms),
                        control_events=pending, overlapping_cycles=overlaps,
                        sink_members=f"{tasks_group.digest or '-'}/{coordinators.digest or '-'}/{brokers}",
                        coordinator_members=coordinators.members)


def _read_control(kafka: KafkaClients, bus: BusLayout, start: int, end: int) -> list[tuple[int, ControlEvent | None]] | None:
    """The control topic's records in ``[start, end)`` as ``(offset, event)``, read as the coordinator
    reads them (``read_committed``: aborted events and transaction markers skipped); the event is None
    for a record not in the sink's format, and other connectors' events on a shared control topic are
    left out by their group id. None when unreadable (Kafka error, timeout)."""

    def consumer(group_id: str, **overrides):
        return kafka.consumer(group_id, **{**overrides, "isolation.level": "read_committed"})

    try:
        records = read_range(consumer, bus.control_topic.name, 0, start, end, timeout_s=10)
    except (KafkaException, TimeoutError):
        return None
    group = sink_group(bus.connector_name)
    decoded = [(r.offset(), decode_control(r.value())) for r in records]
    return [(offset, e) for offset, e in decoded if e is None or e.group == group]


def control_view(kafka: KafkaClients, bus: BusLayout, coordinator: int | None, control_end: int,
                 ) -> tuple[tuple[str, ...] | None, tuple[tuple[int, int], ...] | None]:
    """What the status sensor reads of the control topic, in one read of it:

    - the connector's control events (payload types, oldest first) between the coordinator's
      committed offset (the start, before its first commit) and the end — None when unreadable, not
      the sink's format, or more than :data:`CONTROL_READ_LIMIT` offsets are pending (unknown, never a
      lost coordinator);
    - the overlapping finished commit cycles (two coordinators) among the latest
      :data:`RECENT_CONTROL_OFFSETS` offsets — None when unreadable or not the sink's format."""
    start, recent = coordinator or 0, max(0, control_end - RECENT_CONTROL_OFFSETS)
    pending_known = control_end - start <= CONTROL_READ_LIMIT
    records = _read_control(kafka, bus, min(start, recent) if pending_known else recent, control_end)
    if records is None:
        return None, None

    def window(first: int) -> list[ControlEvent] | None:
        events = [e for offset, e in records if offset >= first]
        return None if None in events else events  # a foreign record: a cycle under way cannot be ruled out

    pending = window(start) if pending_known else None
    latest = window(recent)
    return (None if pending is None else tuple(e.kind for e in pending),
            None if latest is None else overlapping_cycles(latest))


def _newer_than(kafka: KafkaClients, topic: str, ends: dict[int, int], valid_through_ms: int | None) -> int | None:
    """Records of ``topic`` stamped after the sink's valid-through time — every record up to that time
    is in the tables (the sink's own watermark), so these are what a commit still owes. None when
    no commit carries the watermark yet."""
    if valid_through_ms is None:
        return None
    consumer = kafka.consumer("lakebus-status-sensor")
    try:
        found = offsets_for_times(consumer, [TopicPartition(topic, p, valid_through_ms + 1) for p in ends])
    finally:
        consumer.close()
    return sum(ends[tp.partition] - tp.offset for tp in found if tp.offset >= 0)


def _epoch_ms(value: str) -> int | None:
    """The sink writes its watermark as ISO-8601 (``2026-11-26T02:29:27.501Z``); epoch ms accepted too."""
    try:
        return int(value)
    except ValueError:
        try:
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            return None


#: how many parents back :func:`sink_snapshot` looks past other writers' commits
SINK_SNAPSHOT_LOOKBACK = 20


def sink_snapshot(table):
    """The table's newest snapshot the sink committed: the current one, or, when lakebus's
    maintenance (a compaction) or another writer committed since, the nearest ancestor with the
    sink's summary keys. A compaction pays no owed record: it must neither restart the stall clock
    nor hide the watermark. None when none is found within :data:`SINK_SNAPSHOT_LOOKBACK` parents."""
    snapshot = table.current_snapshot()
    for _ in range(SINK_SNAPSHOT_LOOKBACK):
        if snapshot is None:
            return None
        if is_sink_commit(snapshot):
            return snapshot
        snapshot = table.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id is not None else None
    return None


def newest_commit(bus: BusLayout, iceberg: CatalogSource) -> tuple[int | None, int | None, str]:
    """(newest sink commit on the connector's tables in epoch ms, the sink's valid-through watermark
    in epoch ms, problem); context for the stall alert, so a catalog error is reported in it rather
    than failing the tick.

    The watermark is the one the *newest* commit carries, or None (unknown) when that commit carries
    none. The sink writes it only on a cycle every partition answered, the same value on every table
    of the cycle; a partial cycle (after refused commits, a worker that timed out) commits without
    it. An older watermark from another table must not stand in for it: every record committed by
    the partial cycle would count as owed until the next full cycle, which never comes when the bus
    goes quiet — with two tables, the stall incident then never closed (with one table the current
    snapshot had no watermark and the rule let go; this makes both cases alike)."""
    newest: int | None = None
    valid_through: int | None = None
    try:
        catalog = iceberg.load()
        for table in bus.tables:
            if catalog.table_exists(table):
                snapshot = sink_snapshot(catalog.load_table(table))
                if snapshot is None:
                    continue
                summary = snapshot.summary.additional_properties if snapshot.summary else {}
                mark = _epoch_ms(summary.get(VALID_THROUGH, ""))
                if newest is None or snapshot.timestamp_ms > newest:
                    newest, valid_through = snapshot.timestamp_ms, mark
                elif snapshot.timestamp_ms == newest and mark is not None:
                    valid_through = max(valid_through or 0, mark)
    except Exception as exc:  # noqa: BLE001 - surfaced in the incident text, see docstring
        return newest, valid_through, f"catalog {iceberg.catalog_uri} unreadable: {type(exc).__name__}: {str(exc)[:200]}"
    return newest, valid_through, ""
