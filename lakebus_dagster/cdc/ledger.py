"""The offset ledger over change capture (issue 30): every record of a change topic is in exactly
one place — one row of its change table (the sink's provenance columns name it) or one record of
the capture's DLQ (Connect's error headers name it) — with the events path's rule and code
(:mod:`lakebus_dagster.ledger`), one ledger per change topic.

Incremental like the events ledger: each change topic's state (its verified point, the DLQ records
carried, the problems last alerted) lives in the compacted topic ``<change topic>.ledger``
(:meth:`lakebus_dagster.cdc.capture.CaptureSpec.ledger_topic`, created by ``provision_change_capture``),
so a run reads only what arrived since the last verified point; a change table that lost rows since
(a delete or overwrite snapshot) is judged again from the baseline. Transaction markers of the
exactly-once source are no records and need no place.

**In flight is pending, not lost.** The sink commits a record's Kafka offset a commit cycle before
its Iceberg commit makes the row visible, so a record below the committed offset and in no place
may still be on its way for up to one commit interval plus one commit timeout. The events path's
runs after a stall judge with twice that (:func:`lakebus_dagster.monitor.stall.settled_after_seconds`);
every change-ledger run does the same at least (:func:`in_flight_grace_s`), whatever grace it was
given: a waiting loop's or an operator's ``grace_s=0`` must not call the records of the current
commit cycle lost (and alert on them).
"""

from __future__ import annotations

from dataclasses import dataclass

from lakebus_dagster.bus.layout import TopicSpec
from lakebus_dagster.cdc.capture import CaptureSpec
from lakebus_dagster.monitor.stall import settled_after_seconds


@dataclass(frozen=True)
class ChangeTopicLayout:
    """What :class:`~lakebus_dagster.ledger.run.Ledger` reads of a bus layout, for one change topic."""

    bus_topic: TopicSpec
    dlq_topic: TopicSpec
    tables: tuple[str, ...]
    connector_name: str
    #: the capture sink's control topic: its answers in flight there are pending, not lost
    control_topic: TopicSpec
    #: where the ledger keeps this change topic's state (``<change topic>.ledger``, the store's own naming)
    offset_ledger_topic: TopicSpec


def change_topic_layouts(spec: CaptureSpec) -> dict[str, ChangeTopicLayout]:
    """Captured table -> the ledger's view of its change topic, change table, the DLQ and the sink."""
    topics = {t.name: t for t in spec.change_topics()}
    return {table: ChangeTopicLayout(topics[spec.topic(table)], spec.dlq_topic, (spec.change_table(table),), spec.sink_name,
                                     spec.control_topic, spec.ledger_topic(table))
            for table in spec.tables}


def in_flight_grace_s(spec: CaptureSpec, grace_s: float) -> float:
    """The grace a change-ledger run judges with: ``grace_s``, but never less than the capture sink's
    settling time (two commit cycles: :func:`~lakebus_dagster.monitor.stall.settled_after_seconds`)."""
    return max(grace_s, settled_after_seconds(spec.commit_interval_ms, spec.commit_timeout_ms))


def change_ledgers(spec: CaptureSpec, kafka_config: dict, catalog, connect) -> dict:
    """One :class:`~lakebus_dagster.ledger.run.Ledger` per change topic: ``{table: Ledger}`` (each loads its
    state from ``<change topic>.ledger`` on its first run)."""
    from lakebus_dagster.ledger.run import Ledger

    return {table: Ledger.from_kafka_config(layout, kafka_config, catalog, connect)
            for table, layout in change_topic_layouts(spec).items()}


def run_change_ledgers(spec: CaptureSpec, kafka_config: dict, catalog, connect, grace_s: float) -> dict:
    """One full, unpersisted ledger run per change topic (from each one's baseline, the state left as it
    was): ``{table: LedgerRun}`` — what a test or a waiting loop asks (``grace_s`` floored by
    :func:`in_flight_grace_s`)."""
    return {table: ledger.run(grace_s=in_flight_grace_s(spec, grace_s), persist=False, full=True)
            for table, ledger in change_ledgers(spec, kafka_config, catalog, connect).items()}
