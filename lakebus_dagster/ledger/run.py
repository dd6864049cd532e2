"""One ledger run: load the state, read what is new, judge it, return the verdict and the next state.

:class:`Ledger` is what the Dagster check, the demo's waiting loop and the tests all use;
:func:`ledger_complete` is the question waiting loops ask: "is every offset up to the end of the
bus accounted for?".
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from pyiceberg.catalog import Catalog

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.kafka.clients import KafkaClients
from lakebus_dagster.kafka.reading import ConsumerFactory, end_offsets, partitions_of, watermarks
from lakebus_dagster.ledger.answers import read_in_flight
from lakebus_dagster.ledger.model import DlqRecord
from lakebus_dagster.ledger.sources import (
    committed_offsets,
    first_provenance_offsets,
    read_bus,
    read_dlq,
    read_ods,
    table_snapshots,
)
from lakebus_dagster.ledger.state import LedgerState, advance, rows_removed_since
from lakebus_dagster.ledger.store import KafkaStateStore
from lakebus_dagster.ledger.verify import LedgerVerdict, Window, verify


@dataclass
class LedgerRun:
    """The outcome of one run: the verdict, the state it leads to, and what was read."""

    verdict: LedgerVerdict
    state: LedgerState
    previous: LedgerState | None
    ods_rows_read: int
    dlq_records_read: int
    dlq_unattributed: int
    bus_records_read: int
    reverified: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.verdict.passed

    @property
    def complete(self) -> bool:
        return self.verdict.complete


class Ledger:
    """The offset ledger of one bus (see :mod:`lakebus_dagster.ledger.verify` for the rule).

    The state is loaded from the ``<bus>.ledger`` topic on the first run and then kept in memory;
    :meth:`run` with ``persist=True`` also writes it back (the Dagster check does; waiting loops
    need not).
    """

    def __init__(self, layout: BusLayout, make_consumer: ConsumerFactory, admin: AdminClient, producer: Producer,
                 catalog: Catalog, connect: ConnectClient) -> None:
        self.layout, self._make_consumer, self._catalog, self._connect = layout, make_consumer, catalog, connect
        self._admin = admin
        self.store = KafkaStateStore(make_consumer, admin, producer, layout.bus_topic.name)
        self._state: LedgerState | None = None
        self._loaded = False

    @classmethod
    def from_kafka_config(cls, layout: BusLayout, kafka_config: dict, catalog: Catalog, connect: ConnectClient) -> Ledger:
        """The ledger over a plain librdkafka config (no Dagster needed), with the same clients as the Dagster check."""
        kafka = KafkaClients(kafka_config)
        return cls(layout, kafka.consumer, kafka.admin(), kafka.producer(), catalog, connect)

    def _baseline(self, topic: str, partitions: list[int]) -> LedgerState:
        """The first state: the ledger covers each partition from its low watermark, unless the ODS
        holds rows written before provenance existed; then from the first provenance offset."""
        consumer = self._make_consumer("lakebus-ledger")
        try:
            low = {p: watermarks(consumer, topic, p)[0] for p in partitions}
            high = {p: watermarks(consumer, topic, p)[1] for p in partitions}
        finally:
            consumer.close()
        lowest, legacy = first_provenance_offsets(self._catalog, self.layout.tables, topic)
        if legacy:
            start = {p: max(low[p], lowest.get(p, high[p])) for p in partitions}
            reason = (f"{', '.join(legacy)} hold rows without provenance (written before KafkaMetadataTransform was "
                      f"added); the ledger covers each partition from its first provenance offset")
        else:
            start, reason = low, "from the low watermark of each partition"
        return LedgerState(topic=topic, verified_to=dict(start), baseline=dict(start), baseline_reason=reason)

    def run(self, *, grace_s: float = 300.0, persist: bool = False, full: bool = False) -> LedgerRun:
        """Judge everything since the verified point. ``full`` re-verifies from the baseline."""
        began = time.monotonic()
        topic, dlq_topic = self.layout.bus_topic.name, self.layout.dlq_topic.name
        if not self._loaded:  # the first run reads the state and the retired offsets at once
            self._state, retired = self.store.load_with_retired()
            self._loaded = True
        else:  # the retention may have retired more since (another job writes it)
            retired = self.store.load_retired()
        consumer = self._make_consumer("lakebus-ledger")
        try:
            partitions = partitions_of(consumer, topic)
            ends = end_offsets(consumer, topic)
            dlq_partitions = partitions_of(consumer, dlq_topic)
        finally:
            consumer.close()
        previous = self._state
        state = previous if previous is not None else self._baseline(topic, partitions)
        snapshots = table_snapshots(self._catalog, self.layout.tables)
        reverified = rows_removed_since(snapshots, state.table_marks)
        if full or reverified:
            state = LedgerState(topic=topic, verified_to=dict(state.baseline), baseline=dict(state.baseline),
                                baseline_reason=state.baseline_reason, table_marks=state.table_marks, alerted=state.alerted,
                                ever_verified=dict(state.ever_verified))
        marks = {t: max((s.timestamp_ms for s in snaps), default=0) for t, snaps in snapshots.items()}
        for p in partitions:  # a partition added to the bus since the baseline starts at its beginning
            state.verified_to.setdefault(p, 0)
            state.baseline.setdefault(p, 0)

        # read in this order: the sink's committed offsets, then its answers in flight, then (below) the
        # ODS rows. An answer committed to Iceberg between the last two reads has its rows in the ODS
        # read; one sent after the first read covers records still past the committed offsets
        committed = committed_offsets(self._connect, self.layout.connector_name, topic)
        flying = read_in_flight(self._make_consumer, self._admin, self.layout)
        windows = [Window(p, state.verified_to[p], committed.get(p, state.verified_to[p]), ends[p], flying.get(p))
                   for p in partitions]
        bus = [r for w in windows for r in read_bus(self._make_consumer, topic, w.partition, w.start, w.end)]
        fresh, dlq_next, unattributed = read_dlq(self._make_consumer, dlq_topic, dlq_partitions, state.dlq_next)
        dlq: list[DlqRecord] = list({*state.dlq_carried, *fresh})
        min_start = min((w.start for w in windows), default=0)
        ods = read_ods(self._catalog, self.layout.tables, topic, min_start)
        verdict = verify(topic, windows, bus, ods, dlq, now_ms=int(time.time() * 1000), grace_ms=int(grace_s * 1000),
                         known_claims=state.claims, retired=retired)
        new_state = advance(state, verdict, dlq, dlq_next, marks)
        self._state = new_state
        result = LedgerRun(verdict, new_state, previous, len(ods), len(fresh), unattributed, len(bus), reverified,
                           time.monotonic() - began)
        if persist:
            self.store.save(new_state)
        return result

    def mark_alerted(self, summary: str, persist: bool = True) -> None:
        """Remember the problem summary just alerted, so the same problems do not alert every run."""
        if self._state is None:
            return
        self._state.alerted = summary
        if persist:
            self.store.save(self._state)


def ledger_complete(ledger: Ledger, *, grace_s: float = 0.0) -> LedgerRun:
    """Run the ledger without persisting; ``.complete`` says whether every offset up to the end of
    every bus partition is accounted for exactly once (what waiting loops wait for)."""
    return ledger.run(grace_s=grace_s, persist=False)
