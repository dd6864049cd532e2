"""A sink task whose predecessor died inside its answer to a commit cycle starts at once.

A task answers each commit cycle in one Kafka transaction on its worker transactional id: its
``DataWritten`` events and the source offsets they cover. A worker killed inside that transaction
leaves those offsets pending in the sink's consumer group, and the task's successor cannot read its
committed offsets until the transaction ends. Without lakebus's fence the only end is the
transaction's timeout (60 s by default), so the first rows after such a kill came 77.5 s later on a
busy machine (BENCHMARKS.md, "Kills at every phase of the commit cycle"). lakebus's task fences its
worker transactional id when it starts, which aborts the predecessor's transaction at once.

The predecessor here is made on purpose, so the window is hit every time: with the connector
stopped, a producer on task 0's worker transactional id opens a transaction holding offsets for the
sink's group and is left there, as a killed worker leaves it, with a timeout of 120 s. The connector
is resumed; its rows must come well inside that timeout. ``LAKEBUS_FAILOVER_SWITCH_OFF=fence`` runs
the sink without the fence: the test then fails, waiting.
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from dataclasses import replace

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from lakebus_dagster.events import Bet
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.stack import process
from lakebus_dagster_tests.failover_kit import switched_off_remedies
from lakebus_dagster_tests.integration.helpers import produce, provisioned_bus, wait_for
from lakebus_dagster_tests.lake_counts import committed_rows

pytestmark = pytest.mark.integration

#: the predecessor's transaction timeout: the successor waits this long without the fence
PENDING_TIMEOUT_S = 120
#: resume -> the new events in the table, with the fence (measured ~10 s on a running stack; the
#: slack is for a busy machine): half the predecessor's timeout, so a successor that waited for it fails
FIRST_ROWS_BOUND_S = 60


def bet(i: int) -> Bet:
    return Bet(category="biz", event="bet", log_date="2025-11-27", hour="10", plat_id=1, app_id=2, ts=1764237600000 + i,
               schema_version=1, user_id=100 + i % 7, order_id=f"fence-{i}", amount=float(i), currency="BRL", game_id=1)


def stable_id(connector: str, control_topic: str) -> str:
    """lakebus's connector's stable transactional-id part (``StableIcebergSinkConnector.stableId``:
    Java's name-based UUID, version 3, of the connector's name and control topic)."""
    digest = hashlib.md5(f"lakebus-iceberg-sink\n{connector}\n{control_topic}".encode()).digest()
    return str(uuid.UUID(bytes=digest, version=3))


def test_a_task_whose_predecessor_died_mid_answer_starts_without_waiting_out_its_transaction(stack, run_id):
    switched_off = switched_off_remedies(os.environ.get("LAKEBUS_FAILOVER_SWITCH_OFF"))
    with provisioned_bus(stack, run_id) as (resources, layout, client):
        if "fence" in switched_off:  # the comparison: the same connector without the fence
            from lakebus_dagster.bus.desired import sink_connector_config

            off = replace(layout, tuning=replace(layout.tuning, fence_worker_transaction=False))
            client.put_config(layout.connector_name, sink_connector_config(off, stack.lake))
        bus, table, connector = layout.bus_topic.name, layout.routes["bet"], layout.connector_name
        catalog = load_catalog(stack)
        produce(resources, bus, [bet(i) for i in range(20)])
        wait_for(lambda: committed_rows(catalog, table) >= 20, f"the first 20 bets in {table}", 120)
        client.stop(connector)
        client.wait_for_state(connector, ["STOPPED"], timeout=60, require_tasks=False)

        # the predecessor: task 0's worker transactional id, an answer's offsets left pending
        transactional_id = f"worker-txn-{stable_id(connector, layout.control_topic.name)}-0"
        kafka = stack.kafka.client_config()
        predecessor = Producer({**kafka, "transactional.id": transactional_id,
                                "transaction.timeout.ms": PENDING_TIMEOUT_S * 1000})
        predecessor.init_transactions(30)
        predecessor.begin_transaction()
        group = Consumer({**kafka, "group.id": f"connect-{connector}", "enable.auto.commit": False})
        try:
            committed = group.committed([TopicPartition(bus, p) for p in range(layout.bus_topic.partitions)], timeout=30)
            predecessor.send_offsets_to_transaction(
                [TopicPartition(tp.topic, tp.partition, max(tp.offset, 0) + 1) for tp in committed],
                group.consumer_group_metadata(), 30)
        finally:
            group.close()
        # like a worker killed here: the transaction is neither committed nor aborted

        produce(resources, bus, [bet(i) for i in range(20, 40)])
        resumed = time.monotonic()
        client.resume(connector)
        wait_for(lambda: committed_rows(catalog, table) >= 40, f"the next 20 bets in {table} after the resume",
                 FIRST_ROWS_BOUND_S, interval=0.5)
        took = time.monotonic() - resumed
        print(f"[fence] resume -> 40 rows in {took:.1f} s (predecessor's transaction timeout {PENDING_TIMEOUT_S} s)", flush=True)

        # the predecessor was fenced: its transaction can no longer commit
        with pytest.raises(KafkaException):
            predecessor.commit_transaction(30)
        logs = [path for path in (process.log_file(stack, name) for name in ("connect", "connect-2")) if path.exists()]
        assert any(f"fenced transactional id {transactional_id}" in path.read_text(errors="replace") for path in logs), \
            f"no 'fenced transactional id {transactional_id}' in {[str(p) for p in logs]}"
        rows = catalog.load_table(table).scan(selected_fields=("order_id",)).to_arrow().column("order_id").to_pylist()
        assert sorted(rows) == sorted(f"fence-{i}" for i in range(40)), "every bet once"
