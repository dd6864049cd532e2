"""Ensure the bus topics exist with the declared partitions and configs (confluent-kafka admin API)."""

from __future__ import annotations

import time

from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from lakebus_dagster.bus.layout import TopicSpec
from lakebus_dagster.provision.outcome import Action, Outcome, ProvisioningError

TIMEOUT_S = 30.0


@dataclass(frozen=True)
class LiveTopic:
    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str]


def describe_topics(admin: AdminClient, names: Sequence[str]) -> tuple[int, dict[str, LiveTopic]]:
    """Broker count and the live state of those ``names`` that exist."""
    md = admin.list_topics(timeout=TIMEOUT_S)
    present = [n for n in names if n in md.topics and md.topics[n].error is None]
    configs: dict[str, dict[str, str]] = {}
    if present:
        futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, n) for n in present])
        for resource, fut in futures.items():
            entries = fut.result(timeout=TIMEOUT_S)
            configs[resource.name] = {k: e.value for k, e in entries.items() if e.value is not None}
    live = {}
    for n in present:
        parts = md.topics[n].partitions
        rf = max((len(p.replicas) for p in parts.values()), default=0)
        live[n] = LiveTopic(n, len(parts), rf, configs.get(n, {}))
    return len(md.brokers), live


def check_topics(specs: Sequence[TopicSpec], brokers: int, live: dict[str, LiveTopic], control_topic: str) -> None:
    """Refuse, before any change, what provisioning must not paper over: a replication factor above
    the live broker count, a topic declared with fewer partitions than it has (no shrinking), a
    control topic with more than one partition."""
    problems = []
    for spec in specs:
        if spec.replication_factor > brokers:
            problems.append(
                f"topic {spec.name!r}: replication_factor {spec.replication_factor} exceeds the {brokers} broker(s) of the cluster"
            )
        current = live.get(spec.name)
        if current is not None and spec.partitions < current.partitions and spec.name != control_topic:
            problems.append(
                f"topic {spec.name!r} has {current.partitions} partitions live, the layout declares {spec.partitions}: "
                "Kafka cannot remove partitions, so provisioning never shrinks a topic. Declare "
                f"partitions >= {current.partitions}, or move the bus to a new topic"
            )
        if spec.name == control_topic and current is not None and current.partitions != 1:
            problems.append(
                f"control topic {spec.name!r} exists with {current.partitions} partitions; the Iceberg sink's commit "
                "coordination needs exactly 1. Partitions cannot be removed: delete and recreate the topic while the "
                "connector is stopped, or point the layout at a new control topic"
            )
    if problems:
        raise ProvisioningError("; ".join(problems))


def reconcile_topics(
    admin: AdminClient,
    specs: Sequence[TopicSpec],
    *,
    control_topic: str,
    apply_config_changes: bool = False,
) -> list[Outcome]:
    brokers, live = describe_topics(admin, [s.name for s in specs])
    check_topics(specs, brokers, live, control_topic)
    outcomes = []
    for spec in specs:
        current = live.get(spec.name)
        if current is None:
            outcomes.append(_create(admin, spec))
        else:
            outcomes.append(_update(admin, spec, current, apply_config_changes))
    return outcomes


def _create(admin: AdminClient, spec: TopicSpec) -> Outcome:
    new = NewTopic(spec.name, num_partitions=spec.partitions, replication_factor=spec.replication_factor, config=dict(spec.configs))
    try:
        admin.create_topics([new], operation_timeout=TIMEOUT_S)[spec.name].result(timeout=TIMEOUT_S)
    except KafkaException as exc:
        raise ProvisioningError(f"topic {spec.name!r}: create failed: {exc.args[0]}") from exc
    cfg = ", ".join(f"{k}={v}" for k, v in sorted(spec.configs.items())) or "broker defaults"
    return Outcome("topic", spec.name, Action.CREATED, f"{spec.partitions} partition(s), RF {spec.replication_factor}, {cfg}")


def _wait_for_partitions(admin: AdminClient, topic: str, partitions: int) -> None:
    """Until the brokers' metadata shows ``partitions``: the controller has answered, but a broker's
    metadata can lag a moment behind it, and what runs next (the connector's ``tasks.max``, a rerun
    of provisioning that would otherwise try to add the partitions again) reads that metadata."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        md = admin.list_topics(topic, timeout=5).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) >= partitions:
            return
        if time.monotonic() > deadline:
            seen = len(md.partitions) if md is not None else 0
            raise ProvisioningError(f"topic {topic!r}: {partitions} partitions created, but the metadata still shows "
                                    f"{seen} after {TIMEOUT_S:.0f}s")
        time.sleep(0.2)


def _update(admin: AdminClient, spec: TopicSpec, current: LiveTopic, apply_config_changes: bool) -> Outcome:
    changes, drift = [], []
    if spec.partitions > current.partitions:
        try:
            admin.create_partitions([NewPartitions(spec.name, spec.partitions)], operation_timeout=TIMEOUT_S)[
                spec.name
            ].result(timeout=TIMEOUT_S)
        except KafkaException as exc:
            raise ProvisioningError(f"topic {spec.name!r}: increasing partitions failed: {exc.args[0]}") from exc
        _wait_for_partitions(admin, spec.name, spec.partitions)
        changes.append(f"partitions {current.partitions} → {spec.partitions}")
    if spec.replication_factor != current.replication_factor:
        drift.append(f"replication factor {current.replication_factor}, layout declares {spec.replication_factor}")
    differing = {k: (current.configs.get(k), v) for k, v in spec.configs.items() if current.configs.get(k) != v}
    if differing and apply_config_changes:
        resource = ConfigResource(
            ResourceType.TOPIC,
            spec.name,
            incremental_configs=[ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, (_, v) in differing.items()],
        )
        admin.incremental_alter_configs([resource])[resource].result(timeout=TIMEOUT_S)
        changes += [f"{k}: {old} → {new}" for k, (old, new) in sorted(differing.items())]
    elif differing:
        drift += [f"{k} is {old}, layout declares {new}" for k, (old, new) in sorted(differing.items())]
    if changes:
        return Outcome("topic", spec.name, Action.UPDATED, "; ".join(changes + drift), changes=tuple(changes))
    if drift:
        return Outcome("topic", spec.name, Action.DRIFT, "; ".join(drift))
    return Outcome("topic", spec.name, Action.UNCHANGED, f"{current.partitions} partition(s), RF {current.replication_factor}")
