"""Recovering without losing a record: DLQ replay and poison-record remediation."""


import dagster as dg
from pydantic import Field

from lakebus_dagster import kafka as kafka_reading
from lakebus_dagster.connect import ConnectClient, TaskStatus
from lakebus_dagster.defs.alerts import AlertResource, make_alert, send_and_record
from lakebus_dagster.defs.guard import AUDITED, confirm_field, require_confirmation
from lakebus_dagster.defs.kafka_roles import OPERATIONS_TAGS
from lakebus_dagster.defs.resources import BusLayoutResource, ConnectResource, KafkaResource
from lakebus_dagster.kafka import CompactedTopic, produce_all, read_range
from lakebus_dagster.ledger.model import REPLAY_HEADER
from lakebus_dagster.ledger.requeue import requeue_items
from lakebus_dagster.monitor.dlq import HEADER_PREFIX, decode, error_headers
from lakebus_dagster.monitor.traces import RecordRef, failing_record

#: header on the poison record remediation sends to the DLQ: the Dagster run that moved it
REMEDIATED_HEADER = "lakebus.remediated.by"
#: ``__connect.errors.class.name`` of a poison record: the sink task's class, as Connect would name it
SINK_TASK_CLASS = "org.apache.iceberg.connect.IcebergSinkTask"


def _ledger_keys(kafka: KafkaResource, name: str) -> set[bytes]:
    """Every DLQ position already replayed (the keys of the compacted replay ledger)."""
    store = CompactedTopic(kafka.consumer, name, group_id="lakebus-ledger-reader", label="replay ledger",
                           servers=kafka.bootstrap_servers)
    try:
        return {m.key() for m in store.records(timeout_s=60.0)}
    except kafka_reading.TopicMissing as exc:
        raise dg.Failure(f"{exc}: the replay ledger is created by provisioning; run provision_lakebus first") from exc


#: what ``confirm`` names: the DLQ replay acts on the DLQ topic, the remediation on the connector
DLQ_CONFIRM = "the DLQ topic's name"
CONNECTOR_CONFIRM = "the connector's name"


class ReplayConfig(dg.Config):
    partition: int = 0
    from_offset: int = Field(default=0, ge=0)
    to_offset: int = Field(default=-1, description="inclusive; -1 = up to the end of the DLQ")
    error_class: str = Field(default="", description="replay only records whose exception class contains this")
    reason: str = Field(
        default="",
        description="replay only records whose reason (as the dlq_sensor and the kafka/dlq_events asset show it, "
        "e.g. \"DataException: field 'amount': expected float64, got string\") contains this",
    )
    wrap_bare_payloads: bool = Field(
        default=False,
        description="fix for producers that sent a bare payload (no Schema+JSON envelope): wrap each such record in "
        "its registered event's envelope, validated by the event SDK; records that do not validate stay in the DLQ",
    )
    confirm: str = confirm_field(DLQ_CONFIRM)


def wrap_bare_payload(value: bytes | None, encoder) -> bytes:
    """A bare ``{"event": ..., ...}`` JSON payload -> its validated envelope (raises if it is neither);
    its decimals keep the digits the producer wrote."""
    return encoder.encode_json_payload(value or b"")


@dg.op
def replay_dlq_op(context: dg.OpExecutionContext, config: ReplayConfig, layout: BusLayoutResource, operations: KafkaResource):
    """Re-produce DLQ records to the bus topic without Connect's error headers, each at most once.

    A compacted ledger topic ``<dlq>.replayed`` remembers every replayed DLQ position, so a second
    run over the same range replays nothing. The ledger is written only after the replayed records
    were delivered (at-least-once into the bus if a run dies in between, never silently skipped).
    """
    kafka = operations  # a bus-changing job: the operations principal (kafka/acls.py)
    bus = layout.layout()
    dlq, ledger = bus.dlq_topic.name, bus.replay_ledger_topic.name
    require_confirmation(context.job_name, config.confirm, dlq, DLQ_CONFIRM)
    done = _ledger_keys(kafka, ledger)
    consumer = kafka.consumer("lakebus-dlq-replay")
    try:
        low, high = kafka_reading.watermarks(consumer, dlq, config.partition)
    finally:
        consumer.close()
    end = high if config.to_offset < 0 else min(high, config.to_offset + 1)
    msgs = read_range(kafka.consumer, dlq, config.partition, max(low, config.from_offset), end)
    from lakebus_dagster.events import EnvelopeEncoder

    encoder = EnvelopeEncoder()
    picked, skipped_done, filtered, invalid = [], 0, 0, []
    for m in msgs:
        dl = decode(m.partition(), m.offset(), m.headers(), m.value(), m.key())
        ledger_key = f"{m.partition()}:{m.offset()}".encode()
        if ledger_key in done:
            skipped_done += 1
        elif (config.error_class and config.error_class not in dl.error_class) or (config.reason and config.reason not in dl.reason):
            filtered += 1
        else:
            value = m.value()
            if config.wrap_bare_payloads:
                try:
                    value = wrap_bare_payload(value, encoder)
                except Exception as exc:  # noqa: BLE001 - reported per record, the record stays in the DLQ
                    invalid.append(f"{ledger_key.decode()}: {type(exc).__name__}: {str(exc)[:200]}")
                    continue
            headers = [(k, v) for k, v in (m.headers() or []) if not k.startswith(HEADER_PREFIX)]
            headers.append((REPLAY_HEADER, f"{dlq}:{m.partition()}:{m.offset()}".encode()))
            picked.append((dl.original_topic or bus.bus_topic.name, m.key(), value, headers, ledger_key))
    producer = kafka.producer(**{"acks": "all", "enable.idempotence": True})
    produce_all(producer, [(t, k, v, h) for t, k, v, h, _ in picked])
    produce_all(producer, [(ledger, lk, context.run_id.encode(), None) for *_, lk in picked])
    context.log.info(
        f"replayed {len(picked)} DLQ record(s); {skipped_done} already replayed; {filtered} filtered out; "
        f"{len(invalid)} left in the DLQ (invalid)"
    )
    context.add_output_metadata(
        {
            "replayed": len(picked),
            "already_replayed": skipped_done,
            "filtered_out": filtered,
            "not_replayed_invalid": dg.MetadataValue.json(invalid[:100]),
            "range": f"{dlq}[{config.partition}] {max(low, config.from_offset)}..{end - 1}",
            "replayed_offsets": dg.MetadataValue.json([lk.decode() for *_, lk in picked][:200]),
        }
    )


class RemediationConfig(dg.Config):
    connector: str = Field(default="", description="empty = the bus layout's sink connector")
    wait_timeout_s: float = 90.0
    confirm: str = confirm_field(CONNECTOR_CONFIRM)


@dg.op
def remediate_poison_record_op(
    context: dg.OpExecutionContext,
    config: RemediationConfig,
    layout: BusLayoutResource,
    connect: ConnectResource,
    operations: KafkaResource,
    alerts: AlertResource,
):
    """Move a failed Iceberg sink past the record it cannot write, losing nothing.

    The sink fails its task on a record that parses but cannot be written (type mismatch, bad
    value): Connect's DLQ never sees it and a restart fails again on the same record. The task
    trace names it (topic, partition, offset). The records between the connector's committed offset
    C and the poison offset O were never committed to Iceberg, so they are re-queued to the bus
    topic; the poison record goes to the DLQ with ``__connect.errors.*`` headers like Connect's own;
    then stop → offsets = O + 1 → resume. Replay the DLQ record once its cause is fixed.
    """
    kafka = operations  # a bus-changing job: the operations principal (kafka/acls.py)
    bus = layout.layout()
    name = config.connector or bus.connector_name
    require_confirmation(context.job_name, config.confirm, name, CONNECTOR_CONFIRM)
    with connect.client() as client:
        task, record = _failing_task(client, name)
        topic, partition, poison = record.topic, record.partition, record.offset
        committed = _committed_offset(client, name, topic, partition)
        client.stop(name)
        client.wait_for_state(name, {"STOPPED"}, timeout=config.wait_timeout_s, require_tasks=False)
        msgs = read_range(kafka.consumer, topic, partition, committed, poison + 1)
        if not msgs or msgs[-1].offset() != poison:
            raise dg.Failure(f"{topic}[{partition}]@{poison}: the failing record could not be read back; connector left STOPPED")
        bad, requeue = msgs[-1], requeue_items(msgs[:-1])
        error_class, error_message = poison_error(task.trace)
        headers = [*(bad.headers() or []), *error_headers(topic, partition, poison, connector=name, task_id=task.id,
                                                          stage="TASK_PUT", error_class=error_class,
                                                          error_message=error_message, failing_class=SINK_TASK_CLASS),
                   (REMEDIATED_HEADER, context.run_id.encode())]
        producer = kafka.producer(**{"acks": "all", "enable.idempotence": True})
        dlq_partition, dlq_offset = produce_all(producer, [(bus.dlq_topic.name, bad.key(), bad.value(), headers), *requeue])[0]
        client.patch_offsets(name, [{"partition": {"kafka_topic": topic, "kafka_partition": partition}, "offset": {"kafka_offset": poison + 1}}])
        client.resume(name)
        after = client.wait_for_state(name, {"RUNNING"}, timeout=config.wait_timeout_s)
    dlq_position = f"{bus.dlq_topic.name}[{dlq_partition}]@{dlq_offset}"
    error = f"{error_class}: {error_message}"
    context.log.info(f"{name}: moved {record} to {dlq_position}; re-queued {len(requeue)} uncommitted record(s)")
    send_and_record(_quarantine_alert(name, record, after.state, bus.dlq_topic.name, dlq_partition, dlq_offset, error,
                                      len(requeue)), alerts, context)
    preview = (bad.value() or b"")[:300].decode("utf-8", errors="replace")
    context.add_output_metadata(
        {
            "skipped_record": str(record),
            "sent_to_dlq": dlq_position,
            "requeued_uncommitted": len(requeue),
            "committed_offset_before": committed,
            "error": error[:500],
            "value_preview": dg.MetadataValue.md(f"```\n{preview}\n```"),
            "state_after": after.describe(),
        }
    )


def _failing_task(client: ConnectClient, name: str) -> tuple[TaskStatus, RecordRef]:
    """The first FAILED task whose trace names the record it could not convert; a Failure otherwise."""
    status = client.status(name)
    named = [(t, r) for t in status.tasks if t.state == "FAILED" and (r := failing_record(t.trace)) is not None]
    if not named:
        raise dg.Failure(
            f"connector {name!r}: no FAILED task names a record it could not convert (states: {status.describe()}); "
            "nothing to remediate"
        )
    return named[0]


def _committed_offset(client: ConnectClient, name: str, topic: str, partition: int) -> int:
    """The sink's committed offset of one partition (0 when it never committed one)."""
    return {
        (o["partition"]["kafka_topic"], o["partition"]["kafka_partition"]): o["offset"]["kafka_offset"]
        for o in client.get_offsets(name)
    }.get((topic, partition), 0)


def _quarantine_alert(name: str, record: RecordRef, state: str, dlq: str, dlq_partition: int, dlq_offset: int,
                      error: str, requeued: int) -> dict:
    dlq_position = f"{dlq}[{dlq_partition}]@{dlq_offset}"
    return make_alert(
        "quarantined",
        f"{name}: poison record {record} moved to {dlq_position}; connector {state}",
        [f"error: {error}"[:600],
         f"re-queued {requeued} uncommitted record(s) before it; nothing lost.",
         f"to replay it once the producer or table is fixed: launch replay_dlq with partition={dlq_partition}, "
         f"from_offset={dlq_offset}, to_offset={dlq_offset}, confirm={dlq}"],
        key=f"quarantine:{record}",
    )


def _causes(trace_lines: list[str]) -> list[str]:
    return [ln.strip()[len("Caused by: "):] for ln in trace_lines if ln.strip().startswith("Caused by: ")]


def _converting_line(trace_lines: list[str]) -> str:
    """The sink's own exception line: ``<class>: An error occurred converting record, topic: ...``."""
    line = next((ln.strip() for ln in trace_lines if "An error occurred converting record" in ln), trace_lines[0].strip())
    return line[len("Caused by: "):] if line.startswith("Caused by: ") else line


def poison_error(trace: str) -> tuple[str, str]:
    """(exception class, message) for the DLQ headers of a record the sink could not write: the
    sink's DataException naming the record, with the root cause appended (e.g. NumberFormatException)."""
    lines = trace.strip().splitlines()
    cls, _, message = _converting_line(lines).partition(": ")
    causes = _causes(lines)
    if causes and causes[-1] not in message:
        message = f"{message} | root cause: {causes[-1]}"
    return cls.strip(), message.strip()


@dg.job(description="Re-produce DLQ records (offset range / error class) to the bus topic, each at most once; needs "
        "config.confirm = the DLQ topic's name.", tags={"domain": "monitoring", **AUDITED, **OPERATIONS_TAGS})
def replay_dlq():
    replay_dlq_op()


@dg.job(description="Skip the record a failed Iceberg sink task cannot write: DLQ it, re-queue uncommitted records, move offsets; "
        "needs config.confirm = the connector's name.", tags={"domain": "monitoring", **AUDITED, **OPERATIONS_TAGS})
def remediate_poison_record():
    remediate_poison_record_op()
