"""A re-read on the running Debezium source — re-sync since T (``resync_captured_table``) or a full
re-snapshot (``resnapshot_captured_table``) — started and followed by a run.

Start: the source must be RUNNING with no re-read under way (``incremental_snapshot_*`` in its
offset); the rows to expect are counted in the database (a read-only transaction as the capture
role: lakebus never writes there); each change topic's end is noted; then the ``execute-snapshot``
signal goes to the capture's Kafka signal channel.

Follow: every second the change topics are read from the noted ends and their ``op='r'`` events
counted — once the initial snapshot is done, each is a re-read row — against the rows expected;
the connector's offset tells whether Debezium still holds a snapshot window. Each change is a log
line and an observation of the table's current-state asset (``resync_progress``), so the UI shows
the re-read moving while it runs; the run's metadata has the final count, the samples and whether
it finished. A run that reaches its deadline leaves the re-read running in the connector
(``stop_captured_table_resync`` cancels it).
"""

from __future__ import annotations

import json
import time
from contextlib import closing
from typing import Any

import dagster as dg

from lakebus_dagster.cdc.capture import CaptureError, CaptureSpec
from lakebus_dagster.cdc.resync import reread_ops, snapshot_state
from lakebus_dagster.defs.asset_keys import cdc_current_key
from lakebus_dagster.defs.resources import KafkaResource


def _expected_rows(spec: CaptureSpec, tables: list[str], condition: str | None) -> dict[str, int]:
    """The rows each table holds (matching ``condition``) now, read in a read-only transaction."""
    from psycopg2 import sql

    from lakebus_dagster.cdc.database import connect

    out = {}
    with closing(connect(spec)) as conn, conn.cursor() as cur:
        cur.execute("SET TRANSACTION READ ONLY")
        for table in tables:
            query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(spec.schema, table))
            cur.execute(query + sql.SQL(f" WHERE {condition}") if condition else query)
            out[table] = int(cur.fetchone()[0])
        conn.rollback()
    return out


def _ends(kafka: KafkaResource, topics: list[str]) -> dict[str, dict[int, int]]:
    from lakebus_dagster.kafka import end_offsets

    consumer = kafka.consumer("lakebus-cdc-reread")
    try:
        return {topic: end_offsets(consumer, topic) for topic in topics}
    finally:
        consumer.close()


def start_reread(context, spec: CaptureSpec, client, kafka: KafkaResource, tables: list[str],
                 signal: tuple[str, str], condition: str | None) -> dict[str, Any]:
    """Check the source, count what to expect, note the topics' ends, send ``signal``; the state
    :func:`follow_reread` goes on from."""
    from lakebus_dagster.kafka.writing import produce_all

    status = client.status(spec.source_name)
    if status.state != "RUNNING" or any(t.state != "RUNNING" for t in status.tasks):
        raise dg.Failure(f"connector {spec.source_name!r} is {status.describe()}: a re-read runs on a RUNNING source; "
                         "nothing was sent", allow_retries=False)
    if snapshot_state(client.get_offsets(spec.source_name)):
        raise dg.Failure(f"connector {spec.source_name!r} is already re-reading (incremental_snapshot_* in its offset); "
                         "wait for it or cancel it with stop_captured_table_resync", allow_retries=False)
    try:
        expected = _expected_rows(spec, tables, condition)
    except CaptureError as exc:
        raise dg.Failure(str(exc), allow_retries=False) from exc
    positions = _ends(kafka, [spec.topic(t) for t in tables])
    key, value = signal
    ((partition, offset),) = produce_all(kafka.producer(), [(spec.signal_topic.name, key.encode(), value.encode(), [])])
    where = f" WHERE {condition}" if condition else " (whole)"
    context.log.info(f"{spec.source_name}: execute-snapshot of {', '.join(spec.qualified(t) for t in tables)}{where} sent "
                     f"({spec.signal_topic.name}[{partition}]@{offset}); {sum(expected.values())} row(s) to re-read")
    return {"tables": tables, "expected": expected, "positions": positions, "counted": dict.fromkeys(tables, 0),
            "signal": json.loads(value), "signal_position": f"{spec.signal_topic.name}[{partition}]@{offset}"}


def _count_new(kafka: KafkaResource, spec: CaptureSpec, state: dict[str, Any]) -> None:
    """Count the ``op='r'`` events past each topic's position, and move the positions past them."""
    from lakebus_dagster.kafka import consume_ranges, end_offsets

    consumer = kafka.consumer("lakebus-cdc-reread", **{"enable.partition.eof": True})
    try:
        for table in state["tables"]:
            topic, positions = spec.topic(table), state["positions"][spec.topic(table)]
            ends = end_offsets(consumer, topic)
            starts = {p: positions.get(p, 0) for p in ends if positions.get(p, 0) < ends[p]}
            msgs, _ = consume_ranges(consumer, topic, starts, ends, deadline=time.monotonic() + 10)
            state["counted"][table] += reread_ops(m.value() for m in msgs)["r"]
            for m in msgs:  # past the last record read, never past the end: read_committed stops at open transactions
                positions[m.partition()] = max(positions.get(m.partition(), 0), m.offset() + 1)
    finally:
        consumer.close()


def follow_reread(context, spec: CaptureSpec, client, kafka: KafkaResource, state: dict[str, Any],
                  timeout_s: float) -> dict[str, Any]:
    """Follow the re-read until every expected row came again and no snapshot window is open (or the
    deadline); its progress as log lines and observations while it runs; the run's metadata."""
    started, seen_window, samples, last = time.monotonic(), False, [], None
    expected = sum(state["expected"].values())
    while True:
        _count_new(kafka, spec, state)
        window = snapshot_state(client.get_offsets(spec.source_name))
        seen_window = seen_window or bool(window)
        counted, elapsed = sum(state["counted"].values()), round(time.monotonic() - started, 1)
        if counted != last:
            last = counted
            samples.append([elapsed, counted])
            context.log.info(f"{spec.source_name}: re-read {counted} of {expected} row(s) "
                             f"({100 * counted / max(expected, 1):.0f}%) after {elapsed:.0f}s{'; window open' if window else ''}")
            for table in state["tables"]:
                context.log_event(dg.AssetObservation(asset_key=cdc_current_key(spec.schema, table), metadata={
                    "resync_progress": f"{state['counted'][table]} of {state['expected'][table]} row(s) re-read",
                    "resync_rows_reread": state["counted"][table], "resync_rows_expected": state["expected"][table]}))
        finished = not window and (counted >= expected or seen_window)
        if finished or elapsed > timeout_s:
            break
        time.sleep(1.0)
    if not finished:
        context.log.warning(f"{spec.source_name}: still re-reading after {timeout_s:.0f}s ({last} of {expected}); it goes on "
                            "in the connector (stop_captured_table_resync cancels it)")
    return {"tables": dg.MetadataValue.json(state["tables"]), "signal": dg.MetadataValue.json(state["signal"]),
            "signal_position": state["signal_position"], "rows_expected": dg.MetadataValue.json(state["expected"]),
            "rows_reread": dg.MetadataValue.json(state["counted"]), "progress": dg.MetadataValue.json(samples),
            "finished": finished, "seconds": round(time.monotonic() - started, 1)}

