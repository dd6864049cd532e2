"""Read and write declared connector target states in the layout's compacted state topic.

The pure part (state names, record format, latest-wins fold) is
:mod:`lakebus_dagster.bus.target_state`; this module is the Kafka side, on plain
:class:`~lakebus_dagster.kafka.KafkaClients` (provisioning, the connector jobs and the status sensor
all read it, so it lives below the Dagster domains; it sits with provisioning because it creates the
topic with the same reconciler as the rest of the bus). Every read is one bounded
pass over the topic: the sensor calls :func:`declared_states` on each tick, so it must never hang
on an unreachable broker — it raises :class:`TargetStateStoreError` naming the topic instead. The
reading and writing themselves are the shared compacted-topic store,
:class:`lakebus_dagster.kafka.CompactedTopic`.
"""

from __future__ import annotations

from collections.abc import Sequence

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.bus.target_state import DeclaredState, StateRecord, TargetState, TargetStateError, fold_latest, resolve
from lakebus_dagster.kafka import CompactedTopic, CompactedTopicError, KafkaClients, TopicMissing
from lakebus_dagster.provision.outcome import Outcome
from lakebus_dagster.provision.topics import reconcile_topics

#: a tick-sized bound for one read of the state topic (a handful of records)
READ_TIMEOUT_S = 10.0
WRITE_TIMEOUT_S = 30.0
READER_GROUP = "lakebus-connector-states-reader"


class TargetStateStoreError(RuntimeError):
    """The state topic could not be read or written; the message names the topic and the cause."""


def _store(kafka: KafkaClients, topic: str) -> CompactedTopic:
    return CompactedTopic(kafka.consumer, topic, group_id=READER_GROUP, label="state topic", servers=kafka.bootstrap_servers)


def read_declared(kafka: KafkaClients, topic: str, *, timeout_s: float = READ_TIMEOUT_S) -> dict[str, DeclaredState]:
    """Every connector's latest declaration in ``topic`` (one pass up to the end offsets seen at start).

    A missing topic means nothing was declared yet (provisioning creates it; so does the first
    declaration). Never commits offsets: the group id is only a label the client requires.
    Raises :class:`TargetStateStoreError` (naming the topic) when Kafka does not answer in time and
    when the latest record of a connector is malformed (naming partition and offset).
    """
    try:
        messages = _store(kafka, topic).records(timeout_s)
    except TopicMissing:
        return {}
    except CompactedTopicError as exc:  # one error type for callers: the store cannot be read
        raise TargetStateStoreError(str(exc)) from exc
    records: list[StateRecord] = []
    for msg in messages:
        where = f"state topic {topic!r}[{msg.partition()}]@{msg.offset()}"
        key = msg.key()
        if key is None:
            raise TargetStateStoreError(f"{where}: a record without a key (expected the connector name)")
        records.append(StateRecord(key.decode("utf-8", errors="replace"), msg.value(), where))
    # one partition in the layout; with more, per-key order still holds (a key has one partition)
    try:
        return fold_latest(records)
    except TargetStateError as exc:
        raise TargetStateStoreError(str(exc)) from exc


def ensure_state_topic(kafka: KafkaClients, layout: BusLayout) -> Outcome:
    """Create the state topic if it is missing (a declaration may come before the next provisioning run)."""
    (outcome,) = reconcile_topics(kafka.admin(), [layout.state_topic], control_topic=layout.control_topic.name)
    return outcome


def record_declared(kafka: KafkaClients, layout: BusLayout, declared: DeclaredState, *, timeout_s: float = WRITE_TIMEOUT_S) -> Outcome:
    """Append ``declared`` to the state topic (acks=all, idempotent) and wait for the broker's ack.

    Returns the state topic's reconcile outcome (``created`` the first time). Raises if the write
    is not acknowledged in time; the unsent record is purged so it cannot land after the error.
    """
    outcome = ensure_state_topic(kafka, layout)
    producer = kafka.producer(**{"message.timeout.ms": int(timeout_s * 1000)})
    try:
        _store(kafka, layout.state_topic.name).put(
            producer, declared.connector.encode(), declared.to_json(), timeout_s=timeout_s,
            what=f"declaring connector {declared.connector!r} {declared.state.value}",
        )
    except CompactedTopicError as exc:
        raise TargetStateStoreError(str(exc)) from exc
    return outcome


def declared_state(kafka: KafkaClients, layout: BusLayout, connector: str) -> tuple[TargetState, DeclaredState | None]:
    """One connector's declared state and its record (None when only the layout's default applies)."""
    record = read_declared(kafka, layout.state_topic.name).get(connector)
    return (record.state if record else layout.connector_state), record


def declared_states(kafka: KafkaClients, layout: BusLayout, extra: Sequence[str] = ()) -> dict[str, str]:
    """Connect state names (``RUNNING`` / ``PAUSED`` / ``STOPPED``) for every connector lakebus manages.

    That is ``layout.connector_name`` and the ``extra`` connectors (change capture's source and
    sink); the layout's default (``connector_state``) applies when no declaration was recorded. One bounded read of the compacted state topic
    (:data:`READ_TIMEOUT_S`); raises :class:`TargetStateStoreError` naming the topic when Kafka is
    unreachable, so a caller never mistakes "could not read" for "nothing declared".
    """
    recorded = read_declared(kafka, layout.state_topic.name)
    resolved = resolve([layout.connector_name, *extra], recorded, layout.connector_state)
    return {name: state.connect_state for name, state in resolved.items()}
