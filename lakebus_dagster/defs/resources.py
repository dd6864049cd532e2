"""Dagster resources: small typed interfaces over Kafka, Kafka Connect, S3, the Iceberg catalog and
Spark. Secrets are ``EnvVar`` fields, or the local stack's generated values where the environment
does not set them (never defaults in code); everything else defaults to the local stack through
:mod:`lakebus_dagster.settings`, and production overrides it with environment variables.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from pydantic import Field
from pyiceberg.catalog import Catalog

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.connect.workers import worker_urls
from lakebus_dagster.lake import object_store
from lakebus_dagster.defs.lake_access import LakeAccess
from lakebus_dagster.defs.spark import LakeSparkResource  # noqa: F401 (the shared resources are imported from here)
from lakebus_dagster.lake.catalog import open_catalog
from lakebus_dagster.kafka.clients import KafkaClients, KafkaConfigError, client_config
from lakebus_dagster.settings import load_settings

class KafkaResource(dg.ConfigurableResource):
    """confluent-kafka clients for one cluster (admin, producer, consumer) sharing one security setup."""

    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = Field(default=None, description="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, ...")
    sasl_username: str | None = None
    sasl_password: str | None = Field(default=None, description="use dg.EnvVar; never a literal")
    ssl_ca_location: str | None = Field(default=None, description="CA file (PEM) for the brokers; unset: the system's CAs")
    extra_config: dict[str, str] = Field(default_factory=dict, description="any other librdkafka settings")

    def client_config(self) -> dict[str, Any]:
        """The librdkafka config (:func:`lakebus_dagster.kafka.client_config`); a bad one is invalid resource config."""
        try:
            return client_config(
                self.bootstrap_servers, security_protocol=self.security_protocol, sasl_mechanism=self.sasl_mechanism,
                sasl_username=self.sasl_username, sasl_password=self.sasl_password,
                ssl_ca_location=self.ssl_ca_location, extra=self.extra_config,
            )
        except KafkaConfigError as exc:
            raise dg.DagsterInvalidConfigError(f"KafkaResource.{exc}", [], None) from None

    def clients(self) -> KafkaClients:
        """The clients of this cluster, for code below Dagster (it takes :class:`KafkaClients`)."""
        return KafkaClients(self.client_config())

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """With SASL or TLS, a refused login (or TLS handshake) fails the run or tick at once, naming user and
        servers (or the CA setting) — not later as "no metadata within 10 s" from whichever step first asks."""
        if self.security_protocol != "PLAINTEXT":
            from lakebus_dagster.kafka import login_failure_message, refused_login

            config = self.client_config()
            if (reason := refused_login(config)) is not None:
                raise dg.Failure(login_failure_message(config, reason), allow_retries=False)

    def admin(self, **overrides: Any) -> AdminClient:
        return self.clients().admin(**overrides)

    def producer(self, **overrides: Any) -> Producer:
        """A producer with the bus's delivery guarantees (acks=all, idempotence, zstd) unless overridden."""
        return self.clients().producer(**overrides)

    def consumer(self, group_id: str, **overrides: Any) -> Consumer:
        return self.clients().consumer(group_id, **overrides)


class ConnectResource(dg.ConfigurableResource):
    """The Kafka Connect cluster's REST API, as a :class:`~lakebus_dagster.connect.ConnectClient`.

    ``url``: one worker's URL or several, comma-separated like ``KafkaResource.bootstrap_servers``;
    the client uses whichever worker answers. One string, not a ``list[str]``: ``dg.EnvVar`` fills
    strings only, and every run config and deployment that sets one URL stays valid."""

    url: str = Field(description="the Connect workers' REST URLs, comma-separated: http://w1:8083,http://w2:8083")
    username: str | None = None
    password: str | None = Field(default=None, description="use dg.EnvVar; never a literal")
    ca_location: str | None = Field(default=None, description="CA file (PEM) for https workers; unset: the system's CAs")
    timeout_s: float = 15.0
    retries: int = 5
    backoff_factor: float = 0.5

    @property
    def urls(self) -> tuple[str, ...]:
        """Every worker URL in :attr:`url`, in order."""
        return worker_urls(self.url)

    def auth(self) -> tuple[str, str] | None:  # the REST API's basic-auth pair, or None
        return (self.username, self.password or "") if self.username else None

    def client(self) -> ConnectClient:  # verify: the CA file, else the system's CAs (never off)
        return ConnectClient(self.urls, auth=self.auth(), verify=self.ca_location or True, timeout=self.timeout_s, retries=self.retries, backoff_factor=self.backoff_factor)


class ObjectStoreResource(dg.ConfigurableResource):
    """An S3-compatible object store (MinIO in production, S3Proxy locally)."""

    endpoint_url: str
    region: str = "us-east-1"
    access_key_id: str
    secret_access_key: str
    path_style: bool = True

    def client(self):
        return object_store.s3_client(
            self.endpoint_url, self.region, self.access_key_id, self.secret_access_key, path_style=self.path_style
        )

    def ensure_bucket(self, bucket: str) -> bool:
        """Create ``bucket`` unless it exists; True if created."""
        return object_store.ensure_bucket(self.client(), bucket)


class IcebergCatalogResource(LakeAccess):
    """The Iceberg REST catalog through pyiceberg, with S3 settings for reading data files.

    ``connect_catalog_uri`` / ``connect_s3_endpoint`` are the same services as the Connect workers
    reach them, when that differs from Dagster's view (another network, a proxy): the sink's config
    is built from :meth:`as_seen_by_connect`.
    """

    connect_catalog_uri: str | None = None
    connect_s3_endpoint: str | None = None

    def load(self, name: str = "lakebus") -> Catalog:
        return open_catalog(self.endpoints(), name)

    def as_seen_by_connect(self) -> "IcebergCatalogResource":
        return self.model_copy(update={
            "catalog_uri": self.connect_catalog_uri or self.catalog_uri,
            "s3_endpoint": self.connect_s3_endpoint or self.s3_endpoint,
        })


class BusLayoutResource(dg.ConfigurableResource):
    """The declared bus layout, the one place provisioning, sensors and assets read it from.

    By default the seed's layout with routes from the event SDK's registry; ``layout_file`` points
    at a YAML declaration instead. ``name_suffix`` isolates a whole bus (topics, connector,
    namespaces) — e.g. one per environment, or per integration test run.

    Every field left unset (None) takes the deployment's setting (``LAKEBUS_NAMESPACE``,
    ``LAKEBUS_BUS_SUFFIX``, ``LAKEBUS_SINK_COMMIT_INTERVAL_MS``, ``LAKEBUS_BUS_PARTITIONS``,
    ``LAKEBUS_SINK_TASKS_MAX``, ``LAKEBUS_TOPIC_REPLICATION_FACTOR``,
    ``LAKEBUS_TOPIC_MIN_INSYNC_REPLICAS``) when the layout is read, not when the resource is built:
    Dagster replaces a resource's whole configuration with the run config's, so run config naming
    only ``bus_partitions`` must not reset the replication the deployment declares (issue 21: growing
    the bus from the Launchpad on the cluster profile turned RF 3 into 1).
    """

    namespace: str | None = Field(default=None, description="ODS namespace; unset: LAKEBUS_NAMESPACE")
    layout_file: str | None = None
    name_suffix: str | None = Field(default=None, description="suffix isolating a whole bus; unset: LAKEBUS_BUS_SUFFIX")
    commit_interval_ms: int | None = Field(
        default=None, description="the sink's commit interval; unset: LAKEBUS_SINK_COMMIT_INTERVAL_MS or lakebus's 10 s")
    bus_partitions: int | None = Field(
        default=None,
        description="override the bus topic's partitions (provisioning grows a topic, never shrinks one); "
        "the sink runs one task per partition unless tasks_max says otherwise; unset: LAKEBUS_BUS_PARTITIONS",
    )
    tasks_max: int | None = Field(
        default=None, description="override the sink's tasks.max (at most the bus partitions); unset: LAKEBUS_SINK_TASKS_MAX")
    replication_factor: int | None = Field(
        default=None, description="replicas of the bus, control, DLQ and state topics (at most the brokers); "
        "unset: LAKEBUS_TOPIC_REPLICATION_FACTOR",
    )
    min_insync_replicas: int | None = Field(
        default=None, description="min.insync.replicas of those topics; unset: LAKEBUS_TOPIC_MIN_INSYNC_REPLICAS")

    def _settled(self) -> "BusLayoutResource":
        """A copy with every unset field filled from the deployment's bus tuning (:class:`~lakebus_dagster.setting_groups.BusTuning`),
        loaded by the same road as the code location's (:func:`load_settings`: environment > file > default);
        at run time, not at load: see the class docstring (issue 21)."""
        unset = [f for f in ("namespace", "name_suffix", "commit_interval_ms", "bus_partitions", "tasks_max",
                             "replication_factor", "min_insync_replicas")
                 if getattr(self, f) is None]
        if not unset:
            return self
        settings = load_settings()
        from_settings = {
            "namespace": settings.lake.namespace,
            "name_suffix": settings.bus.suffix,
            "commit_interval_ms": settings.bus.sink_commit_interval_ms,
            "bus_partitions": settings.bus.partitions,
            "tasks_max": settings.bus.sink_tasks_max,
            "replication_factor": settings.bus.replication_factor if settings.bus.replication_factor > 1 else None,
            "min_insync_replicas": settings.bus.min_insync_replicas,
        }
        return self.model_copy(update={f: from_settings[f] for f in unset})

    def layout(self) -> BusLayout:
        from dataclasses import replace

        settled = self._settled()
        layout = BusLayout.from_yaml(settled.layout_file) if settled.layout_file else BusLayout.default(settled.namespace)
        if settled.name_suffix:
            layout = layout.with_suffix(settled.name_suffix)
        tuning = {}
        if settled.commit_interval_ms is not None:
            tuning["commit_interval_ms"] = settled.commit_interval_ms
        if settled.tasks_max is not None:
            tuning["tasks_max"] = settled.tasks_max
        bus_topic = layout.bus_topic if settled.bus_partitions is None else replace(layout.bus_topic, partitions=settled.bus_partitions)
        if tuning or bus_topic is not layout.bus_topic:
            layout = replace(layout, bus_topic=bus_topic, tuning=replace(layout.tuning, **tuning))
        if settled.replication_factor is not None or settled.min_insync_replicas is not None:
            layout = layout.with_replication(settled.replication_factor or layout.bus_topic.replication_factor, settled.min_insync_replicas)
        return layout
