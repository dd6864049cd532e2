"""The declared bus layout: one topic for every event, one Iceberg sink routing by ``event``.

Everything that provisions, watches or reads the bus takes a :class:`BusLayout`; nothing else
spells a topic name, a connector name or a route. ``BusLayout.default()`` is the seed's layout.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from lakebus_dagster.bus.target_state import TargetState, TargetStateError

#: the Apache Iceberg sink as Apache ships it
UPSTREAM_ICEBERG_SINK_CLASS = "org.apache.iceberg.connect.IcebergSinkConnector"
#: the connector lakebus provisions: the Apache sink with task configurations that stay the same when
#: the connector restarts (infra/maven/connect-sink-lakebus): upstream's random transactional-id
#: suffix made Connect rewrite them and restart every task again after a failover, which cost a
#: consumer session before the next coordinator's election (BENCHMARKS.md, "stable task configs")
ICEBERG_SINK_CLASS = "io.lakebus.connect.sink.StableIcebergSinkConnector"
#: lakebus's connector class: whether its tasks stop a commit coordinator when they close the
#: partition it was elected by ("true", the default) or run Apache's task unchanged ("false")
RELEASE_COORDINATOR_PROP = "lakebus.release-coordinator-on-close"
#: lakebus's connector class: whether it commits the control topic's end for the commit coordinators'
#: consumer group when that group has no offset yet ("true", the default), before any task runs
ANCHOR_CONTROL_OFFSETS_PROP = "lakebus.anchor-control-offsets"
#: lakebus's connector class: whether each task, when it starts, fences its worker transactional id
#: ("true", the default), aborting a dead predecessor's open answer before its consumer reads offsets
FENCE_WORKER_TRANSACTION_PROP = "lakebus.fence-worker-transaction"

#: default name of the compacted topic holding declared connector states
STATE_TOPIC = "lakebus-connector-states"
STATE_TOPIC_CONFIGS = {"cleanup.policy": "compact"}

_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_IDENT = re.compile(r"^[a-z_][a-z0-9_]*$")


def _durability(parent: "TopicSpec") -> dict[str, str]:
    """The configs a derived topic inherits from its parent: how many replicas must acknowledge."""
    return {k: v for k, v in parent.configs.items() if k == "min.insync.replicas"}


class LayoutError(ValueError):
    """The declared layout is inconsistent; the message names the offending field."""


def _check_keys(data: Mapping[str, Any], allowed: set[str], where: str) -> None:
    if not isinstance(data, Mapping):
        raise LayoutError(f"{where}: expected a mapping, got {type(data).__name__}")
    unknown = sorted(set(data) - allowed - {"namespace"})
    if unknown:
        raise LayoutError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int = 1
    replication_factor: int = 1
    configs: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not _TOPIC_NAME.match(self.name) or self.name in {".", ".."}:
            raise LayoutError(f"topic name {self.name!r} is not a valid Kafka topic name")
        if self.partitions < 1:
            raise LayoutError(f"topic {self.name!r}: partitions must be >= 1, got {self.partitions}")
        if self.replication_factor < 1:
            raise LayoutError(f"topic {self.name!r}: replication_factor must be >= 1, got {self.replication_factor}")


@dataclass(frozen=True)
class SinkTuning:
    #: sink tasks; ``None`` (the default) runs one task per partition of the bus topic, so growing
    #: the topic raises ``tasks.max`` with it
    tasks_max: int | None = None
    #: records per consumer poll (the seed's 500 cost ~35-45 % more Connect CPU per event; BENCHMARKS.md)
    max_poll_records: int = 5000
    commit_interval_ms: int = 10_000
    commit_timeout_ms: int = 30_000
    #: the sink consumers' group session (Kafka's default 45 s). A killed worker's task keeps its
    #: partitions until its session expires, and the 1.11 sink elects no coordinator while partition
    #: 0 is unassigned: most of the minute without commits after a worker loss (BENCHMARKS.md, issue
    #: 19). 18 s outlasts the Connect group's reaction (worker session 10 s, the tasks moved at once,
    #: task start), so task 0 is back before its old session ends and is elected once. When a broker
    #: dies with the worker, the group's new coordinator restarts every member's session, and the
    #: dead one's ends 18 s later, not 25. Shorter sessions once left two coordinators (an interim one
    #: on the survivor was never stopped); lakebus's sink task now stops it
    #: (``release_coordinator_on_close``)
    consumer_session_timeout_ms: int = 18_000
    #: the session of the sink's own control-topic clients (``iceberg.kafka.session.timeout.ms``;
    #: None: Kafka's default 45 s). Every coordinator joins one group, ``connect-<connector>-coord``,
    #: for the control topic's partition: a killed coordinator stays a member until its session ends,
    #: and until then the group cannot rebalance, so the new coordinator reads no worker's answer —
    #: with 45 s a failover's first commit came ~45 s after the kill whatever the election's speed
    #: (the broker removed the dead member 44 s after the kill). 10 s brings rows back a commit
    #: interval after the election (BENCHMARKS.md, "the coordinators' group"); the status sensor
    #: counts its lost-coordinator window from that election (the tasks' consumer group settling),
    #: not from Connect's placement of the tasks, which it restarted sinks in front of
    control_session_timeout_ms: int | None = 10_000
    #: lakebus's sink tasks stop their commit coordinator when they close the partition it was
    #: elected by (``lakebus.release-coordinator-on-close``; only lakebus's connector class reads it).
    #: The sink's own close misses that during most rebalances and leaves an interim coordinator
    #: running beside the rightful one (apache/iceberg#17637; BENCHMARKS.md, "Failover at stop 15")
    release_coordinator_on_close: bool = True
    #: lakebus's connector gives the coordinators' consumer group (``connect-<connector>-coord``) a
    #: committed control-topic offset when it starts, if the group has none
    #: (``lakebus.anchor-control-offsets``). Without one, a coordinator elected after its predecessor
    #: died in the connector's first commit cycles starts at the control topic's end and never sees
    #: the answers in flight, whose events the tasks had already committed upstream: they are lost
    #: until re-queued (BENCHMARKS.md, "Kills at every phase of the commit cycle")
    anchor_control_offsets: bool = True
    #: each of lakebus's sink tasks fences its worker transactional id when it starts
    #: (``lakebus.fence-worker-transaction``). A worker killed while its task answered a commit
    #: cycle leaves that answer's offsets pending in a Kafka transaction; without the fence the
    #: task's successor cannot read its offsets until the transaction times out (60 s): first rows
    #: 77.5 s after such a kill instead of ~28 s (BENCHMARKS.md, "Kills at every phase of the commit cycle")
    fence_worker_transaction: bool = True


@dataclass(frozen=True)
class BusLayout:
    bus_topic: TopicSpec
    control_topic: TopicSpec
    dlq_topic: TopicSpec
    #: event name -> fully qualified Iceberg table ("namespace.table")
    routes: Mapping[str, str]
    connector_name: str = "events-iceberg-sink"
    connector_class: str = ICEBERG_SINK_CLASS
    route_field: str = "event"
    tuning: SinkTuning = SinkTuning()
    #: the catalog name the connector uses internally (not part of table names)
    catalog_name: str = "lakebus"
    #: partition spec of the ODS tables the sink auto-creates (applies at creation only)
    partition_by: str = "log_date"
    #: compacted topic recording each connector's declared target state (keyed by connector name)
    state_topic: TopicSpec = field(default_factory=lambda: TopicSpec(STATE_TOPIC, partitions=1, configs=dict(STATE_TOPIC_CONFIGS)))
    #: the connector's target state until an operator declares another (Strimzi's ``spec.state``)
    connector_state: TargetState = TargetState.RUNNING

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "connector_state", TargetState.parse(self.connector_state, where="connector_state"))
        except TargetStateError as exc:
            raise LayoutError(str(exc)) from exc
        if self.control_topic.partitions != 1:
            raise LayoutError(
                f"control topic {self.control_topic.name!r} must have exactly 1 partition "
                f"(the sink's commit coordination relies on its order), got {self.control_topic.partitions}"
            )
        names = [self.bus_topic.name, self.control_topic.name, self.dlq_topic.name, self.state_topic.name]
        if len(set(names)) != 4:
            raise LayoutError(f"bus, control, DLQ and state topics must differ, got {names}")
        if self.state_topic.configs.get("cleanup.policy") != "compact":
            raise LayoutError(
                f"state topic {self.state_topic.name!r} must have cleanup.policy=compact "
                "(the latest declaration per connector must outlive retention)"
            )
        if not self.routes:
            raise LayoutError("routes: at least one event -> table route is required")
        for event, table in self.routes.items():
            ns, _, name = table.partition(".")
            if not (_IDENT.match(event) and _IDENT.match(ns) and _IDENT.match(name)):
                raise LayoutError(f"route {event!r} -> {table!r}: expected lower-case identifiers, table as 'namespace.table'")
        if self.tuning.tasks_max is not None and self.tuning.tasks_max < 1:
            raise LayoutError(f"tuning.tasks_max must be >= 1, got {self.tuning.tasks_max}")
        if self.tasks_max > self.bus_topic.partitions:
            raise LayoutError(
                f"tuning.tasks_max={self.tuning.tasks_max} exceeds the {self.bus_topic.partitions} partition(s) "
                f"of {self.bus_topic.name!r}; extra tasks would sit idle and stall every commit"
            )

    @property
    def tasks_max(self) -> int:
        """The sink's ``tasks.max``: the declared one, else one task per bus-topic partition."""
        return self.tuning.tasks_max if self.tuning.tasks_max is not None else self.bus_topic.partitions

    @property
    def tables(self) -> list[str]:
        return sorted(set(self.routes.values()))

    @property
    def replay_ledger_topic(self) -> TopicSpec:
        """``<dlq>.replayed``: compacted, one key per replayed DLQ position (``replay_dlq`` replays each
        at most once). Derived from the DLQ topic, created by provisioning like every other topic."""
        return TopicSpec(f"{self.dlq_topic.name}.replayed", 1, self.dlq_topic.replication_factor,
                         {**_durability(self.dlq_topic), "cleanup.policy": "compact"})

    @property
    def offset_ledger_topic(self) -> TopicSpec:
        """``<bus>.ledger``: compacted, the offset ledger's verified point per bus topic."""
        return TopicSpec(f"{self.bus_topic.name}.ledger", 1, self.bus_topic.replication_factor,
                         {**_durability(self.bus_topic), "cleanup.policy": "compact"})

    @property
    def namespaces(self) -> list[str]:
        return sorted({t.split(".", 1)[0] for t in self.routes.values()})

    def with_replication(self, replication_factor: int, min_insync_replicas: int | None = None) -> BusLayout:
        """A copy whose bus, control, DLQ and state topics (and the ledgers derived from them) have
        ``replication_factor`` replicas and, when given, ``min.insync.replicas`` — a multi-broker
        cluster's durability (RF 3, min ISR 2: one broker may be lost without losing an acked record)."""
        if min_insync_replicas is not None and not 1 <= min_insync_replicas <= replication_factor:
            raise LayoutError(f"min.insync.replicas {min_insync_replicas} must be between 1 and the replication factor {replication_factor}")

        def topic(t: TopicSpec) -> TopicSpec:
            configs = dict(t.configs)
            if min_insync_replicas is not None:
                configs["min.insync.replicas"] = str(min_insync_replicas)
            return replace(t, replication_factor=replication_factor, configs=configs)

        return self._with_topics(topic)

    def _with_topics(self, change, **other) -> BusLayout:
        """A copy with ``change`` applied to each of the four declared topics (and ``other`` fields replaced)."""
        return replace(self, bus_topic=change(self.bus_topic), control_topic=change(self.control_topic),
                       dlq_topic=change(self.dlq_topic), state_topic=change(self.state_topic), **other)

    def with_suffix(self, suffix: str) -> BusLayout:
        """A copy whose topics, connector and namespace carry ``suffix`` (isolated test runs)."""
        def topic(t: TopicSpec) -> TopicSpec:
            return replace(t, name=f"{t.name}-{suffix}")

        return self._with_topics(
            topic,
            connector_name=f"{self.connector_name}-{suffix}",
            routes={e: f"{t.split('.', 1)[0]}_{suffix}.{t.split('.', 1)[1]}" for e, t in self.routes.items()},
        )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "layout") -> BusLayout:
        """Build a layout from plain data (a YAML file), refusing unknown keys by name."""
        data = dict(data)
        _check_keys(data, {f.name for f in fields(cls)}, source)
        kwargs: dict[str, Any] = {}
        for key in ("bus_topic", "control_topic", "dlq_topic", "state_topic"):
            if key not in data:
                if key == "state_topic":
                    continue  # optional: the default compacted topic
                raise LayoutError(f"{source}: {key} is required")
            spec = data.pop(key)
            _check_keys(spec, {f.name for f in fields(TopicSpec)}, f"{source}.{key}")
            kwargs[key] = TopicSpec(**{**spec, "configs": {k: str(v) for k, v in spec.get("configs", {}).items()}})
        if "tuning" in data:
            tuning = data.pop("tuning")
            _check_keys(tuning, {f.name for f in fields(SinkTuning)}, f"{source}.tuning")
            kwargs["tuning"] = SinkTuning(**tuning)
        if "routes" not in data:
            from lakebus_dagster.events import routes as registry_routes

            data["routes"] = registry_routes(data.pop("namespace", "demo"))
        return cls(**kwargs, **data)

    @classmethod
    def from_yaml(cls, path: str | Path) -> BusLayout:
        import yaml

        with open(path) as fh:
            data = yaml.safe_load(fh) or {}
        if not isinstance(data, dict):
            raise LayoutError(f"{path}: expected a mapping at the top level")
        return cls.from_mapping(data, source=str(path))

    @classmethod
    def default(cls, namespace: str = "demo", routes: Mapping[str, str] | None = None) -> BusLayout:
        """The seed's layout: ``events`` -> ``<namespace>.dwd_biz_<event>``, DLQ ``dlq-events``.

        Routes come from the event SDK's registry unless given: registering an event is what
        adds its table to the connector (one source of truth).
        """
        if routes is None:
            from lakebus_dagster.events import routes as registry_routes

            routes = registry_routes(namespace)
        return cls(
            bus_topic=TopicSpec(
                "events",
                partitions=1,
                configs={"retention.ms": str(7 * 24 * 3600 * 1000), "compression.type": "zstd"},
            ),
            control_topic=TopicSpec("iceberg-control-events", partitions=1),
            dlq_topic=TopicSpec("dlq-events", partitions=1, configs={"retention.ms": str(30 * 24 * 3600 * 1000)}),
            routes=dict(routes),
        )
