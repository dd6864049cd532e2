"""The offset ledger over change capture (issue 30): every record of a change topic is in exactly
one place — one row of its change table (the sink's provenance columns name it) or one record of
the capture's DLQ (Connect's error headers name it) — with the events path's rule and code
(:mod:`lakebus_dagster.ledger`), one ledger per change topic.

The events ledger persists its verified point in ``<bus>.ledger``; a capture declares no such topic
yet, so this one judges each change topic whole on every run (from its low watermark: what the
topic still holds). Transaction markers of the exactly-once source are no records and need no place.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakebus_dagster.bus.layout import TopicSpec
from lakebus_dagster.cdc.capture import CaptureSpec


@dataclass(frozen=True)
class ChangeTopicLayout:
    """What :class:`~lakebus_dagster.ledger.run.Ledger` reads of a bus layout, for one change topic."""

    bus_topic: TopicSpec
    dlq_topic: TopicSpec
    tables: tuple[str, ...]
    connector_name: str


def change_topic_layouts(spec: CaptureSpec) -> dict[str, ChangeTopicLayout]:
    """Captured table -> the ledger's view of its change topic, change table, the DLQ and the sink."""
    topics = {t.name: t for t in spec.change_topics()}
    return {table: ChangeTopicLayout(topics[spec.topic(table)], spec.dlq_topic, (spec.change_table(table),), spec.sink_name)
            for table in spec.tables}


def run_change_ledgers(spec: CaptureSpec, kafka_config: dict, catalog, connect, grace_s: float) -> dict:
    """One full, unpersisted ledger run per change topic: ``{table: LedgerRun}``."""
    from lakebus_dagster.ledger.run import Ledger

    return {table: Ledger.from_kafka_config(layout, kafka_config, catalog, connect).run(grace_s=grace_s, persist=False)
            for table, layout in change_topic_layouts(spec).items()}
