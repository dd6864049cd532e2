"""One place that says where everything is: ports, credentials, paths.

The local stack (``python -m lakebus_dagster.stack``), the Dagster resources and the tests all read
this module, so a port or a path is never written twice. Every value comes from an environment
variable with a local default; production sets the variables (see ``deploy/``).

Secrets are not in code. On first ``stack up`` the local S3 key pair is generated at random and kept
in ``<state>/secrets.env`` (mode 0600); :func:`load_local_secrets` exports it into ``os.environ`` so
Dagster ``EnvVar`` fields and the Connect worker's ``EnvVarConfigProvider`` resolve it the same way
as in production, where the variables come from the deployment's secret store.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

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


def _env_int(name: str, default: int) -> int:
    raw = _env(name, str(default))
    try:
        return int(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from exc


def _env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = _env(name, default)
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


#: the alert webhook's URL embeds a token: read through ``dg.EnvVar``, never stored in settings
ALERT_WEBHOOK_URL_VAR = "LAKEBUS_ALERT_WEBHOOK_URL"


@dataclass(frozen=True)
class Ports:
    kafka: int
    kafka_controller: int
    connect: int
    rest_catalog: int
    s3: int


@dataclass(frozen=True)
class JvmHeaps:
    """Maximum heap per JVM. Sized so the stack at rest stays under 3 GiB resident on a 2-core box."""

    kafka: str
    connect: str
    rest_catalog: str
    s3: str


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
    #: isolates a whole bus (topics, connector, namespaces) on a shared cluster; "" = the real names
    bus_suffix: str
    #: the sink's commit interval; tests shorten it
    sink_commit_interval_ms: int | None
    #: the catalog / S3 addresses as the Connect workers reach them, when they differ from Dagster's
    #: (another network, a proxy); None = the same addresses
    connect_catalog_uri: str | None = None
    connect_s3_endpoint: str | None = None
    #: where alerts go: "log" (the daemon's log) or "webhook" (URL in LAKEBUS_ALERT_WEBHOOK_URL, a secret)
    alert_sink: str = "log"
    #: the webhook body: "slack", "feishu" or "generic" (the alert as JSON)
    alert_format: str = "slack"

    # -- endpoints -------------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.ports.kafka}"

    @property
    def connect_url(self) -> str:
        return f"http://{self.host}:{self.ports.connect}"

    @property
    def catalog_uri(self) -> str:
        return f"http://{self.host}:{self.ports.rest_catalog}"

    @property
    def s3_endpoint(self) -> str:
        return f"http://{self.host}:{self.ports.s3}"

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
    """Read the settings from the environment (cheap; call it where you need it)."""
    state_dir = Path(_env("LAKEBUS_STATE_DIR", str(REPO_ROOT / ".lakebus"))).resolve()
    cache_home = Path(_env("XDG_CACHE_HOME", str(Path.home() / ".cache")))
    bucket = _env("LAKEBUS_BUCKET", "warehouse")
    return Settings(
        host=_env("LAKEBUS_HOST", "127.0.0.1"),
        ports=Ports(
            kafka=_env_int("LAKEBUS_KAFKA_PORT", 19092),
            kafka_controller=_env_int("LAKEBUS_KAFKA_CONTROLLER_PORT", 19093),
            connect=_env_int("LAKEBUS_CONNECT_PORT", 8083),
            rest_catalog=_env_int("LAKEBUS_REST_CATALOG_PORT", 8181),
            s3=_env_int("LAKEBUS_S3_PORT", 9000),
        ),
        heaps=JvmHeaps(
            kafka=_env("LAKEBUS_KAFKA_HEAP", "512m"),
            connect=_env("LAKEBUS_CONNECT_HEAP", "768m"),
            rest_catalog=_env("LAKEBUS_REST_CATALOG_HEAP", "256m"),
            s3=_env("LAKEBUS_S3_HEAP", "256m"),
        ),
        state_dir=state_dir,
        jars_cache_dir=Path(_env("LAKEBUS_JARS_CACHE", str(cache_home / "lakebus" / "jars"))).resolve(),
        bucket=bucket,
        region=_env("LAKEBUS_S3_REGION", "us-east-1"),
        warehouse=_env("LAKEBUS_WAREHOUSE", f"s3://{bucket}/"),
        namespace=_env("LAKEBUS_NAMESPACE", "demo"),
        spark_master=_env("LAKEBUS_SPARK_MASTER", "local[2]"),
        spark_driver_memory=_env("LAKEBUS_SPARK_DRIVER_MEMORY", "2g"),
        bus_suffix=_env("LAKEBUS_BUS_SUFFIX", ""),
        sink_commit_interval_ms=_env_int("LAKEBUS_SINK_COMMIT_INTERVAL_MS", 0) or None,
        connect_catalog_uri=_env("LAKEBUS_CONNECT_CATALOG_URI", "") or None,
        connect_s3_endpoint=_env("LAKEBUS_CONNECT_S3_ENDPOINT", "") or None,
        alert_sink=_env_choice("LAKEBUS_ALERT_SINK", "log", ("log", "webhook")),
        alert_format=_env_choice("LAKEBUS_ALERT_FORMAT", "slack", ("slack", "feishu", "generic")),
    )


def load_local_secrets(settings: Settings | None = None, *, create: bool = False) -> None:
    """Export the local stack's S3 key pair into ``os.environ`` unless the variables are already set.

    With ``create=True`` (only ``stack up`` does this) a missing secrets file is generated. Values
    already in the environment always win, so a deployment's real secrets are never overridden.
    """
    settings = settings or load_settings()
    path = settings.secrets_file
    if not path.exists():
        if not create:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        content = (
            f"{S3_ACCESS_KEY_VAR}=lakebus-{secrets.token_hex(4)}\n"
            f"{S3_SECRET_KEY_VAR}={secrets.token_urlsafe(24)}\n"
        )
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(content)
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not os.environ.get(key.strip()):
            os.environ[key.strip()] = value.strip()


def s3_credentials() -> tuple[str, str]:
    """The S3 key pair from the environment (after :func:`load_local_secrets`), or a clear error."""
    access, secret = os.environ.get(S3_ACCESS_KEY_VAR), os.environ.get(S3_SECRET_KEY_VAR)
    if not access or not secret:
        raise RuntimeError(
            f"{S3_ACCESS_KEY_VAR} / {S3_SECRET_KEY_VAR} are not set; run `make stack-up` (local) "
            "or provide them from your secret store"
        )
    return access, secret
