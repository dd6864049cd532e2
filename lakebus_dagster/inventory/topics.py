"""Collect the topic inventory from the cluster: bounded, group-neutral, one pass.

Partitions and replication (metadata), key configs (``describe_configs``), start/end offsets
(``list_offsets``), a bounded sample of the newest records per partition (``assign`` at explicit
offsets, nothing committed), consumer groups and their committed offsets (``list_consumer_groups``
+ ``list_consumer_group_offsets``, one group per request as the API requires). Every step has a
deadline: a big cluster yields a partial sample, never a hung sensor tick.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, OffsetSpec, ResourceType

from lakebus_dagster.inventory.schema import TopicSchema, infer_schema
from lakebus_dagster.kafka import PARTITION_EOF

#: the configs the inventory shows (the rest stays in Kafka)
KEY_CONFIGS = ("cleanup.policy", "retention.ms", "retention.bytes", "compression.type", "min.insync.replicas", "max.message.bytes")
TIMEOUT_S = 15.0


@dataclass(frozen=True)
class InventoryBounds:
    """How much one inventory pass may read: records per partition and wall-clock seconds for sampling."""

    sample_per_partition: int = 50
    sample_time_s: float = 15.0
    include: str = ".*"
    exclude: str = r"^_"

    def selects(self, topic: str) -> bool:
        if self.exclude and re.search(self.exclude, topic):
            return False
        return re.search(self.include, topic) is not None


@dataclass
class GroupLag:
    group: str
    committed: int
    lag: int


@dataclass
class TopicInventory:
    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str]
    start_offsets: dict[int, int]
    end_offsets: dict[int, int]
    schema: TopicSchema = field(default_factory=lambda: infer_schema([]))
    avg_record_bytes: float | None = None
    rate_per_s: float | None = None
    groups: list[GroupLag] = field(default_factory=list)

    @property
    def messages(self) -> int:
        return sum(self.end_offsets[p] - self.start_offsets.get(p, 0) for p in self.end_offsets)

    def row(self) -> dict[str, Any]:
        est = None if self.avg_record_bytes is None else self.avg_record_bytes * self.messages
        return {
            "topic": self.name,
            "partitions": self.partitions,
            "RF": self.replication_factor,
            "retention.ms": self.configs.get("retention.ms"),
            "cleanup": self.configs.get("cleanup.policy"),
            "messages": self.messages,
            "rate msg/s": self.rate_per_s,
            "avg bytes": self.avg_record_bytes,
            "est. size bytes": est,
            "schema": self.schema.source,
            "schema hash": self.schema.hash[:12],
            "groups (lag)": ", ".join(f"{g.group} ({g.lag})" for g in self.groups) or "",
        }


def collect(admin: AdminClient, make_consumer: Callable[..., Consumer], bounds: InventoryBounds) -> dict[str, TopicInventory]:
    """The inventory of every topic ``bounds`` selects (raises KafkaException if the cluster is unreachable)."""
    md = admin.list_topics(timeout=TIMEOUT_S)
    topics = {n: t for n, t in md.topics.items() if t.error is None and bounds.selects(n)}
    if not topics:
        return {}
    configs = _configs(admin, sorted(topics))
    tps = [TopicPartition(n, p) for n, t in topics.items() for p in t.partitions]
    starts, ends = _offsets(admin, tps, OffsetSpec.earliest()), _offsets(admin, tps, OffsetSpec.latest())
    out: dict[str, TopicInventory] = {}
    for name, t in sorted(topics.items()):
        parts = sorted(t.partitions)
        out[name] = TopicInventory(
            name, len(parts), max((len(t.partitions[p].replicas) for p in parts), default=0), configs.get(name, {}),
            {p: starts.get((name, p), 0) for p in parts}, {p: ends.get((name, p), 0) for p in parts},
        )
    _sample(make_consumer, out, bounds)
    _groups(admin, out)
    return out


def _configs(admin: AdminClient, names: list[str]) -> dict[str, dict[str, str]]:
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, n) for n in names], request_timeout=TIMEOUT_S)
    out = {}
    for resource, fut in futures.items():
        try:
            entries = fut.result(timeout=TIMEOUT_S)
        except KafkaException:
            continue  # deleted between metadata and describe: shown without configs
        out[resource.name] = {k: e.value for k, e in entries.items() if k in KEY_CONFIGS and e.value is not None}
    return out


def _offsets(admin: AdminClient, tps: list[TopicPartition], spec: OffsetSpec) -> dict[tuple[str, int], int]:
    futures = admin.list_offsets({tp: spec for tp in tps}, request_timeout=TIMEOUT_S)
    out = {}
    for tp, fut in futures.items():
        try:
            out[(tp.topic, tp.partition)] = fut.result(timeout=TIMEOUT_S).offset
        except KafkaException:
            continue
    return out


def _sample(make_consumer: Callable[..., Consumer], inventory: dict[str, TopicInventory], bounds: InventoryBounds) -> None:
    """Read the newest ``sample_per_partition`` records of every partition in one assign, within ``sample_time_s``."""
    todo: dict[tuple[str, int], int] = {}
    assign = []
    for name, inv in inventory.items():
        for p, high in inv.end_offsets.items():
            low = inv.start_offsets.get(p, 0)
            if high > low:
                start = max(low, high - bounds.sample_per_partition)
                assign.append(TopicPartition(name, p, start))
                todo[(name, p)] = high
    values: dict[str, list[bytes | None]] = defaultdict(list)
    sizes: dict[str, list[int]] = defaultdict(list)
    stamps: dict[tuple[str, int], list[int]] = defaultdict(list)
    if assign:
        consumer = make_consumer("lakebus-inventory", **{"enable.partition.eof": True, "fetch.wait.max.ms": 100})
        try:
            consumer.assign(assign)
            deadline = time.monotonic() + bounds.sample_time_s
            while todo and time.monotonic() < deadline:
                for msg in consumer.consume(num_messages=1000, timeout=0.5):
                    key = (msg.topic(), msg.partition())
                    if msg.error():
                        # end of the log (a transaction marker may hold the last offset): this partition is done
                        if msg.error().code() == PARTITION_EOF:
                            todo.pop(key, None)
                        continue
                    value = msg.value()
                    values[msg.topic()].append(value)
                    sizes[msg.topic()].append(len(value or b"") + len(msg.key() or b""))
                    ts_type, ts = msg.timestamp()
                    if ts_type and ts > 0:
                        stamps[key].append(ts)
                    if msg.offset() + 1 >= todo.get(key, 0):
                        todo.pop(key, None)
        finally:
            consumer.close()
    for name, inv in inventory.items():
        inv.schema = infer_schema(values.get(name, []))
        if sizes.get(name):
            inv.avg_record_bytes = sum(sizes[name]) / len(sizes[name])
        inv.rate_per_s = _rate([stamps[(name, p)] for p in inv.end_offsets if len(stamps.get((name, p), [])) > 1])


def _rate(per_partition: list[list[int]]) -> float | None:
    """Records per second over each partition's sampled time span, summed (None without two timestamps)."""
    rates = [(len(ts) - 1) / ((max(ts) - min(ts)) / 1000) for ts in per_partition if max(ts) > min(ts)]
    return sum(rates) if rates else None


def _groups(admin: AdminClient, inventory: dict[str, TopicInventory]) -> None:
    """Committed offsets of every consumer group on the inventoried topics, as lag per group."""
    listing = admin.list_consumer_groups(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    for group in sorted(g.group_id for g in listing.valid):
        try:
            futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=TIMEOUT_S)
            result = futures[group].result(timeout=TIMEOUT_S)
        except KafkaException:
            continue  # a group gone between listing and describing
        per_topic: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for tp in result.topic_partitions or []:
            if tp.topic in inventory and tp.offset >= 0:
                per_topic[tp.topic].append((tp.partition, tp.offset))
        for topic, committed in per_topic.items():
            inv = inventory[topic]
            lag = sum(max(0, inv.end_offsets.get(p, 0) - off) for p, off in committed)
            inv.groups.append(GroupLag(group, sum(off for _, off in committed), lag))
