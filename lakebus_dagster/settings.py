"""One place that says where everything is: ports, credentials, paths.

The local stack (``python -m lakebus_dagster.stack``), the Dagster resources and the tests all read
this module, so a port or a path is never written twice. Every value comes from an environment
variable with a local default; production sets the variables (see ``deploy/``).

Secrets are not in code. On first ``stack up`` the local S3 key pair is generated at random and kept
in ``<state>/secrets.env`` (mode 0600); :func:`load_local_secrets` exports it into ``os.environ`` so
Dagster ``EnvVar`` fields and the Connect worker's ``EnvVarConfigProvider`` resolve it the same way
as in production, where the variables come from the deployment's secret store.

Why this module is longer than 300 lines: it is the one environment helper (the design keeps every
read of the environment in one place), so the endpoints, the profiles' shapes and the credentials
that are derived from settings all live beside the settings they derive from.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from lakebus_dagster import envvars
from lakebus_dagster.envvars import SettingsError

__all__ = ["REPO_ROOT", "Settings", "SettingsError", "load_settings", "load_local_secrets", "s3_credentials"]

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


def _env(name: str, default: str) -> str:
    value = os.environ.get(name, "").strip()
    return value or default


#: the alert webhook's URL embeds a token: read through ``dg.EnvVar``, never stored in settings
ALERT_WEBHOOK_URL_VAR = "LAKEBUS_ALERT_WEBHOOK_URL"
#: lakebus's own Kafka password and the Connect REST password: ``dg.EnvVar`` in the resources
KAFKA_PASSWORD_VAR = "LAKEBUS_KAFKA_SASL_PASSWORD"
CONNECT_PASSWORD_VAR = "LAKEBUS_CONNECT_PASSWORD"
#: the secured local stack's other principals (the Connect worker's, the producer's)
CONNECT_KAFKA_PASSWORD_VAR = "LAKEBUS_CONNECT_KAFKA_PASSWORD"
PRODUCER_KAFKA_PASSWORD_VAR = "LAKEBUS_PRODUCER_KAFKA_PASSWORD"
KAFKA_SECURITY_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL")


@dataclass(frozen=True)
class Ports:
    kafka: int
    kafka_controller: int
    connect: int
    rest_catalog: int
    s3: int
    #: the local Spark standalone master; its worker listens on the next port
    spark_master: int = 7077
    #: the master's web UI (its /json/ is the health probe); the worker's UI on the next port, the
    #: Spark Connect server's UI on the one after
    spark_webui: int = 18080
    #: the local Spark Connect server's gRPC port (what ``sc://`` URLs name)
    spark_connect: int = 15002


@dataclass(frozen=True)
class JvmHeaps:
    """Maximum heap per JVM. Sized so the stack at rest stays under 3 GiB resident on a 2-core box."""

    kafka: str
    connect: str
    rest_catalog: str
    s3: str


#: how many brokers and Connect workers each local-stack profile runs
PROFILES = {"single": (1, 1), "cluster": (3, 2), "secured": (1, 1)}
#: broker / Connect worker *n* of the cluster profile listens on the base port + PORT_STEP × (n-1)
PORT_STEP = 10


@dataclass(frozen=True)
class Settings:
    host: str
    ports: Ports
    heaps: JvmHeaps
    state_dir: Path
    jars_cache_dir: Path
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
    #: the catalog / S3 addresses as the Connect workers reach them, when they differ from Dagster's
    #: (another network, a proxy); None = the same addresses
    connect_catalog_uri: str | None = None
    connect_s3_endpoint: str | None = None
    #: the local stack's shape: "single" or "cluster" (see :data:`PROFILES`)
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
    #: where alerts go: "log" (the daemon's log) or "webhook" (URL in LAKEBUS_ALERT_WEBHOOK_URL, a secret)
    alert_sink: str = "log"
    #: the webhook body: "slack", "feishu" or "generic" (the alert as JSON)
    alert_format: str = "slack"
    #: the local stack's Spark Connect server: its driver heap and its executor's
    spark_connect_memory: str = "1g"
    spark_executor_memory: str = "1g"
    #: the Dagster UI's port (``lakebus ui``, ``launch``, ``demo``)
    dagster_port: int = 3000
    #: existing services at other addresses than ``host:<port>`` (None = the local stack's address)
    kafka_bootstrap: str | None = None
    #: an existing Connect cluster's workers (LAKEBUS_CONNECT_URL, comma-separated)
    connect_urls_override: tuple[str, ...] | None = None
    catalog_uri_override: str | None = None
    s3_endpoint_override: str | None = None

    @property
    def secured(self) -> bool:
        """The local stack runs SASL/SCRAM with ACLs and Connect REST basic auth (profile ``secured``)."""
        return self.profile == "secured"

    def kafka_client_config(self) -> dict[str, str]:
        """librdkafka settings for lakebus's own principal: bootstrap servers and, with SASL, the
        mechanism, user and the password from ``LAKEBUS_KAFKA_SASL_PASSWORD`` (read now, never kept)."""
        config = {"bootstrap.servers": self.bootstrap_servers, "security.protocol": self.kafka_security_protocol}
        if self.kafka_security_protocol.startswith("SASL"):
            password = os.environ.get(KAFKA_PASSWORD_VAR, "")
            if not (self.kafka_sasl_username and password):
                raise SettingsError(KAFKA_PASSWORD_VAR if self.kafka_sasl_username else "LAKEBUS_KAFKA_SASL_USERNAME",
                                    f"is not set but LAKEBUS_KAFKA_SECURITY_PROTOCOL={self.kafka_security_protocol}",
                                    "set it (from your secret store; the secured local stack generates it into secrets.env)")
            config.update({"sasl.mechanism": self.kafka_sasl_mechanism, "sasl.username": self.kafka_sasl_username,
                           "sasl.password": password})
        return config

    def connect_auth(self) -> tuple[str, str] | None:
        """Basic-auth credentials for the Connect REST API (password from ``LAKEBUS_CONNECT_PASSWORD``)."""
        if not self.connect_username:
            return None
        password = os.environ.get(CONNECT_PASSWORD_VAR, "")
        if not password:
            raise SettingsError(CONNECT_PASSWORD_VAR, "is not set but LAKEBUS_CONNECT_USERNAME is",
                                "set it (from your secret store; the secured local stack generates it into secrets.env)")
        return self.connect_username, password

    # -- the local stack's shape -------------------------------------------------------------------
    @property
    def brokers(self) -> int:
        return PROFILES[self.profile][0]

    @property
    def connect_workers(self) -> int:
        return PROFILES[self.profile][1]

    def broker_port(self, node: int) -> int:
        """Client port of broker ``node`` (1-based) of the local stack."""
        return self.ports.kafka + PORT_STEP * (node - 1)

    def controller_port(self, node: int) -> int:
        return self.ports.kafka_controller + PORT_STEP * (node - 1)

    def connect_port(self, worker: int) -> int:
        """REST port of Connect worker ``worker`` (1-based) of the local stack."""
        return self.ports.connect + PORT_STEP * (worker - 1)

    @property
    def local_spark_master(self) -> str:
        """The local stack's Spark standalone master, for ``LAKEBUS_SPARK_MASTER``."""
        return f"spark://{self.host}:{self.ports.spark_master}"

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

    # -- state layout ----------------------------------------------------------------------------
    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def run_dir(self) -> Path:
        return self.state_dir / "run"

    @property
    def data_dir(self) -> Path:
        return self.state_dir / "data"

    @property
    def secrets_file(self) -> Path:
        return self.state_dir / "secrets.env"


def load_settings() -> Settings:
    """Read and check the settings (cheap; call it where you need it): each variable from the
    environment, else the deployment's config file (:mod:`lakebus_dagster.config_file`), else its default.

    Raises :class:`SettingsError` (a ``ValueError``) naming the first variable whose value is
    unusable: a port outside 1-65535, a URL without scheme or host, an unknown choice, ...
    Every variable, its default and its meaning are listed in :mod:`lakebus_dagster.envvars`.
    """
    e = envvars
    profile = e.choice("LAKEBUS_PROFILE", tuple(PROFILES))
    default_state = REPO_ROOT / (".lakebus" if profile == "single" else f".lakebus-{profile}")
    state_dir = Path(envvars.raw("LAKEBUS_STATE_DIR") or str(default_state)).resolve()
    clustered = profile == "cluster"
    replication = e.optional_int("LAKEBUS_TOPIC_REPLICATION_FACTOR", minimum=1) or (3 if clustered else 1)
    min_isr = e.optional_int("LAKEBUS_TOPIC_MIN_INSYNC_REPLICAS", minimum=1) or (2 if clustered else None)
    if min_isr is not None and min_isr > replication:
        raise SettingsError("LAKEBUS_TOPIC_MIN_INSYNC_REPLICAS", f"={min_isr!r} exceeds the replication factor {replication}",
                            "set it to at most LAKEBUS_TOPIC_REPLICATION_FACTOR")
    cache_home = Path(_env("XDG_CACHE_HOME", str(Path.home() / ".cache")))
    bucket = e.matching("LAKEBUS_BUCKET", r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", "an S3 bucket name (3-63 of a-z 0-9 . -)")
    alert_sink = e.choice("LAKEBUS_ALERT_SINK", ("log", "webhook"))
    host = e.matching("LAKEBUS_HOST", r"[A-Za-z0-9_.:\[\]-]+", "a host name or IP address (no scheme, port or path)")
    settings = Settings(
        host=host,
        ports=Ports(
            kafka=e.port("LAKEBUS_KAFKA_PORT"),
            kafka_controller=e.port("LAKEBUS_KAFKA_CONTROLLER_PORT"),
            connect=e.port("LAKEBUS_CONNECT_PORT"),
            rest_catalog=e.port("LAKEBUS_REST_CATALOG_PORT"),
            s3=e.port("LAKEBUS_S3_PORT"),
            spark_master=e.port("LAKEBUS_SPARK_MASTER_PORT"),
            spark_webui=e.port("LAKEBUS_SPARK_WEBUI_PORT"),
            spark_connect=e.port("LAKEBUS_SPARK_CONNECT_PORT"),
        ),
        heaps=JvmHeaps(
            kafka=e.memory_size("LAKEBUS_KAFKA_HEAP"),
            connect=e.memory_size("LAKEBUS_CONNECT_HEAP"),
            rest_catalog=e.memory_size("LAKEBUS_REST_CATALOG_HEAP"),
            s3=e.memory_size("LAKEBUS_S3_HEAP"),
        ),
        state_dir=state_dir,
        jars_cache_dir=Path(e.raw("LAKEBUS_JARS_CACHE") or str(cache_home / "lakebus" / "jars")).resolve(),
        bucket=bucket,
        region=e.matching("LAKEBUS_S3_REGION", r"[a-z0-9-]+", "an S3 region (e.g. us-east-1)"),
        warehouse=e.optional_url("LAKEBUS_WAREHOUSE", ("s3", "s3a")) or f"s3://{bucket}/",
        namespace=e.matching("LAKEBUS_NAMESPACE", r"[A-Za-z_][A-Za-z0-9_]*", "an identifier (letters, digits, _)"),
        spark_master=e.matching("LAKEBUS_SPARK_MASTER", r"\S+", "a Spark master URL (local[2], spark://host:7077, ...)"),
        spark_driver_memory=e.memory_size("LAKEBUS_SPARK_DRIVER_MEMORY"),
        spark_remote=e.spark_remote("LAKEBUS_SPARK_REMOTE", f"sc://{host}:{e.port('LAKEBUS_SPARK_CONNECT_PORT')}"),
        spark_connect_memory=e.memory_size("LAKEBUS_SPARK_CONNECT_MEMORY"),
        spark_executor_memory=e.memory_size("LAKEBUS_SPARK_EXECUTOR_MEMORY"),
        bus_suffix=e.matching("LAKEBUS_BUS_SUFFIX", r"[A-Za-z0-9._-]*", "a topic-name suffix (letters, digits, . _ -)"),
        sink_commit_interval_ms=e.optional_int("LAKEBUS_SINK_COMMIT_INTERVAL_MS") or None,  # 0 = the default too
        connect_catalog_uri=e.optional_url("LAKEBUS_CONNECT_CATALOG_URI"),
        connect_s3_endpoint=e.optional_url("LAKEBUS_CONNECT_S3_ENDPOINT"),
        profile=profile,
        kafka_security_protocol=_security_protocol(profile),
        kafka_sasl_mechanism=e.choice("LAKEBUS_KAFKA_SASL_MECHANISM", ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")),
        kafka_sasl_username=e.raw("LAKEBUS_KAFKA_SASL_USERNAME") or ("lakebus" if profile == "secured" else None),
        connect_username=e.raw("LAKEBUS_CONNECT_USERNAME") or ("lakebus" if profile == "secured" else None),
        bus_partitions=e.optional_int("LAKEBUS_BUS_PARTITIONS", minimum=1),
        sink_tasks_max=e.optional_int("LAKEBUS_SINK_TASKS_MAX", minimum=1),
        topic_replication_factor=replication,
        topic_min_insync_replicas=min_isr,
        alert_sink=alert_sink,
        alert_format=e.choice("LAKEBUS_ALERT_FORMAT", ("slack", "feishu", "generic")),
        dagster_port=e.port("LAKEBUS_DAGSTER_PORT"),
        kafka_bootstrap=e.optional_bootstrap("LAKEBUS_KAFKA_BOOTSTRAP"),
        connect_urls_override=e.optional_urls("LAKEBUS_CONNECT_URL"),
        catalog_uri_override=e.optional_url("LAKEBUS_CATALOG_URI"),
        s3_endpoint_override=e.optional_url("LAKEBUS_S3_ENDPOINT"),
    )
    # a secret (only ever from the environment): checked for shape (never echoed) only when it is
    # used, and last, so `lakebus config` reports every other bad value before this one
    if alert_sink == "webhook":
        if not e.raw(ALERT_WEBHOOK_URL_VAR):
            raise SettingsError(ALERT_WEBHOOK_URL_VAR, "is not set but LAKEBUS_ALERT_SINK=webhook",
                                "set it to the webhook URL (from your secret store), or set LAKEBUS_ALERT_SINK=log")
        e.optional_url(ALERT_WEBHOOK_URL_VAR)
    return settings


def _security_protocol(profile: str) -> str:
    value = envvars.raw("LAKEBUS_KAFKA_SECURITY_PROTOCOL") or ("SASL_PLAINTEXT" if profile == "secured" else "PLAINTEXT")
    if value not in KAFKA_SECURITY_PROTOCOLS:
        raise SettingsError("LAKEBUS_KAFKA_SECURITY_PROTOCOL", f"={value!r} is not one of {', '.join(KAFKA_SECURITY_PROTOCOLS)}",
                            "pick one, or unset it for the profile's default")
    return value


def load_local_secrets(settings: Settings | None = None, *, create: bool = False) -> None:
    """Export the local stack's generated secrets (S3 key pair, Kafka and Connect passwords) into
    ``os.environ`` unless the variables are already set.

    With ``create=True`` (only ``stack up`` does this) a missing secrets file is generated. Values
    already in the environment always win, so a deployment's real secrets are never overridden.
    """
    settings = settings or load_settings()
    path = settings.secrets_file
    if not path.exists() and not create:
        return
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a") as fh:
            present = {line.partition("=")[0] for line in path.read_text().splitlines()}
            # a file from before a key existed gets only the missing keys; existing ones never change
            fh.writelines(f"{key}={make()}\n" for key, make in _LOCAL_SECRETS.items() if key not in present)
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not os.environ.get(key.strip()):
            os.environ[key.strip()] = value.strip()


#: the local stack's generated secrets (``<state>/secrets.env``, mode 0600)
_LOCAL_SECRETS = {
    S3_ACCESS_KEY_VAR: lambda: f"lakebus-{secrets.token_hex(4)}",
    S3_SECRET_KEY_VAR: lambda: secrets.token_urlsafe(24),
    KAFKA_PASSWORD_VAR: lambda: secrets.token_urlsafe(24),
    CONNECT_PASSWORD_VAR: lambda: secrets.token_urlsafe(24),
    CONNECT_KAFKA_PASSWORD_VAR: lambda: secrets.token_urlsafe(24),
    PRODUCER_KAFKA_PASSWORD_VAR: lambda: secrets.token_urlsafe(24),
}


def s3_credentials() -> tuple[str, str]:
    """The S3 key pair from the environment (after :func:`load_local_secrets`), or a clear error."""
    access, secret = os.environ.get(S3_ACCESS_KEY_VAR), os.environ.get(S3_SECRET_KEY_VAR)
    if not access or not secret:
        raise RuntimeError(
            f"{S3_ACCESS_KEY_VAR} / {S3_SECRET_KEY_VAR} are not set; run `make stack-up` (local) "
            "or provide them from your secret store"
        )
    return access, secret
