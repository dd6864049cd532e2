"""``provision_lakebus``: bucket, namespaces and table properties → topics → sink connector, each
reported in the UI.

Every step is a reconciler (desired vs live, change only on a difference), so running the job
twice in a row reports every object ``unchanged`` the second time.
"""


from collections import Counter
from collections.abc import Mapping, Sequence

import dagster as dg
from pydantic import Field

from lakebus_dagster.bus.desired import sink_connector_config, topic_specs
from lakebus_dagster.bus.table_properties import METADATA_BOUNDS
from lakebus_dagster.defs.guard import AUDITED
from lakebus_dagster.defs.kafka_roles import OPERATIONS_TAGS
from lakebus_dagster.defs.resources import (
    BusLayoutResource,
    ConnectResource,
    IcebergCatalogResource,
    KafkaResource,
    ObjectStoreResource,
)
from lakebus_dagster.lake.dws.locations import LakehouseTables
from lakebus_dagster.lake.dws.tables import DWS_TABLES
from lakebus_dagster.provision import Outcome, outcomes_markdown
from lakebus_dagster.provision.connector import reconcile_connector
from lakebus_dagster.provision.storage import reconcile_bucket, reconcile_namespaces, reconcile_table_properties
from lakebus_dagster.provision.topics import reconcile_topics
from lakebus_dagster.provision.target_state_store import declared_state


class TopicsConfig(dg.Config):
    apply_config_changes: bool = Field(
        default=False,
        description="alter topic configs that differ from the layout (default: report them as drift only)",
    )


class ConnectorConfig(dg.Config):
    wait_timeout_s: float = Field(default=120.0, description="how long to wait for the connector and its tasks to be RUNNING")


def _report(context: dg.OpExecutionContext, outcomes: Sequence[Outcome]) -> dict[str, dg.MetadataValue]:
    for o in outcomes:
        context.log.info(f"{o.kind} {o.name}: {o.action.value}{' — ' + o.details if o.details else ''}")
    counts = Counter(o.action.value for o in outcomes)
    metadata: dict[str, dg.MetadataValue] = {
        "outcomes": dg.MetadataValue.md(outcomes_markdown(outcomes)),
        **{f"n_{action}": dg.MetadataValue.int(n) for action, n in sorted(counts.items())},
    }
    for o in outcomes:
        if o.diff_markdown:
            metadata[f"diff {o.kind} {o.name}"] = dg.MetadataValue.md(o.diff_markdown)
    return metadata


def _lake_tables(routes: Mapping[str, str]) -> list[str]:
    """Every ODS table of ``routes`` and the DWS tables built from them (``namespace.table``); a DWS
    spec reading an event the layout does not route has no table on this bus."""
    specs = [spec for spec in DWS_TABLES if set(spec.sources) <= set(routes)]
    try:
        dws = LakehouseTables.from_routes(routes, specs).all_dws if specs else ()
    except ValueError:  # routes over several namespaces: the DWS tables are not built on this bus
        dws = ()
    return [*routes.values(), *dws]


@dg.op(
    description="Ensure the warehouse bucket, the Iceberg namespaces the routes write into, and the metadata-bounding "
    "table properties on every ODS and DWS table that exists (the others get them at creation)."
)
def ensure_storage(
    context: dg.OpExecutionContext,
    layout: BusLayoutResource,
    object_store: ObjectStoreResource,
    iceberg: IcebergCatalogResource,
) -> dg.Output[list[Outcome]]:
    bus = layout.layout()
    catalog = iceberg.load()
    outcomes = [reconcile_bucket(object_store.ensure_bucket, iceberg.warehouse_bucket)]
    outcomes += reconcile_namespaces(catalog, bus.namespaces)
    outcomes += reconcile_table_properties(catalog, _lake_tables(bus.routes), METADATA_BOUNDS)
    return dg.Output(outcomes, metadata=_report(context, outcomes))


@dg.op(description="Ensure the bus, control, DLQ and connector-state topics (create missing, report drift, refuse unsafe states).")
def ensure_topics(
    context: dg.OpExecutionContext,
    config: TopicsConfig,
    layout: BusLayoutResource,
    operations: KafkaResource,
    storage: list[Outcome],
) -> dg.Output[list[Outcome]]:
    kafka = operations  # a bus-changing job: the operations principal (kafka/acls.py)
    bus = layout.layout()
    outcomes = reconcile_topics(
        kafka.admin(),
        topic_specs(bus),
        control_topic=bus.control_topic.name,
        apply_config_changes=config.apply_config_changes,
    )
    return dg.Output(outcomes, metadata=_report(context, outcomes))


@dg.op(
    description="Ensure the Iceberg sink connector: validate, diff with the live config, PUT only on a difference, "
    "then bring it to its declared target state (never resumes a connector declared paused/stopped)."
)
def ensure_connector(
    context: dg.OpExecutionContext,
    config: ConnectorConfig,
    layout: BusLayoutResource,
    connect: ConnectResource,
    kafka: KafkaResource,
    iceberg: IcebergCatalogResource,
    topics: list[Outcome],
) -> dg.Output[list[Outcome]]:
    bus = layout.layout()
    desired = sink_connector_config(bus, iceberg.as_seen_by_connect())  # the catalog resource's endpoints, as the assets read
    target, record = declared_state(kafka.clients(), bus, bus.connector_name)
    with connect.client() as client:
        outcome = reconcile_connector(
            client, bus.connector_name, desired, target=target.connect_state, wait_timeout_s=config.wait_timeout_s
        )
    metadata = _report(context, [outcome])
    metadata["declared_state"] = dg.MetadataValue.text(target.connect_state)
    metadata["declared_by"] = dg.MetadataValue.json(record.as_dict() if record else {"source": "layout default"})
    return dg.Output([outcome], metadata=metadata)


@dg.job(
    description="Provision the bus from the declared layout: bucket, namespaces, topics, the Iceberg sink connector. "
    "Safe to run any time; a second run changes nothing.",
    # deploy/dagster.yaml's run queue starts one run with this tag at a time
    tags={"domain": "provisioning", "lakebus/exclusive": "provisioning", **AUDITED, **OPERATIONS_TAGS},
)
def provision_lakebus():
    ensure_connector(ensure_topics(ensure_storage()))
