"""``provision_change_capture``: the database (checks, publication) → the typed change tables → the
CDC topics and the two connectors (Debezium source, Iceberg change-table sink), each step a
reconciler: a second run reports every object ``unchanged`` and restarts nothing.

The connectors go through the declared connector specs' own path
(:func:`lakebus_dagster.provision.specs.reconcile_specs`: topics created explicitly, validate →
diff → PUT only on a difference → the declared target state), with the bus's ownership markers.

``resync_captured_table`` / ``resnapshot_captured_table`` / ``stop_captured_table_resync``: re-read a
table's rows since a time, or whole tables, on the running connector (:mod:`lakebus_dagster.cdc.resync`,
followed by :mod:`lakebus_dagster.defs.cdc.reread`), and cancel it.
"""

import json

import dagster as dg
from pydantic import Field

from lakebus_dagster.cdc.capture import CaptureError, CaptureSpec
from lakebus_dagster.cdc.database import describe_slot, prepare_database
from lakebus_dagster.cdc.tables import reconcile_change_tables, reconcile_current_tables
from lakebus_dagster.connect import ConnectUnavailable
from lakebus_dagster.defs.cdc.added import added_tables, snapshot_added_tables
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.guard import AUDITED, confirm_field, require_confirmation
from lakebus_dagster.defs.provisioning.jobs import _report
from lakebus_dagster.defs.kafka_roles import OPERATIONS_TAGS
from lakebus_dagster.defs.resources import BusLayoutResource, ConnectResource, IcebergCatalogResource, KafkaResource
from lakebus_dagster.provision import Outcome
from lakebus_dagster.provision.outcome import ProvisioningError
from lakebus_dagster.provision.specs import reconcile_specs
from lakebus_dagster.provision.target_state_store import read_declared


def _specs(capture: ChangeCaptureResource) -> list[CaptureSpec]:
    _spec(capture)  # refuses, naming the setting, when capture is off
    try:
        return capture.specs()
    except CaptureError as exc:
        raise dg.Failure(str(exc), allow_retries=False) from exc


def _spec(capture: ChangeCaptureResource) -> CaptureSpec:
    if not capture.enabled:
        raise dg.Failure("change capture is off (LAKEBUS_POSTGRES is not 'on'): this deployment declares no captured "
                         "database; set LAKEBUS_POSTGRES=on (the local stack then runs PostgreSQL) and reload the code location",
                         allow_retries=False)
    try:
        return capture.spec()
    except CaptureError as exc:
        raise dg.Failure(str(exc), allow_retries=False) from exc


@dg.op(description="Check the captured database (wal_level=logical, a bounded max_slot_wal_keep_size, the role's LOGIN "
       "REPLICATION, every table present with a primary key) and ensure the capture's publication FOR TABLE the "
       "captured tables and the heartbeat table; report the replication slot.")
def ensure_capture_database(context: dg.OpExecutionContext, capture: ChangeCaptureResource) -> dg.Output[list[Outcome]]:
    outcomes, checks, slots = [], {}, []
    for spec in _specs(capture):
        try:
            done, found = prepare_database(spec)
        except CaptureError as exc:
            raise dg.Failure(str(exc), allow_retries=False) from exc
        outcomes += done
        checks[spec.name] = found["checks"]
        slots.append(f"{spec.slot}: {describe_slot(found['slot'])}")
    metadata = _report(context, outcomes)
    metadata["checks"] = dg.MetadataValue.json(checks)
    metadata["slot"] = dg.MetadataValue.text("; ".join(slots))
    return dg.Output(outcomes, metadata=metadata)


@dg.op(description="Ensure the typed Iceberg change table of every captured table (decimal(p,s), timestamptz, date from "
       "the database's catalog, then the change columns; an existing one gets only the columns it lacks) and its "
       "current-state table (created empty; cdc_current_state_sensor fills it).")
def ensure_change_tables(context: dg.OpExecutionContext, capture: ChangeCaptureResource, iceberg: IcebergCatalogResource,
                         database: list[Outcome]) -> dg.Output[list[Outcome]]:
    from contextlib import closing

    from lakebus_dagster.cdc.database import connect, table_columns

    outcomes = []
    try:
        for spec in _specs(capture):
            with closing(connect(spec)) as conn:
                columns = table_columns(conn, spec)
            outcomes += reconcile_change_tables(iceberg.load(), spec, columns)
            outcomes += reconcile_current_tables(iceberg.load(), spec, columns)
    except CaptureError as exc:
        raise dg.Failure(str(exc), allow_retries=False) from exc
    return dg.Output(outcomes, metadata=_report(context, outcomes))


class CaptureConnectorsConfig(dg.Config):
    wait_timeout_s: float = Field(default=180.0, description="deadline for each connector's declared state")


@dg.op(description="Ensure the CDC topics (explicitly: change, heartbeat, control, DLQ) and the two connectors — the "
       "Debezium PostgreSQL source and the change-table Iceberg sink: validate → diff → PUT only on a difference → "
       "their declared target state.")
def ensure_capture_connectors(context: dg.OpExecutionContext, config: CaptureConnectorsConfig, capture: ChangeCaptureResource,
                              layout: BusLayoutResource, connect: ConnectResource, operations: KafkaResource,
                              iceberg: IcebergCatalogResource, tables: list[Outcome]) -> dg.Output[list[Outcome]]:
    kafka = operations  # a bus-changing job: the operations principal (kafka/acls.py)
    captures = _specs(capture)
    bus = layout.layout()
    specs = [s for spec in captures for s in spec.specs(iceberg.as_seen_by_connect())]
    try:
        with connect.client() as client:
            before = {spec.name: added_tables(client, spec) for spec in captures}
            recorded = read_declared(kafka.clients(), bus.state_topic.name)
            declared = {s.name: recorded[s.name].state for s in specs if s.name in recorded}
            outcomes = reconcile_specs(client, kafka.admin(), bus, specs, declared, wait_timeout_s=config.wait_timeout_s)
        for spec in captures:
            outcomes += snapshot_added_tables(context, spec, before[spec.name], kafka)
    except ConnectUnavailable as exc:
        raise dg.Failure(f"Kafka Connect at {connect.url} is unreachable ({type(exc).__name__}); nothing was changed",
                         allow_retries=False) from exc
    except ProvisioningError as exc:
        raise dg.Failure(str(exc), allow_retries=False) from exc
    return dg.Output(outcomes, metadata=_report(context, outcomes))


@dg.job(
    description="Provision change capture from PostgreSQL (LAKEBUS_POSTGRES=on): publication, typed change tables, CDC "
    "topics, the Debezium source and the change-table sink. Safe to run any time; a second run changes nothing.",
    tags={"domain": "provisioning", "lakebus/exclusive": "provisioning", **AUDITED, **OPERATIONS_TAGS},
)
def provision_change_capture():
    ensure_capture_connectors(ensure_change_tables(ensure_capture_database()))


# -- re-sync since T on the running connector -------------------------------------------------
#: what ``confirm`` names in the re-reads (each re-emits rows downstream)
RESYNC_CONFIRM = "the captured table's name"
RESNAPSHOT_CONFIRM = "the captured tables' names, comma-separated in the order given (empty tables: every one, in the capture's order)"


class ResyncConfig(dg.Config):
    table: str = Field(description="the captured table to re-read (e.g. orders)")
    since: str = Field(default="", description="re-read the rows whose `column` is at or after this ISO timestamp with a "
                       "zone (e.g. 2026-11-27T10:00:00+00:00); empty: use `filter`")
    column: str = Field(default="", description="the table's change-time column the `since` filter reads (empty: the "
                        "declared changed_at, else updated_at)")
    filter: str = Field(default="", description="instead of since/column: a SQL condition on the table (appended as WHERE)")
    wait_timeout_s: float = Field(default=600.0, description="how long to follow the re-read before leaving it running "
                                  "(it goes on in the connector; stop_captured_table_resync cancels it)")
    confirm: str = confirm_field(RESYNC_CONFIRM)


def _signal(kafka: KafkaResource, spec: CaptureSpec, key: str, value: str) -> tuple[int, int]:
    from lakebus_dagster.kafka.writing import produce_all

    ((partition, offset),) = produce_all(kafka.producer(), [(spec.signal_topic.name, key.encode(), value.encode(), [])])
    return partition, offset


def _signalled_spec(capture: ChangeCaptureResource) -> CaptureSpec:
    spec = _spec(capture)
    if not spec.signal_bootstrap:
        raise dg.Failure(f"capture {spec.name!r} has no Kafka signal channel (signal_bootstrap is empty): a re-read needs "
                         "one; set it on the capture resource and run provision_change_capture", allow_retries=False)
    return spec


@dg.op(description="Re-read a captured table's rows since a time (or matching a filter) on the running Debezium source: "
       "an incremental snapshot signalled through Kafka (read-only: nothing is written to the database; streaming "
       "goes on); follows it — rows re-read of the rows expected, as logs and observations — until it ends.")
def resync_captured_table_op(context: dg.OpExecutionContext, config: ResyncConfig, capture: ChangeCaptureResource,
                             connect: ConnectResource, operations: KafkaResource) -> None:
    kafka = operations  # a bus-changing job: the operations principal (kafka/acls.py)
    from lakebus_dagster.cdc.resync import execute_snapshot, resync_filter
    from lakebus_dagster.defs.cdc.reread import follow_reread, start_reread

    require_confirmation(context.job_name, config.confirm, config.table, RESYNC_CONFIRM)
    spec = _signalled_spec(capture)
    try:
        if bool(config.since) == bool(config.filter):
            raise CaptureError(f"capture {spec.name!r}: give exactly one of `since` (with `column`) or `filter`")
        column = config.column or dict(spec.changed_at).get(config.table) or "updated_at"
        condition = resync_filter(spec, config.table, column, config.since) if config.since else config.filter
        if config.filter and config.table not in spec.tables:
            raise CaptureError(f"capture {spec.name!r}: {config.table!r} is not a captured table ({', '.join(spec.tables)})")
    except CaptureError as exc:
        raise dg.Failure(str(exc), allow_retries=False) from exc
    with connect.client() as client:
        state = start_reread(context, spec, client, kafka, [config.table], execute_snapshot(spec, config.table, condition),
                             condition)
        metadata = follow_reread(context, spec, client, kafka, state, config.wait_timeout_s)
    context.add_output_metadata({"table": spec.qualified(config.table), "condition": condition, **metadata})


class ResnapshotConfig(dg.Config):
    tables: list[str] = Field(default_factory=list, description="the captured tables to re-read whole; empty: every one")
    wait_timeout_s: float = Field(default=900.0, description="how long to follow the re-read before leaving it running "
                                  "(it goes on in the connector; stop_captured_table_resync cancels it)")
    confirm: str = confirm_field(RESNAPSHOT_CONFIRM)


@dg.op(description="Re-read captured tables whole on the running Debezium source: an incremental snapshot without a "
       "filter, signalled through Kafka (read-only; streaming goes on; nothing stopped or recreated); follows it — "
       "rows re-read of the rows the database holds, as logs and observations — until it ends.")
def resnapshot_captured_table_op(context: dg.OpExecutionContext, config: ResnapshotConfig, capture: ChangeCaptureResource,
                                 connect: ConnectResource, operations: KafkaResource) -> None:
    kafka = operations  # a bus-changing job: the operations principal (kafka/acls.py)
    from lakebus_dagster.cdc.resync import full_snapshot
    from lakebus_dagster.defs.cdc.reread import follow_reread, start_reread

    spec = _signalled_spec(capture)
    tables = list(config.tables) or list(spec.tables)
    require_confirmation(context.job_name, config.confirm, ",".join(tables), RESNAPSHOT_CONFIRM)
    try:
        signal = full_snapshot(spec, tables)
    except CaptureError as exc:
        raise dg.Failure(str(exc), allow_retries=False) from exc
    with connect.client() as client:
        state = start_reread(context, spec, client, kafka, tables, signal, None)
        context.add_output_metadata(follow_reread(context, spec, client, kafka, state, config.wait_timeout_s))


class StopResyncConfig(dg.Config):
    table: str = Field(description="the captured table whose re-read to cancel")


@dg.op(description="Cancel a running re-sync (stop-snapshot signal); what was re-read stays, streaming goes on.")
def stop_captured_table_resync_op(context: dg.OpExecutionContext, config: StopResyncConfig, capture: ChangeCaptureResource,
                                  operations: KafkaResource) -> None:
    kafka = operations  # a bus-changing job: the operations principal (kafka/acls.py)
    from lakebus_dagster.cdc.resync import stop_snapshot

    spec = _spec(capture)
    if config.table not in spec.tables or not spec.signal_bootstrap:
        raise dg.Failure(f"capture {spec.name!r}: {config.table!r} is not a captured table, or the capture has no signal "
                         "channel", allow_retries=False)
    key, value = stop_snapshot(spec, config.table)
    partition, offset = _signal(kafka, spec, key, value)
    context.add_output_metadata({"signal": dg.MetadataValue.json(json.loads(value)),
                                 "signal_position": f"{spec.signal_topic.name}[{partition}]@{offset}"})


@dg.job(description="Re-read a captured table's rows since a time (or matching a filter) on the running connector: an "
        "incremental snapshot, read-only, idempotent in the current-state table; needs config.confirm = the table's name.",
        tags={"domain": "cdc", **AUDITED, **OPERATIONS_TAGS})
def resync_captured_table():
    resync_captured_table_op()


@dg.job(description="Re-read captured tables whole (every row again) on the running connector: an incremental snapshot "
        "without a filter, read-only, its progress followed; idempotent in the current-state tables. Then run "
        "cdc_current_state. (Rows deleted in the database are not re-read: their deletes were streamed.) Needs "
        "config.confirm = the tables' names.", tags={"domain": "cdc", **AUDITED, **OPERATIONS_TAGS})
def resnapshot_captured_table():
    resnapshot_captured_table_op()


@dg.job(description="Cancel a running re-sync or re-snapshot of a captured table (stop-snapshot).",
        tags={"domain": "cdc", **AUDITED, **OPERATIONS_TAGS})
def stop_captured_table_resync():
    stop_captured_table_resync_op()
