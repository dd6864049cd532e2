"""The deployment's settings by concern: the base ports, Kafka, Connect, the lake, Spark, alerts, the
bus's tuning and change capture, each a frozen dataclass that :func:`lakebus_dagster.settings.load_settings`
fills (the whole: :class:`lakebus_dagster.settings.Settings`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakebus_dagster.envvars import SettingsError
from lakebus_dagster.secret_env import CONNECT_PASSWORD_VAR, KAFKA_OPS_PASSWORD_VAR, KAFKA_PASSWORD_VAR

KAFKA_SECURITY_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL")
#: the variable behind each field :func:`lakebus_dagster.kafka.client_config` may find missing
KAFKA_CLIENT_VARS = {"sasl_mechanism": "LAKEBUS_KAFKA_SASL_MECHANISM", "sasl_username": "LAKEBUS_KAFKA_SASL_USERNAME",
                     "sasl_password": KAFKA_PASSWORD_VAR, "ssl_ca_location": "LAKEBUS_KAFKA_SSL_CA_LOCATION"}
#: the CA file the Connect REST client checks the workers' certificates against
CONNECT_CA_VAR = "LAKEBUS_CONNECT_CA_LOCATION"


@dataclass(frozen=True, kw_only=True)
class Ports:
    """The base ports of the services lakebus talks to, when no endpoint is configured."""

    kafka: int
    connect: int
    rest_catalog: int
    s3: int
    #: the Spark Connect server's gRPC port (what the default ``sc://`` URL names)
    spark_connect: int = 15002
    #: the captured PostgreSQL's port (LAKEBUS_POSTGRES_PORT; the local stack's server with LAKEBUS_POSTGRES=on)
    postgres: int = 15432


@dataclass(frozen=True, kw_only=True)
class KafkaSettings:
    """How lakebus reaches Kafka as its own principal (the password only ever from the environment)."""

    #: LAKEBUS_KAFKA_BOOTSTRAP, else every broker of the local stack's profile
    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "SCRAM-SHA-512"
    sasl_username: str | None = None
    #: the bus-changing jobs' principal (LAKEBUS_KAFKA_OPS_USERNAME); None: the observer's (one principal)
    ops_username: str | None = None
    #: the CA certificate(s) (PEM) the brokers' TLS certificates are verified against, with SSL or SASL_SSL
    #: (LAKEBUS_KAFKA_SSL_CA_LOCATION; secured profile: its own CA); None: the system's CAs
    ssl_ca_location: str | None = None

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL")

    def ops_client_config(self) -> dict[str, Any]:
        """:meth:`client_config` as the operations principal (``LAKEBUS_KAFKA_OPS_USERNAME`` / ``_PASSWORD``),
        for what changes the bus; unset: the observer's."""
        return self.client_config(operations=True)

    def client_config(self, *, operations: bool = False) -> dict[str, Any]:
        """librdkafka settings for lakebus's observer principal (:func:`lakebus_dagster.kafka.client_config`):
        bootstrap servers and, with SASL, the mechanism, user and the password from
        ``LAKEBUS_KAFKA_SASL_PASSWORD`` (read now, never kept); ``operations``: the operations principal's."""
        from lakebus_dagster.kafka.clients import KafkaConfigError, client_config  # not at import: settings stay light

        # load_settings checked the protocol; a KafkaSettings built by hand gets the same error here
        sasl = known_protocol(self.security_protocol).startswith("SASL")
        ops = operations and self.ops_username is not None
        try:
            return client_config(
                self.bootstrap_servers, security_protocol=self.security_protocol,
                **(dict(sasl_mechanism=self.sasl_mechanism, sasl_username=self.ops_username if ops else self.sasl_username,
                        sasl_password=os.environ.get(KAFKA_OPS_PASSWORD_VAR if ops else KAFKA_PASSWORD_VAR, "")) if sasl else {}),
                ssl_ca_location=self.ssl_ca_location if self.tls else None,
            )
        except KafkaConfigError as exc:
            if exc.field == "ssl_ca_location":
                raise SettingsError(KAFKA_CLIENT_VARS[exc.field], f"={self.ssl_ca_location!r}: {exc}",
                                    "point it at the PEM file of the CA that signed the brokers' certificates "
                                    "(the secured local stack's: <state>/tls/ca.crt, made by `stack up`)") from None
            raise SettingsError(KAFKA_CLIENT_VARS[exc.field],
                                f"is not set but LAKEBUS_KAFKA_SECURITY_PROTOCOL={self.security_protocol}",
                                "set it (from your secret store; the secured local stack generates it into secrets.env)") from None


@dataclass(frozen=True, kw_only=True)
class ConnectSettings:
    """The Kafka Connect cluster: its workers, lakebus's REST user, and how the workers reach the lake."""

    #: every worker's REST URL: LAKEBUS_CONNECT_URL's list, else each worker of the local stack's
    #: profile; lakebus's client uses whichever answers, so losing one worker does not make Connect look down
    urls: tuple[str, ...]
    #: the REST API's basic-auth user (password from LAKEBUS_CONNECT_PASSWORD)
    username: str | None = None
    #: the catalog / S3 addresses as the workers reach them, when they differ from lakebus's
    #: (another network, a proxy); None = the same addresses
    catalog_uri: str | None = None
    s3_endpoint: str | None = None
    #: the CA certificate(s) (PEM) an https worker's certificate is verified against (LAKEBUS_CONNECT_CA_LOCATION,
    #: else LAKEBUS_KAFKA_SSL_CA_LOCATION's; secured profile: its own CA); None: the system's CAs
    ca_location: str | None = None

    def verify(self) -> str | bool:
        """``requests``' ``verify`` for the workers' URLs: the CA file, or True (the system's CAs). Never False."""
        return self.ca_location or True

    def auth(self) -> tuple[str, str] | None:
        """Basic-auth credentials for the Connect REST API (password from ``LAKEBUS_CONNECT_PASSWORD``)."""
        if not self.username:
            return None
        if not (password := os.environ.get(CONNECT_PASSWORD_VAR, "")):
            raise SettingsError(CONNECT_PASSWORD_VAR, "is not set but LAKEBUS_CONNECT_USERNAME is",
                                "set it (from your secret store; the secured local stack generates it into secrets.env)")
        return self.username, password


@dataclass(frozen=True, kw_only=True)
class LakeSettings:
    """The lake: the Iceberg REST catalog, the S3 store under it, the warehouse and the ODS namespace."""

    catalog_uri: str
    s3_endpoint: str
    bucket: str
    region: str
    warehouse: str
    namespace: str
    #: the OAuth2 scope a catalog credential asks for (None = the clients' default, ``catalog``)
    catalog_scope: str | None = None
    #: where a catalog credential is exchanged for a token: LAKEBUS_CATALOG_OAUTH2_SERVER_URI, else
    #: (secured profile) the local catalog gate's ``/v1/oauth/tokens``, else None (the clients'
    #: default, the same path under the catalog URI)
    catalog_oauth2_server_uri: str | None = None


@dataclass(frozen=True, kw_only=True)
class SparkSettings:
    """Where the lakehouse's Spark runs."""

    master: str
    driver_memory: str
    #: the Spark Connect server runs attach to (``sc://host:port``); None = an embedded session per step
    remote: str | None
    #: where an embedded Spark session's jars are cached (see :mod:`lakebus_dagster.lake.jars`)
    jars_cache_dir: Path
    #: how long a step waits for a Spark Connect server that does not answer (LAKEBUS_SPARK_CONNECT_WAIT_S)
    connect_wait_s: int = 60


@dataclass(frozen=True, kw_only=True)
class AlertSettings:
    """Where alerts go (the webhook's URL is a secret: LAKEBUS_ALERT_WEBHOOK_URL, never stored here)."""

    #: "log" (the daemon's log) or "webhook"
    sink: str = "log"
    #: the webhook body: "slack", "feishu" or "generic" (the alert as JSON)
    body_format: str = "slack"


@dataclass(frozen=True, kw_only=True)
class BusTuning:
    """The bus's deployment tuning (``BusLayoutResource`` fills its unset fields from it)."""

    #: isolates a whole bus (topics, connector, namespaces) on a shared cluster; "" = the real names
    suffix: str = ""
    #: the sink's commit interval; tests shorten it
    sink_commit_interval_ms: int | None = None
    #: the bus topic's partitions and the sink's tasks.max (None = the layout's: 1, one task per partition)
    partitions: int | None = None
    sink_tasks_max: int | None = None
    #: replication factor and min.insync.replicas of the layout's topics (None = broker default)
    replication_factor: int = 1
    min_insync_replicas: int | None = None


@dataclass(frozen=True, kw_only=True)
class CaptureSettings:
    """Change capture from PostgreSQL (its port is :attr:`Ports.postgres`, its password only ever from the environment)."""

    #: LAKEBUS_POSTGRES=on: the local stack runs PostgreSQL, the code location declares its change capture
    enabled: bool = False
    #: the captured database's host as the Connect workers and lakebus reach it (LAKEBUS_POSTGRES_HOST;
    #: default: LAKEBUS_HOST, the local stack's server)
    host: str = "127.0.0.1"
    #: the captured database and the change-capture role
    db: str = "shop"
    user: str = "lakebus_cdc"


def known_protocol(value: str) -> str:
    if value not in KAFKA_SECURITY_PROTOCOLS:
        raise SettingsError("LAKEBUS_KAFKA_SECURITY_PROTOCOL", f"={value!r} is not one of {', '.join(KAFKA_SECURITY_PROTOCOLS)}",
                            "pick one, or unset it for the profile's default")
    return value
