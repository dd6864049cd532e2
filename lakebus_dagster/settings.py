"""What a lakebus deployment configures: endpoints, credentials, names and tuning.

The Dagster resources (:mod:`lakebus_dagster.defs.resources`), the core packages and the CLI read
this module, so an address or a credential is never written twice. Every value comes from an
environment variable (or the deployment's config file, :mod:`lakebus_dagster.config_file`) with a
local default; production sets the variables (see ``deploy/``).

Why the defaults are the local stack's addresses: with nothing configured lakebus talks to the dev
stack on ``LAKEBUS_HOST`` (its base ports, and each broker / Connect worker of the profile at the
base port + :data:`PORT_STEP` × (n-1)), so that one fact lives here. What *only* the dev stack needs
(its JVM heaps, its other ports, its state directory's layout, the generation of its secrets) is
:mod:`lakebus_dagster.stack.local_settings` and :mod:`lakebus_dagster.stack.secrets`; production
never loads it.

Secrets are not in code: production's come from its secret store as environment variables; locally
:func:`load_local_secrets` exports the ones the dev stack generated, so ``EnvVar`` fields resolve alike.

Why this module is longer than 300 lines: it is the one place that reads a deployment's environment
(the design keeps every read in one module), so each field's loader and check sit beside the field.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakebus_dagster import setting_readers
from lakebus_dagster.envvars import SettingsError

__all__ = ["REPO_ROOT", "Settings", "SettingsError", "catalog_secrets", "load_settings", "load_local_secrets",
           "s3_credentials"]

REPO_ROOT = Path(__file__).resolve().parent.parent

#: Environment variable names of the S3 key pair. Resources read them through ``dg.EnvVar`` and the
#: Connect worker resolves ``${env:...}`` placeholders with them, so their *names* are public API.
S3_ACCESS_KEY_VAR = "LAKEBUS_S3_ACCESS_KEY_ID"
S3_SECRET_KEY_VAR = "LAKEBUS_S3_SECRET_ACCESS_KEY"

#: AWS SDK >= 2.30 sends CRC32 trailing checksums by default; S3-compatible stores differ in how
#: well they take them, so every JVM client asks for checksums only when an operation requires one.
AWS_SDK_ENV = {
    "AWS_REQUEST_CHECKSUM_CALCULATION": "WHEN_REQUIRED",
    "AWS_RESPONSE_CHECKSUM_VALIDATION": "WHEN_REQUIRED",
}

#: the alert webhook's URL embeds a token: read through ``dg.EnvVar``, never stored in settings
ALERT_WEBHOOK_URL_VAR = "LAKEBUS_ALERT_WEBHOOK_URL"
#: lakebus's own Kafka password and the Connect REST password: ``dg.EnvVar`` in the resources
KAFKA_PASSWORD_VAR = "LAKEBUS_KAFKA_SASL_PASSWORD"
CONNECT_PASSWORD_VAR = "LAKEBUS_CONNECT_PASSWORD"
#: the change-capture role's PostgreSQL password: the Connect worker resolves ``${env:...}`` with it
POSTGRES_PASSWORD_VAR = "LAKEBUS_POSTGRES_PASSWORD"
#: the Iceberg REST catalog's OAuth2 client credential (``client_id:client_secret``) or bearer token:
#: ``dg.EnvVar`` in the resources, ``${env:…}`` in the sink's config, never in a file of the repo
CATALOG_CREDENTIAL_VAR = "LAKEBUS_CATALOG_CREDENTIAL"
CATALOG_TOKEN_VAR = "LAKEBUS_CATALOG_TOKEN"
#: the secured local stack's catalog gate grants this scope only (so the setting is proven to reach every client)
SECURED_CATALOG_SCOPE = "lakebus"
KAFKA_SECURITY_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL")
#: the variable behind each field :func:`lakebus_dagster.kafka.client_config` may find missing
KAFKA_CLIENT_VARS = {"sasl_mechanism": "LAKEBUS_KAFKA_SASL_MECHANISM", "sasl_username": "LAKEBUS_KAFKA_SASL_USERNAME",
                     "sasl_password": KAFKA_PASSWORD_VAR}

#: how many brokers and Connect workers each local-stack profile runs (the default endpoints list them all)
PROFILES = {"single": (1, 1), "cluster": (3, 2), "secured": (1, 1)}
#: broker / Connect worker *n* of the cluster profile listens on the base port + PORT_STEP × (n-1)
PORT_STEP = 10
#: the local stack's generated secrets, in its state directory (mode 0600; see stack/secrets.py)
SECRETS_FILE_NAME = "secrets.env"


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
class Settings:
    """A deployment's settings: what the Dagster resources, the CLI and the core packages read."""

    host: str
    ports: Ports
    bucket: str
    region: str
    warehouse: str
    namespace: str
    spark_master: str
    spark_driver_memory: str
    #: the Spark Connect server runs attach to (``sc://host:port``); None = an embedded session per step
    spark_remote: str | None
    #: isolates a whole bus (topics, connector, namespaces) on a shared cluster; "" = the real names
    bus_suffix: str
    #: the sink's commit interval; tests shorten it
    sink_commit_interval_ms: int | None
    #: where an embedded Spark session's jars are cached (see :mod:`lakebus_dagster.lake.jars`)
    jars_cache_dir: Path
    #: the local stack's state directory: a code location on a developer's machine finds the stack's
    #: generated secrets (:func:`load_local_secrets`) and the file demo's directory there; its layout
    #: is the stack's (:mod:`lakebus_dagster.stack.local_settings`)
    state_dir: Path
    #: the catalog / S3 addresses as the Connect workers reach them, when they differ from Dagster's
    #: (another network, a proxy); None = the same addresses
    connect_catalog_uri: str | None = None
    connect_s3_endpoint: str | None = None
    #: the local stack's shape: "single", "cluster" or "secured" (see :data:`PROFILES`); it sets the
    #: defaults of the endpoints, the replication and the authentication
    profile: str = "single"
    #: the bus topic's partitions and the sink's tasks.max (None = the layout's: 1, one task per partition)
    bus_partitions: int | None = None
    sink_tasks_max: int | None = None
    #: replication factor and min.insync.replicas of the layout's topics (None = broker default)
    topic_replication_factor: int = 1
    topic_min_insync_replicas: int | None = None
    #: how lakebus authenticates to Kafka (the password is only ever read from the environment)
    kafka_security_protocol: str = "PLAINTEXT"
    kafka_sasl_mechanism: str = "SCRAM-SHA-512"
    kafka_sasl_username: str | None = None
    #: the Connect REST API's basic-auth user (password from LAKEBUS_CONNECT_PASSWORD)
    connect_username: str | None = None
    #: the OAuth2 scope a catalog credential asks for (None = the clients' default, ``catalog``)
    catalog_scope: str | None = None
    #: LAKEBUS_CATALOG_OAUTH2_SERVER_URI (None = the default, see :attr:`catalog_oauth2_server_uri`)
    catalog_oauth2_server_uri_override: str | None = None
    #: where alerts go: "log" (the daemon's log) or "webhook" (URL in LAKEBUS_ALERT_WEBHOOK_URL, a secret)
    alert_sink: str = "log"
    #: the webhook body: "slack", "feishu" or "generic" (the alert as JSON)
    alert_format: str = "slack"
    #: existing services at other addresses than ``host:<port>`` (None = the local stack's address)
    kafka_bootstrap: str | None = None
    #: an existing Connect cluster's workers (LAKEBUS_CONNECT_URL, comma-separated)
    connect_urls_override: tuple[str, ...] | None = None
    catalog_uri_override: str | None = None
    s3_endpoint_override: str | None = None
    #: LAKEBUS_POSTGRES=on: the local stack runs PostgreSQL, the code location declares its change capture
    postgres: bool = False
    #: the captured database and the change-capture role (its password only ever from the environment)
    postgres_db: str = "shop"
    postgres_user: str = "lakebus_cdc"

    @property
    def exactly_once_sources(self) -> bool:
        """Change capture asks for exactly-once source delivery (KIP-618), and the local stack's workers
        enable it: with LAKEBUS_POSTGRES=on, outside the secured profile (its principals have no
        transactional-id ACLs for source tasks yet). A worker without ``exactly.once.source.support``
        rejects a connector that requires it, naming the setting."""
        return self.postgres and self.profile != "secured"

    def kafka_client_config(self) -> dict[str, Any]:
        """librdkafka settings for lakebus's own principal (:func:`lakebus_dagster.kafka.client_config`):
        bootstrap servers and, with SASL, the mechanism, user and the password from
        ``LAKEBUS_KAFKA_SASL_PASSWORD`` (read now, never kept)."""
        from lakebus_dagster.kafka.clients import KafkaConfigError, client_config  # not at import: settings stay light

        # load_settings checked the protocol; a Settings built by hand gets the same error here
        sasl = _known_protocol(self.kafka_security_protocol).startswith("SASL")
        try:
            return client_config(
                self.bootstrap_servers, security_protocol=self.kafka_security_protocol,
                **(dict(sasl_mechanism=self.kafka_sasl_mechanism, sasl_username=self.kafka_sasl_username,
                        sasl_password=os.environ.get(KAFKA_PASSWORD_VAR, "")) if sasl else {}),
            )
        except KafkaConfigError as exc:
            raise SettingsError(KAFKA_CLIENT_VARS[exc.field],
                                f"is not set but LAKEBUS_KAFKA_SECURITY_PROTOCOL={self.kafka_security_protocol}",
                                "set it (from your secret store; the secured local stack generates it into secrets.env)") from None

    def connect_auth(self) -> tuple[str, str] | None:
        """Basic-auth credentials for the Connect REST API (password from ``LAKEBUS_CONNECT_PASSWORD``)."""
        if not self.connect_username:
            return None
        if not (password := os.environ.get(CONNECT_PASSWORD_VAR, "")):
            raise SettingsError(CONNECT_PASSWORD_VAR, "is not set but LAKEBUS_CONNECT_USERNAME is",
                                "set it (from your secret store; the secured local stack generates it into secrets.env)")
        return self.connect_username, password

    # -- the local stack's addresses (the endpoints' defaults) ------------------------------------
    @property
    def brokers(self) -> int:
        return PROFILES[self.profile][0]

    @property
    def connect_workers(self) -> int:
        return PROFILES[self.profile][1]

    def broker_port(self, node: int) -> int:
        """Client port of broker ``node`` (1-based) of the local stack."""
        return self.ports.kafka + PORT_STEP * (node - 1)

    def connect_port(self, worker: int) -> int:
        """REST port of Connect worker ``worker`` (1-based) of the local stack."""
        return self.ports.connect + PORT_STEP * (worker - 1)

    @property
    def secrets_file(self) -> Path:
        """The local stack's generated secrets (absent in production: they come from the environment)."""
        return self.state_dir / SECRETS_FILE_NAME

    # -- endpoints -------------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        if self.kafka_bootstrap:
            return self.kafka_bootstrap
        return ",".join(f"{self.host}:{self.broker_port(n)}" for n in range(1, self.brokers + 1))

    @property
    def connect_urls(self) -> tuple[str, ...]:
        """Every Connect worker's REST URL: ``LAKEBUS_CONNECT_URL``'s list, else each worker of the
        local stack's profile. lakebus's client uses whichever answers, so losing one worker of the
        cluster profile does not make Connect look unreachable."""
        if self.connect_urls_override:
            return self.connect_urls_override
        return tuple(f"http://{self.host}:{self.connect_port(n)}" for n in range(1, self.connect_workers + 1))

    @property
    def connect_url(self) -> str:
        """The first worker's URL, for a raw HTTP call that needs one address (tests, benchmarks);
        :attr:`connect_urls` (and ``ConnectResource``) for anything that should survive a worker."""
        return self.connect_urls[0]

    @property
    def catalog_uri(self) -> str:
        return self.catalog_uri_override or f"http://{self.host}:{self.ports.rest_catalog}"

    @property
    def s3_endpoint(self) -> str:
        return self.s3_endpoint_override or f"http://{self.host}:{self.ports.s3}"

    @property
    def catalog_oauth2_server_uri(self) -> str | None:
        """Where a catalog credential is exchanged for a token: the setting, else (secured profile) the
        local catalog gate's ``/v1/oauth/tokens`` named explicitly, else None (the clients' default,
        the same path under the catalog URI)."""
        if self.catalog_oauth2_server_uri_override:
            return self.catalog_oauth2_server_uri_override
        return f"{self.catalog_uri}/v1/oauth/tokens" if self.profile == "secured" else None


def load_settings() -> Settings:
    """Read and check the settings (cheap; call it where you need it): each variable from the
    environment, else the deployment's config file (:mod:`lakebus_dagster.config_file`), else its default.

    Raises :class:`SettingsError` (a ``ValueError``) naming the first variable whose value is
    unusable: a port outside 1-65535, a URL without scheme or host, an unknown choice, ...
    Every variable, its default and its meaning are listed in :mod:`lakebus_dagster.envvars`.
    The dev stack's own settings: :func:`lakebus_dagster.stack.local_settings.load_stack_settings`.
    """
    e = setting_readers
    profile = e.choice("LAKEBUS_PROFILE", tuple(PROFILES))
    host = e.matching("LAKEBUS_HOST", r"[A-Za-z0-9_.:\[\]-]+", "a host name or IP address (no scheme, port or path)")
    bucket = e.matching("LAKEBUS_BUCKET", r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", "an S3 bucket name (3-63 of a-z 0-9 . -)")
    alert_sink = e.choice("LAKEBUS_ALERT_SINK", ("log", "webhook"))
    settings = Settings(
        host=host,
        ports=Ports(kafka=e.port("LAKEBUS_KAFKA_PORT"), connect=e.port("LAKEBUS_CONNECT_PORT"),
                    rest_catalog=e.port("LAKEBUS_REST_CATALOG_PORT"), s3=e.port("LAKEBUS_S3_PORT"),
                    spark_connect=e.port("LAKEBUS_SPARK_CONNECT_PORT"), postgres=e.port("LAKEBUS_POSTGRES_PORT")),
        bucket=bucket,
        region=e.matching("LAKEBUS_S3_REGION", r"[a-z0-9-]+", "an S3 region (e.g. us-east-1)"),
        warehouse=e.optional_url("LAKEBUS_WAREHOUSE", ("s3", "s3a")) or f"s3://{bucket}/",
        namespace=e.matching("LAKEBUS_NAMESPACE", r"[A-Za-z_][A-Za-z0-9_]*", "an identifier (letters, digits, _)"),
        spark_master=e.matching("LAKEBUS_SPARK_MASTER", r"\S+", "a Spark master URL (local[2], spark://host:7077, ...)"),
        spark_driver_memory=e.memory_size("LAKEBUS_SPARK_DRIVER_MEMORY"),
        spark_remote=e.spark_remote("LAKEBUS_SPARK_REMOTE", f"sc://{host}:{e.port('LAKEBUS_SPARK_CONNECT_PORT')}"),
        bus_suffix=e.matching("LAKEBUS_BUS_SUFFIX", r"[A-Za-z0-9._-]*", "a topic-name suffix (letters, digits, . _ -)"),
        sink_commit_interval_ms=e.optional_int("LAKEBUS_SINK_COMMIT_INTERVAL_MS") or None,  # 0 = the default too
        jars_cache_dir=_jars_cache_dir(),
        state_dir=_state_dir(profile),
        connect_catalog_uri=e.optional_url("LAKEBUS_CONNECT_CATALOG_URI"),
        connect_s3_endpoint=e.optional_url("LAKEBUS_CONNECT_S3_ENDPOINT"),
        profile=profile,
        **_topic_settings(profile),
        **_auth_settings(profile),
        alert_sink=alert_sink,
        alert_format=e.choice("LAKEBUS_ALERT_FORMAT", ("slack", "feishu", "generic")),
        kafka_bootstrap=e.optional_bootstrap("LAKEBUS_KAFKA_BOOTSTRAP"),
        connect_urls_override=e.optional_urls("LAKEBUS_CONNECT_URL"),
        catalog_uri_override=e.optional_url("LAKEBUS_CATALOG_URI"),
        catalog_scope=e.matching("LAKEBUS_CATALOG_SCOPE", r'[^\s"\\]*( [^\s"\\]+)*',
                                 "OAuth2 scope tokens separated by single spaces") or (SECURED_CATALOG_SCOPE if profile == "secured" else None),
        catalog_oauth2_server_uri_override=e.optional_url("LAKEBUS_CATALOG_OAUTH2_SERVER_URI"),
        s3_endpoint_override=e.optional_url("LAKEBUS_S3_ENDPOINT"),
        postgres=e.choice("LAKEBUS_POSTGRES", ("off", "on")) == "on",
        postgres_db=e.matching("LAKEBUS_POSTGRES_DB", r"[a-z_][a-z0-9_]{0,62}", "a lower-case identifier (a-z 0-9 _)"),
        postgres_user=e.matching("LAKEBUS_POSTGRES_USER", r"[a-z_][a-z0-9_]{0,62}", "a lower-case identifier (a-z 0-9 _)"),
    )
    _check_alert_webhook(alert_sink)
    return settings


def _state_dir(profile: str) -> Path:
    default_state = REPO_ROOT / (".lakebus" if profile == "single" else f".lakebus-{profile}")
    return Path(setting_readers.raw("LAKEBUS_STATE_DIR") or str(default_state)).resolve()


def _jars_cache_dir() -> Path:
    cache_home = Path(os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache"))
    return Path(setting_readers.raw("LAKEBUS_JARS_CACHE") or str(cache_home / "lakebus" / "jars")).resolve()


def _topic_settings(profile: str) -> dict[str, int | None]:
    """The bus's partitions and tasks, and the topics' replication (the cluster profile: 3, min ISR 2)."""
    e, clustered = setting_readers, profile == "cluster"
    bus_partitions = e.optional_int("LAKEBUS_BUS_PARTITIONS", minimum=1)
    sink_tasks_max = e.optional_int("LAKEBUS_SINK_TASKS_MAX", minimum=1)
    replication = e.optional_int("LAKEBUS_TOPIC_REPLICATION_FACTOR", minimum=1) or (3 if clustered else 1)
    min_isr = e.optional_int("LAKEBUS_TOPIC_MIN_INSYNC_REPLICAS", minimum=1) or (2 if clustered else None)
    if min_isr is not None and min_isr > replication:
        raise SettingsError("LAKEBUS_TOPIC_MIN_INSYNC_REPLICAS", f"={min_isr!r} exceeds the replication factor {replication}",
                            "set it to at most LAKEBUS_TOPIC_REPLICATION_FACTOR")
    return {"bus_partitions": bus_partitions, "sink_tasks_max": sink_tasks_max,
            "topic_replication_factor": replication, "topic_min_insync_replicas": min_isr}


def _auth_settings(profile: str) -> dict[str, str | None]:
    """How lakebus authenticates to Kafka and Connect (the secured profile: SASL/SCRAM as ``lakebus``)."""
    e, secured = setting_readers, profile == "secured"
    return {
        "kafka_security_protocol": _security_protocol(profile),
        "kafka_sasl_mechanism": e.choice("LAKEBUS_KAFKA_SASL_MECHANISM", ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")),
        "kafka_sasl_username": e.raw("LAKEBUS_KAFKA_SASL_USERNAME") or ("lakebus" if secured else None),
        "connect_username": e.raw("LAKEBUS_CONNECT_USERNAME") or ("lakebus" if secured else None),
    }


def _security_protocol(profile: str) -> str:
    return _known_protocol(
        setting_readers.raw("LAKEBUS_KAFKA_SECURITY_PROTOCOL") or ("SASL_PLAINTEXT" if profile == "secured" else "PLAINTEXT"))


def _known_protocol(value: str) -> str:
    if value not in KAFKA_SECURITY_PROTOCOLS:
        raise SettingsError("LAKEBUS_KAFKA_SECURITY_PROTOCOL", f"={value!r} is not one of {', '.join(KAFKA_SECURITY_PROTOCOLS)}",
                            "pick one, or unset it for the profile's default")
    return value


def _check_alert_webhook(alert_sink: str) -> None:
    """A secret (only ever from the environment): checked for shape (never echoed) only when it is
    used, and last, so `lakebus config` reports every other bad value before this one."""
    if alert_sink == "webhook":
        if not setting_readers.raw(ALERT_WEBHOOK_URL_VAR):
            raise SettingsError(ALERT_WEBHOOK_URL_VAR, "is not set but LAKEBUS_ALERT_SINK=webhook",
                                "set it to the webhook URL (from your secret store), or set LAKEBUS_ALERT_SINK=log")
        setting_readers.optional_url(ALERT_WEBHOOK_URL_VAR)


def load_local_secrets(settings: Settings | None = None) -> None:
    """Export the local stack's generated secrets (S3 key pair, Kafka and Connect passwords) from
    :attr:`Settings.secrets_file` into ``os.environ`` unless the variables are already set.

    A missing file is no error (production has none; the stack's ``up`` generates it, see
    :mod:`lakebus_dagster.stack.secrets`). Values already in the environment always win, so a
    deployment's real secrets are never overridden.
    """
    path = (settings or load_settings()).secrets_file
    for line in path.read_text().splitlines() if path.exists() else ():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not os.environ.get(key.strip()):
            os.environ[key.strip()] = value.strip()


def catalog_secrets() -> tuple[str | None, str | None]:
    """The catalog's OAuth2 credential and bearer token from the environment (after
    :func:`load_local_secrets`), each None when unset; checked for shape, never echoed."""
    credential = os.environ.get(CATALOG_CREDENTIAL_VAR, "").strip() or None
    token = os.environ.get(CATALOG_TOKEN_VAR, "").strip() or None
    if credential and token:
        raise SettingsError(CATALOG_TOKEN_VAR, f"and {CATALOG_CREDENTIAL_VAR} are both set",
                            "set one: the OAuth2 client credential, or a bearer token")
    if credential is not None:
        client_id, sep, secret = credential.partition(":")
        if not (sep and client_id and secret) or any(c.isspace() for c in credential):
            raise SettingsError(CATALOG_CREDENTIAL_VAR, "is not `client_id:client_secret` (value not shown)",
                                "set it to the catalog's OAuth2 client id and secret joined by `:` (from your secret store)")
    return credential, token


def s3_credentials() -> tuple[str, str]:
    """The S3 key pair from the environment (after :func:`load_local_secrets`), or a clear error."""
    access, secret = os.environ.get(S3_ACCESS_KEY_VAR), os.environ.get(S3_SECRET_KEY_VAR)
    if not access or not secret:
        raise RuntimeError(
            f"{S3_ACCESS_KEY_VAR} / {S3_SECRET_KEY_VAR} are not set; run `make stack-up` (local) "
            "or provide them from your secret store"
        )
    return access, secret
