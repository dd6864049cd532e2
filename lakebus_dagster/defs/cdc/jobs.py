"""``provision_change_capture``: the database (checks, publication) → the typed change tables → the
CDC topics and the two connectors (Debezium source, Iceberg change-table sink), each step a
reconciler: a second run reports every object ``unchanged`` and restarts nothing.

The connectors go through the declared connector specs' own path
(:func:`lakebus_dagster.provision.specs.reconcile_specs`: topics created explicitly, validate →
diff → PUT only on a difference → the declared target state), with the bus's ownership markers.
"""

from collections.abc import Sequence

import dagster as dg
from pydantic import Field

from lakebus_dagster.cdc.capture import CaptureError, CaptureSpec
from lakebus_dagster.cdc.database import describe_slot, prepare_database
from lakebus_dagster.cdc.tables import reconcile_change_tables
from lakebus_dagster.connect import ConnectUnavailable
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.provisioning.jobs import _report
from lakebus_dagster.defs.resources import BusLayoutResource, ConnectResource, IcebergCatalogResource, KafkaResource
from lakebus_dagster.provision import Outcome
from lakebus_dagster.provision.outcome import ProvisioningError
from lakebus_dagster.provision.specs import reconcile_specs
from lakebus_dagster.provision.target_state_store import read_declared


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
    spec = _spec(capture)
    try:
        outcomes, found = prepare_database(spec)
    except CaptureError as exc:
        raise dg.Failure(str(exc), allow_retries=False) from exc
    metadata = _report(context, outcomes)
    metadata["checks"] = dg.MetadataValue.json(found["checks"])
    metadata["slot"] = dg.MetadataValue.text(f"{spec.slot}: {describe_slot(found['slot'])}")
    return dg.Output(outcomes, metadata=metadata)


@dg.op(description="Ensure the typed Iceberg change table of every captured table (decimal(p,s), timestamptz, date from "
       "the database's catalog, then the change columns); an existing one gets only the columns it lacks.")
def ensure_change_tables(context: dg.OpExecutionContext, capture: ChangeCaptureResource, iceberg: IcebergCatalogResource,
                         database: list[Outcome]) -> dg.Output[list[Outcome]]:
    from contextlib import closing

    from lakebus_dagster.cdc.database import connect, table_columns

    spec = _spec(capture)
    try:
        with closing(connect(spec)) as conn:
            columns = table_columns(conn, spec)
        outcomes = reconcile_change_tables(iceberg.load(), spec, columns)
    except CaptureError as exc:
        raise dg.Failure(str(exc), allow_retries=False) from exc
    return dg.Output(outcomes, metadata=_report(context, outcomes))


class CaptureConnectorsConfig(dg.Config):
    wait_timeout_s: float = Field(default=180.0, description="deadline for each connector's declared state")


@dg.op(description="Ensure the CDC topics (explicitly: change, heartbeat, control, DLQ) and the two connectors — the "
       "Debezium PostgreSQL source and the change-table Iceberg sink: validate → diff → PUT only on a difference → "
       "their declared target state.")
def ensure_capture_connectors(context: dg.OpExecutionContext, config: CaptureConnectorsConfig, capture: ChangeCaptureResource,
                              layout: BusLayoutResource, connect: ConnectResource, kafka: KafkaResource,
                              iceberg: IcebergCatalogResource, tables: list[Outcome]) -> dg.Output[list[Outcome]]:
    spec = _spec(capture)
    bus = layout.layout()
    specs = spec.specs(iceberg.as_seen_by_connect())
    try:
        with connect.client() as client:
            recorded = read_declared(kafka.clients(), bus.state_topic.name)
            declared = {s.name: recorded[s.name].state for s in specs if s.name in recorded}
            outcomes = reconcile_specs(client, kafka.admin(), bus, specs, declared, wait_timeout_s=config.wait_timeout_s)
    except ConnectUnavailable as exc:
        raise dg.Failure(f"Kafka Connect at {connect.url} is unreachable ({type(exc).__name__}); nothing was changed",
                         allow_retries=False) from exc
    except ProvisioningError as exc:
        raise dg.Failure(str(exc), allow_retries=False) from exc
    return dg.Output(outcomes, metadata=_report(context, outcomes))


@dg.job(
    description="Provision change capture from PostgreSQL (LAKEBUS_POSTGRES=on): publication, typed change tables, CDC "
    "topics, the Debezium source and the change-table sink. Safe to run any time; a second run changes nothing.",
    tags={"domain": "provisioning", "lakebus/exclusive": "provisioning"},
)
def provision_change_capture():
    ensure_capture_connectors(ensure_change_tables(ensure_capture_database()))


__all__: Sequence[str] = ("provision_change_capture",)
