"""Desired state derived from the layout: the sink connector's config and the topic specs.

Secrets never appear here: the S3 keys and the catalog's credential or token are ``${env:...}``
placeholders that the Connect worker resolves with its ``EnvVarConfigProvider``, so the stored
config (and every diff of it) shows only the placeholder.
"""

from __future__ import annotations

from typing import Protocol

from lakebus_dagster.bus.door import guard_transform, value_converter
from lakebus_dagster.bus.layout import (
    ANCHOR_CONTROL_OFFSETS_PROP,
    FENCE_WORKER_TRANSACTION_PROP,
    ICEBERG_SINK_CLASS,
    RELEASE_COORDINATOR_PROP,
    BusLayout,
    TopicSpec,
)
from lakebus_dagster.bus.provenance import chain_transforms, provenance_transform
from lakebus_dagster.bus.table_properties import sink_auto_create_props
from lakebus_dagster.events.registry import EventRegistry, default_registry
from lakebus_dagster.secret_env import CATALOG_CREDENTIAL_VAR, CATALOG_TOKEN_VAR, S3_ACCESS_KEY_VAR, S3_SECRET_KEY_VAR


class CatalogEndpoints(Protocol):
    """Where the sink finds the Iceberg REST catalog and its object store (no secrets).

    The catalog resources (``IcebergCatalogResource``, ``LakeSparkResource``) satisfy it, so the
    connector is configured from the same resource the assets read with: overriding the resource
    reaches the connector.
    """

    catalog_uri: str
    warehouse: str
    region: str
    s3_endpoint: str
    # optional (read with getattr, default None): whether the catalog takes a credential or a token
    # (only their presence is read; the values reach the worker as ${env:…}), its scope, its token endpoint
    # catalog_credential, catalog_token, catalog_scope, catalog_oauth2_server_uri


def catalog_secrets_config(lake: CatalogEndpoints) -> dict[str, str]:
    """The S3 key pair and the catalog's ``iceberg.catalog.credential`` / ``.token`` as placeholders
    of the variables the Connect worker must have in its environment (the credential / token only
    when set), and the catalog's scope and token endpoint when set."""
    cfg = {"iceberg.catalog.s3.access-key-id": env_placeholder(S3_ACCESS_KEY_VAR),
           "iceberg.catalog.s3.secret-access-key": env_placeholder(S3_SECRET_KEY_VAR)}
    if getattr(lake, "catalog_credential", None):
        cfg["iceberg.catalog.credential"] = env_placeholder(CATALOG_CREDENTIAL_VAR)
    if getattr(lake, "catalog_token", None):
        cfg["iceberg.catalog.token"] = env_placeholder(CATALOG_TOKEN_VAR)
    if scope := getattr(lake, "catalog_scope", None):
        cfg["iceberg.catalog.scope"] = scope
    if server := getattr(lake, "catalog_oauth2_server_uri", None):
        cfg["iceberg.catalog.oauth2-server-uri"] = server
    return cfg


def env_placeholder(var: str) -> str:
    return "${env:" + var + "}"


def sink_catalog_props(catalog_name: str, lake: CatalogEndpoints) -> dict[str, str]:
    """The Iceberg sink's catalog and storage settings — one place for every sink lakebus declares
    (the events sink, change capture's): the S3 keys and the catalog's credential stay ``${env:...}``
    placeholders (:func:`catalog_secrets_config`)."""
    return {
        "iceberg.catalog": catalog_name,
        "iceberg.catalog.type": "rest",
        "iceberg.catalog.uri": lake.catalog_uri,
        "iceberg.catalog.warehouse": lake.warehouse,
        "iceberg.catalog.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "iceberg.catalog.client.region": lake.region,
        "iceberg.catalog.s3.endpoint": lake.s3_endpoint,
        "iceberg.catalog.s3.path-style-access": "true",
        **catalog_secrets_config(lake),
    }


def coordinator_config(layout: BusLayout) -> dict[str, str]:
    """The sink's settings for its commit coordinator's failover (BENCHMARKS.md, "Failover").

    The control-topic clients' session: a dead coordinator leaves the coordinators' group quickly.
    With lakebus's connector class, whether its tasks stop a coordinator when they close the partition
    it was elected by (the sink's own close misses that mid-rebalance), and whether it anchors the
    coordinators' control offsets before its first commit cycle (a young connector's failover)."""
    tuning = layout.tuning
    cfg: dict[str, str] = {}
    # no iceberg.kafka.security.*/ssl.* here: the sink's control-topic clients start from the worker file's
    # unprefixed keys (it re-reads the file), where the worker's own login and CA are (stack/security.py)
    if tuning.control_session_timeout_ms:
        cfg["iceberg.kafka.session.timeout.ms"] = str(tuning.control_session_timeout_ms)
        cfg["iceberg.kafka.heartbeat.interval.ms"] = str(max(1000, tuning.control_session_timeout_ms // 3))
    if layout.connector_class == ICEBERG_SINK_CLASS:
        cfg[RELEASE_COORDINATOR_PROP] = str(tuning.release_coordinator_on_close).lower()
        cfg[ANCHOR_CONTROL_OFFSETS_PROP] = str(tuning.anchor_control_offsets).lower()
        cfg[FENCE_WORKER_TRANSACTION_PROP] = str(tuning.fence_worker_transaction).lower()
    return cfg


def sink_connector_config(
    layout: BusLayout, lake: CatalogEndpoints, registry: EventRegistry = default_registry
) -> dict[str, str]:
    """The Iceberg sink's config as Connect stores it (all values strings).

    ``registry`` supplies the guard's contract (every version of every routed event).
    """
    tuning = layout.tuning
    cfg: dict[str, str] = {
        "connector.class": layout.connector_class,
        "tasks.max": str(layout.tasks_max),
        "topics": layout.bus_topic.name,
        "consumer.override.auto.offset.reset": "earliest",
        "consumer.override.max.poll.records": str(tuning.max_poll_records),
        "consumer.override.session.timeout.ms": str(tuning.consumer_session_timeout_ms),
        # routing: one connector, one table per event value
        "iceberg.tables": ",".join(layout.tables),
        "iceberg.tables.route-field": layout.route_field,
        "iceberg.tables.auto-create-enabled": "true",
        "iceberg.tables.evolve-schema-enabled": "true",
        # format, codec and the metadata bounds of every new ODS table (bus/table_properties.py)
        **sink_auto_create_props(),
        # ODS tables partitioned by day: retention drops whole partitions, compaction works per day
        # away from the sink's appends, and DWS reads of one hour prune to one day's files
        "iceberg.tables.default-partition-by": layout.partition_by,
        "iceberg.control.topic": layout.control_topic.name,
        "iceberg.control.commit.interval-ms": str(tuning.commit_interval_ms),
        "iceberg.control.commit.timeout-ms": str(tuning.commit_timeout_ms),
        **coordinator_config(layout),
        # catalog + storage
        **sink_catalog_props(layout.catalog_name, lake),
        # envelopes: Kafka Connect Schema+JSON values read strictly (lakebus's converter), plain string keys
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        **value_converter(),
        # converter and SMT failures (non-JSON, no envelope, a value not matching its schema, no
        # route, a schema the registry does not allow) go to the DLQ with their context headers
        "errors.tolerance": "all",
        "errors.log.enable": "true",
        "errors.log.include.messages": "false",
        "errors.deadletterqueue.topic.name": layout.dlq_topic.name,
        "errors.deadletterqueue.context.headers.enable": "true",
        "errors.deadletterqueue.topic.replication.factor": str(layout.dlq_topic.replication_factor),
    }
    # SMT chain, applied in list order (a guard belongs first; provenance stamps what passed it)
    transforms: list[tuple[str, dict[str, str]]] = []
    # lakebus's door: route and registry contract (see bus/door.py); always first
    transforms.append(guard_transform(layout, registry))
    # Kafka topic/partition/offset/timestamp columns on every ODS row (the offset ledger reads them)
    transforms.append(provenance_transform())
    chain_transforms(cfg, transforms)
    for event, table in sorted(layout.routes.items()):
        # anchored: the sink matches the regex against the whole field value
        cfg[f"iceberg.table.{table}.route-regex"] = f"^{event}$"
    return cfg


def topic_specs(layout: BusLayout) -> list[TopicSpec]:
    """Every topic the bus needs, the compacted connector-state topic included."""
    return [layout.bus_topic, layout.control_topic, layout.dlq_topic, layout.state_topic,
            layout.replay_ledger_topic, layout.offset_ledger_topic]
