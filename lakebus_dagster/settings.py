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
:func:`load_local_secrets` exports the ones the dev stack generated, so ``EnvVar`` fields resolve alike;
the variables' names and the checked reads are :mod:`lakebus_dagster.secret_env`.

The settings are split by concern (:class:`KafkaSettings`, :class:`ConnectSettings`,
:class:`LakeSettings`, :class:`SparkSettings`, :class:`AlertSettings`, :class:`BusTuning`,
:class:`CaptureSettings`, in :mod:`lakebus_dagster.setting_groups`) and loaded once by
:func:`load_settings` through one :class:`~lakebus_dagster.setting_readers.SettingsReader`
(environment > config file > default), which the caller may pass in (``lakebus config``'s collects
every problem instead of stopping).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from lakebus_dagster.config_file import LoadedConfig
from lakebus_dagster.envvars import SettingsError
from lakebus_dagster.secret_env import (ALERT_WEBHOOK_URL_VAR, CONNECT_PASSWORD_VAR, KAFKA_PASSWORD_VAR, SECRETS_FILE_NAME,
                                        local_secrets)
from lakebus_dagster.setting_groups import (AlertSettings, BusTuning, CaptureSettings, ConnectSettings, KafkaSettings, LakeSettings,
                                           Ports, SparkSettings, known_protocol)
from lakebus_dagster.setting_readers import SettingsReader

__all__ = ["REPO_ROOT", "AlertSettings", "BusTuning", "CaptureSettings", "ConnectSettings", "KafkaSettings",
           "LakeSettings", "Settings", "SettingsError", "SettingsReader", "SparkSettings",
           "load_settings", "load_local_secrets", "local_ca_file"]

REPO_ROOT = Path(__file__).resolve().parent.parent

#: AWS SDK >= 2.30 sends CRC32 trailing checksums by default; S3-compatible stores differ in how
#: well they take them, so every JVM client asks for checksums only when an operation requires one.
AWS_SDK_ENV = {
    "AWS_REQUEST_CHECKSUM_CALCULATION": "WHEN_REQUIRED",
    "AWS_RESPONSE_CHECKSUM_VALIDATION": "WHEN_REQUIRED",
}

#: the secured local stack's catalog gate grants this scope only (so the setting is proven to reach every client)
SECURED_CATALOG_SCOPE = "lakebus"

#: the secured local stack's TLS material, in its state directory (lakebus_dagster/stack/tls.py writes it)
TLS_DIR_NAME = "tls"


def local_ca_file(state_dir: Path) -> Path:
    """The secured local stack's CA certificate: the default of LAKEBUS_KAFKA_SSL_CA_LOCATION and
    LAKEBUS_CONNECT_CA_LOCATION for that profile."""
    return state_dir / TLS_DIR_NAME / "ca.crt"


#: how many brokers and Connect workers each local-stack profile runs (the default endpoints list them all)
PROFILES = {"single": (1, 1), "cluster": (3, 2), "secured": (1, 1)}
#: broker / Connect worker *n* of the cluster profile listens on the base port + PORT_STEP × (n-1)
PORT_STEP = 10
#: what a host setting may hold (LAKEBUS_HOST, LAKEBUS_POSTGRES_HOST), and how its error names it
HOST_PATTERN = r"[A-Za-z0-9_.:\[\]-]+"
HOST_WHAT = "a host name or IP address (no scheme, port or path)"


@dataclass(frozen=True, kw_only=True)
class Settings:
    """A deployment's settings, by concern: what the Dagster resources, the CLI and the core packages read.

    Loaded once per process entry (the code location, a CLI command, a run's bus layout) by
    :func:`load_settings` through one :class:`~lakebus_dagster.setting_readers.SettingsReader`."""

    #: the local stack's shape: "single", "cluster" or "secured" (see :data:`PROFILES`); it sets the
    #: defaults of the endpoints, the replication and the authentication
    profile: str = "single"
    host: str
    ports: Ports
    #: the local stack's state directory: a code location on a developer's machine finds the stack's
    #: generated secrets (:func:`load_local_secrets`) and the file demo's directory there; its layout
    #: is the stack's (:mod:`lakebus_dagster.stack.local_settings`)
    state_dir: Path
    kafka: KafkaSettings
    connect: ConnectSettings
    lake: LakeSettings
    spark: SparkSettings
    alerts: AlertSettings = AlertSettings()
    bus: BusTuning = BusTuning()
    capture: CaptureSettings = CaptureSettings()
    #: the deployment's config file as read (None without one): its monitoring policy, lakehouse limits
    #: and schedules come from this same load (:func:`lakebus_dagster.defs.monitoring.policy.monitoring_policy`)
    deployment_file: LoadedConfig | None = None

    @property
    def exactly_once_sources(self) -> bool:
        """Change capture asks for exactly-once source delivery (KIP-618), and the local stack's workers
        enable it: with LAKEBUS_POSTGRES=on, outside the secured profile (the ``connect`` principal's
        transactional-id ACLs for source tasks are declared, :mod:`lakebus_dagster.kafka.acls`, but capture
        has not run under ACLs). A worker without ``exactly.once.source.support``
        rejects a connector that requires it, naming the setting."""
        return self.capture.enabled and self.profile != "secured"

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
    def local_connect_urls(self) -> tuple[str, ...]:
        """Every Connect worker's REST URL on the local stack (https for the secured profile)."""
        scheme = "https" if self.profile == "secured" else "http"
        return tuple(f"{scheme}://{self.host}:{self.connect_port(n)}" for n in range(1, self.connect_workers + 1))

    @property
    def secrets_file(self) -> Path:
        """The local stack's generated secrets (absent in production: they come from the environment)."""
        return self.state_dir / SECRETS_FILE_NAME


def load_settings(reader: SettingsReader | None = None) -> Settings:
    """Read and check the settings (cheap; call it once where a process starts its work and pass the
    result on): each variable from the environment, else the deployment's config file
    (:mod:`lakebus_dagster.config_file`), else its default, all through ``reader`` (a new
    :class:`SettingsReader` when None; ``lakebus config`` passes one that collects problems).

    Raises :class:`SettingsError` (a ``ValueError``) naming the first variable whose value is
    unusable: a port outside 1-65535, a URL without scheme or host, an unknown choice, ...
    Every variable, its default and its meaning are listed in :mod:`lakebus_dagster.envvars`.
    The dev stack's own settings: :func:`lakebus_dagster.stack.local_settings.load_stack_settings`.
    """
    e = reader or SettingsReader()
    deployment_file = e.file()
    profile = e.choice("LAKEBUS_PROFILE", tuple(PROFILES))
    host = e.matching("LAKEBUS_HOST", HOST_PATTERN, HOST_WHAT)
    ports = Ports(kafka=e.port("LAKEBUS_KAFKA_PORT"), connect=e.port("LAKEBUS_CONNECT_PORT"),
                  rest_catalog=e.port("LAKEBUS_REST_CATALOG_PORT"), s3=e.port("LAKEBUS_S3_PORT"),
                  spark_connect=e.port("LAKEBUS_SPARK_CONNECT_PORT"), postgres=e.port("LAKEBUS_POSTGRES_PORT"))
    # the profile, host and ports alone (the groups still empty): the local stack's addresses, from
    # which each group's endpoint defaults derive (broker_port, connect_port, brokers, ...)
    local = Settings(profile=profile, host=host, ports=ports, state_dir=_state_dir(e, profile),
                     kafka=KafkaSettings(bootstrap_servers=""), connect=ConnectSettings(urls=()),
                     lake=LakeSettings(catalog_uri="", s3_endpoint="", bucket="", region="", warehouse="", namespace=""),
                     spark=SparkSettings(master="", driver_memory="", remote=None, jars_cache_dir=Path()))
    lake = _lake_settings(e, local)
    settings = replace(
        local, lake=lake,
        spark=SparkSettings(
            master=e.matching("LAKEBUS_SPARK_MASTER", r"\S+", "a Spark master URL (local[2], spark://host:7077, ...)"),
            driver_memory=e.memory_size("LAKEBUS_SPARK_DRIVER_MEMORY"),
            remote=e.spark_remote("LAKEBUS_SPARK_REMOTE", f"sc://{host}:{ports.spark_connect}"),
            jars_cache_dir=_jars_cache_dir(e),
            connect_wait_s=e.optional_int("LAKEBUS_SPARK_CONNECT_WAIT_S") or 0),
        bus=_bus_tuning(e, profile),
        kafka=_kafka_settings(e, local),
        connect=_connect_settings(e, local),
        alerts=AlertSettings(sink=e.choice("LAKEBUS_ALERT_SINK", ("log", "webhook")),
                             body_format=e.choice("LAKEBUS_ALERT_FORMAT", ("slack", "feishu", "generic"))),
        capture=CaptureSettings(
            enabled=e.choice("LAKEBUS_POSTGRES", ("off", "on")) == "on",
            host=e.matching("LAKEBUS_POSTGRES_HOST", f"({HOST_PATTERN})?", HOST_WHAT) or host,
            db=e.matching("LAKEBUS_POSTGRES_DB", r"[a-z_][a-z0-9_]{0,62}", "a lower-case identifier (a-z 0-9 _)"),
            user=e.matching("LAKEBUS_POSTGRES_USER", r"[a-z_][a-z0-9_]{0,62}", "a lower-case identifier (a-z 0-9 _)")),
        deployment_file=deployment_file,
    )
    _check_alert_webhook(e, settings.alerts.sink)
    return settings


def _lake_settings(e: SettingsReader, local: Settings) -> LakeSettings:
    """The catalog, S3 and warehouse: each address the setting, else the local stack's."""
    bucket = e.matching("LAKEBUS_BUCKET", r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", "an S3 bucket name (3-63 of a-z 0-9 . -)")
    region = e.matching("LAKEBUS_S3_REGION", r"[a-z0-9-]+", "an S3 region (e.g. us-east-1)")
    warehouse = e.optional_url("LAKEBUS_WAREHOUSE", ("s3", "s3a")) or f"s3://{bucket}/"
    namespace = e.matching("LAKEBUS_NAMESPACE", r"[A-Za-z_][A-Za-z0-9_]*", "an identifier (letters, digits, _)")
    catalog_uri = e.optional_url("LAKEBUS_CATALOG_URI") or f"http://{local.host}:{local.ports.rest_catalog}"
    secured = local.profile == "secured"
    scope = e.matching("LAKEBUS_CATALOG_SCOPE", r'[^\s"\\]*( [^\s"\\]+)*', "OAuth2 scope tokens separated by single spaces")
    oauth2 = e.optional_url("LAKEBUS_CATALOG_OAUTH2_SERVER_URI")
    return LakeSettings(
        catalog_uri=catalog_uri,
        s3_endpoint=e.optional_url("LAKEBUS_S3_ENDPOINT") or f"http://{local.host}:{local.ports.s3}",
        bucket=bucket, region=region, warehouse=warehouse, namespace=namespace,
        catalog_scope=scope or (SECURED_CATALOG_SCOPE if secured else None),
        catalog_oauth2_server_uri=oauth2 or (f"{catalog_uri}/v1/oauth/tokens" if secured else None),
    )


def _state_dir(e: SettingsReader, profile: str) -> Path:
    default_state = REPO_ROOT / (".lakebus" if profile == "single" else f".lakebus-{profile}")
    return Path(e.raw("LAKEBUS_STATE_DIR") or str(default_state)).resolve()


def _jars_cache_dir(e: SettingsReader) -> Path:
    cache_home = Path(os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache"))
    return Path(e.raw("LAKEBUS_JARS_CACHE") or str(cache_home / "lakebus" / "jars")).resolve()


def _bus_tuning(e: SettingsReader, profile: str) -> BusTuning:
    """The bus's partitions and tasks, and the topics' replication (the cluster profile: 3, min ISR 2)."""
    clustered = profile == "cluster"
    suffix = e.matching("LAKEBUS_BUS_SUFFIX", r"[A-Za-z0-9._-]*", "a topic-name suffix (letters, digits, . _ -)")
    commit_interval_ms = e.optional_int("LAKEBUS_SINK_COMMIT_INTERVAL_MS") or None  # 0 = the default too
    bus_partitions = e.optional_int("LAKEBUS_BUS_PARTITIONS", minimum=1)
    sink_tasks_max = e.optional_int("LAKEBUS_SINK_TASKS_MAX", minimum=1)
    replication = e.optional_int("LAKEBUS_TOPIC_REPLICATION_FACTOR", minimum=1) or (3 if clustered else 1)
    min_isr = e.optional_int("LAKEBUS_TOPIC_MIN_INSYNC_REPLICAS", minimum=1) or (2 if clustered else None)
    if min_isr is not None and min_isr > replication:
        raise SettingsError("LAKEBUS_TOPIC_MIN_INSYNC_REPLICAS", f"={min_isr!r} exceeds the replication factor {replication}",
                            "set it to at most LAKEBUS_TOPIC_REPLICATION_FACTOR")
    return BusTuning(suffix=suffix, sink_commit_interval_ms=commit_interval_ms, partitions=bus_partitions,
                     sink_tasks_max=sink_tasks_max, replication_factor=replication, min_insync_replicas=min_isr)


def _kafka_settings(e: SettingsReader, local: Settings) -> KafkaSettings:
    """How lakebus authenticates to Kafka (the secured profile: SASL/SCRAM as ``lakebus``, the observer, and
    ``lakebus-ops`` for the bus-changing jobs: :mod:`lakebus_dagster.kafka.acls`)."""
    secured = local.profile == "secured"
    return KafkaSettings(
        bootstrap_servers=e.optional_bootstrap("LAKEBUS_KAFKA_BOOTSTRAP")
        or ",".join(f"{local.host}:{local.broker_port(n)}" for n in range(1, local.brokers + 1)),
        security_protocol=known_protocol(e.raw("LAKEBUS_KAFKA_SECURITY_PROTOCOL") or ("SASL_SSL" if secured else "PLAINTEXT")),
        ssl_ca_location=_kafka_ca_location(e, local),
        sasl_mechanism=e.choice("LAKEBUS_KAFKA_SASL_MECHANISM", ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")),
        sasl_username=e.raw("LAKEBUS_KAFKA_SASL_USERNAME") or ("lakebus" if secured else None),
        ops_username=e.raw("LAKEBUS_KAFKA_OPS_USERNAME") or ("lakebus-ops" if secured else None),  # kafka/acls.py OPERATIONS
    )


def _kafka_ca_location(e: SettingsReader, local: Settings) -> str | None:
    """LAKEBUS_KAFKA_SSL_CA_LOCATION, else the secured local stack's CA, else None (the system's CAs)."""
    return e.raw("LAKEBUS_KAFKA_SSL_CA_LOCATION") or (str(local_ca_file(local.state_dir)) if local.profile == "secured" else None)


def _connect_settings(e: SettingsReader, local: Settings) -> ConnectSettings:
    """The workers' URLs (the secured profile: https) and the CA their certificate is checked against:
    LAKEBUS_CONNECT_CA_LOCATION, else LAKEBUS_KAFKA_SSL_CA_LOCATION's (one private CA often signs both),
    else the secured local stack's CA, else None (the system's CAs)."""
    return ConnectSettings(
        urls=e.optional_urls("LAKEBUS_CONNECT_URL") or local.local_connect_urls,
        ca_location=e.raw("LAKEBUS_CONNECT_CA_LOCATION") or _kafka_ca_location(e, local),
        username=e.raw("LAKEBUS_CONNECT_USERNAME") or ("lakebus" if local.profile == "secured" else None),
        catalog_uri=e.optional_url("LAKEBUS_CONNECT_CATALOG_URI"),
        s3_endpoint=e.optional_url("LAKEBUS_CONNECT_S3_ENDPOINT"),
    )


def _check_alert_webhook(e: SettingsReader, alert_sink: str) -> None:
    """A secret (only ever from the environment): checked for shape (never echoed) only when it is
    used, and last, so `lakebus config` reports every other bad value before this one."""
    if alert_sink == "webhook":
        if not e.raw(ALERT_WEBHOOK_URL_VAR):
            raise SettingsError(ALERT_WEBHOOK_URL_VAR, "is not set but LAKEBUS_ALERT_SINK=webhook",
                                "set it to the webhook URL (from your secret store), or set LAKEBUS_ALERT_SINK=log")
        e.optional_url(ALERT_WEBHOOK_URL_VAR)


def load_local_secrets(settings: Settings | None = None) -> None:
    """Export the local stack's generated secrets (S3 key pair, Kafka and Connect passwords) from
    :attr:`Settings.secrets_file` into ``os.environ`` unless the variables are already set: for the
    stack's processes, the command line and the tests. The Dagster definitions do not call it; they
    read :func:`~lakebus_dagster.secret_env.local_secrets` (:func:`lakebus_dagster.defs.resources.build_resources`).

    A missing file is no error (production has none; the stack's ``up`` generates it, see
    :mod:`lakebus_dagster.stack.secrets`). Values already in the environment always win, so a
    deployment's real secrets are never overridden.
    """
    os.environ.update(local_secrets((settings or load_settings()).secrets_file))


