"""Every ``LAKEBUS_*`` environment variable: its default and its meaning (the table, and nothing else).

Why one table instead of ``os.environ`` reads spread over the code: the README's configuration
reference is rendered from it (``lakebus config --markdown``), and a unit test fails when the code
reads a variable this table does not list, so the reference cannot drift. Values are checked when
the settings load: ``LAKEBUS_KAFKA_PORT=-5`` fails the command that read it with one line naming
the variable, instead of ``stack status`` later showing a healthy broker as "starting" on port -5.

Secrets (the S3 key pair, the alert webhook URL) are listed so they are documented, but their
values never appear in a message.

The readers that check a value (and ask the deployment's config file for a variable the environment
leaves unset) are :mod:`lakebus_dagster.setting_readers`. Why apart: the config file checks its keys
against this table, and the readers ask the config file, so one module holding both imported the
config file and was imported by it (issue 22: no module cycles).
"""

from __future__ import annotations

from dataclasses import dataclass

from lakebus_dagster.errors import UserError


class SettingsError(UserError, ValueError):
    """An environment variable holds a value lakebus cannot use.

    The message is one line: the variable, what is wrong with its value, and what to set instead.
    """

    def __init__(self, variable: str, problem: str, fix: str) -> None:
        self.variable = variable
        sep = "" if problem.startswith("=") else " "  # NAME='value' is ..., NAME is not set ...
        super().__init__(f"{variable}{sep}{problem}; {fix}")


@dataclass(frozen=True)
class Var:
    """One variable as the reference documents it."""

    name: str
    #: the value used when the variable is unset or empty ("" = no value)
    default: str
    meaning: str
    #: the default as the reference shows it, when it is computed (paths)
    shown_default: str | None = None
    secret: bool = False

    @property
    def documented_default(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        return f"`{self.default}`" if self.default else "unset"


#: how the readers and the table spell a port's range
PORT_RANGE = "1-65535"
#: names the YAML file (lakebus_dagster/config_file.py) that may set every other non-secret variable
CONFIG_VAR = "LAKEBUS_CONFIG"

VARIABLES: tuple[Var, ...] = (
    # -- the deployment's config file ------------------------------------------------------------
    Var(CONFIG_VAR, "", "the deployment's YAML config file: `settings:` (these variables; secrets refused; "
        "a set variable wins over the file), `monitoring:`, `maintenance:`, `freshness:` (see below)",
        shown_default="`lakebus.yaml` in the working directory, if it exists"),
    # -- where the services are -----------------------------------------------------------------
    Var("LAKEBUS_HOST", "127.0.0.1", "host of every service lakebus talks to (and binds, for the local stack)"),
    Var("LAKEBUS_KAFKA_PORT", "19092", f"Kafka broker port ({PORT_RANGE}); bootstrap servers = `HOST:PORT`"),
    Var("LAKEBUS_KAFKA_BOOTSTRAP", "", "existing Kafka: bootstrap servers `host:port[,host:port…]` (overrides HOST/KAFKA_PORT)"),
    Var("LAKEBUS_KAFKA_CONTROLLER_PORT", "19093", "local stack only: the KRaft controller port"),
    Var("LAKEBUS_CONNECT_PORT", "8083", "Kafka Connect REST port"),
    Var("LAKEBUS_CONNECT_URL", "", "existing Kafka Connect: its workers' REST URLs, `http(s)://host:port[,http(s)://host:port…]` "
        "(overrides HOST/CONNECT_PORT); lakebus uses whichever worker answers"),
    Var("LAKEBUS_REST_CATALOG_PORT", "8181", "Iceberg REST catalog port"),
    Var("LAKEBUS_CATALOG_URI", "", "existing Iceberg REST catalog: its URI (overrides HOST/REST_CATALOG_PORT)"),
    Var("LAKEBUS_S3_PORT", "9000", "S3 endpoint port"),
    Var("LAKEBUS_S3_ENDPOINT", "", "existing S3 / MinIO: its endpoint URL (overrides HOST/S3_PORT)"),
    Var("LAKEBUS_DAGSTER_PORT", "3000", "Dagster UI port (`lakebus ui`, `launch`, `demo`)"),
    Var("LAKEBUS_CONNECT_CATALOG_URI", "", "the catalog URI as the Connect workers reach it, when it differs from lakebus's"),
    Var("LAKEBUS_CONNECT_S3_ENDPOINT", "", "the S3 endpoint as the Connect workers reach it, when it differs from lakebus's"),
    # -- storage and tables ---------------------------------------------------------------------
    Var("LAKEBUS_BUCKET", "warehouse", "S3 bucket of the warehouse (created by provisioning)"),
    Var("LAKEBUS_WAREHOUSE", "", "Iceberg warehouse location", shown_default="`s3://<LAKEBUS_BUCKET>/`"),
    Var("LAKEBUS_S3_REGION", "us-east-1", "S3 region"),
    Var("LAKEBUS_NAMESPACE", "demo", "Iceberg namespace of the ODS tables (`<ns>.dwd_biz_<event>`; DWS in `<ns>_dws`)"),
    Var("LAKEBUS_BUS_SUFFIX", "", "suffix on every topic, connector and namespace: isolates a whole bus on a shared cluster"),
    Var("LAKEBUS_SINK_COMMIT_INTERVAL_MS", "", "the sink's commit interval in ms (unset or 0: lakebus's 10000, `SinkTuning.commit_interval_ms`; the Iceberg sink's own default, 5 min, is never used)"),
    Var("LAKEBUS_BUS_PARTITIONS", "", "partitions of the bus topic (`provision_lakebus` grows the topic to it, never shrinks it; "
        "the sink runs one task per partition)", shown_default="`1` (the layout's)"),
    Var("LAKEBUS_SINK_TASKS_MAX", "", "the sink's `tasks.max` (at most the bus partitions)",
        shown_default="one task per bus partition"),
    Var("LAKEBUS_TOPIC_REPLICATION_FACTOR", "", "replication factor of the bus, control, DLQ and ledger topics",
        shown_default="`1` (`3` for the cluster profile)"),
    Var("LAKEBUS_TOPIC_MIN_INSYNC_REPLICAS", "", "`min.insync.replicas` of those topics (unset: the broker's default)",
        shown_default="unset (`2` for the cluster profile)"),
    # -- authentication (the secured profile sets these; production sets them from its secret store) --
    Var("LAKEBUS_KAFKA_SECURITY_PROTOCOL", "", "Kafka security protocol: `PLAINTEXT`, `SASL_PLAINTEXT`, `SASL_SSL` or `SSL`",
        shown_default="`PLAINTEXT` (`SASL_SSL` for the secured profile)"),
    Var("LAKEBUS_KAFKA_SSL_CA_LOCATION", "", "CA file (PEM) verifying `SSL`/`SASL_SSL` brokers",
        shown_default="system CAs (secured: its own)"),
    Var("LAKEBUS_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512", "SASL mechanism when the protocol is SASL_*"),
    Var("LAKEBUS_KAFKA_SASL_USERNAME", "", "lakebus's observer Kafka principal (SASL user name): sensors and ordinary runs "
        "read and describe, and write only lakebus's own state topics", shown_default="unset (`lakebus` for the secured profile)"),
    Var("LAKEBUS_KAFKA_SASL_PASSWORD", "", "the observer's Kafka password (secret; secured profile: generated into `secrets.env`)",
        secret=True),
    Var("LAKEBUS_KAFKA_OPS_USERNAME", "", "the operations Kafka principal of the jobs that change the bus (provisioning, "
        "repair): resource `operations`", shown_default="unset: the observer's (`lakebus-ops` for the secured profile)"),
    Var("LAKEBUS_KAFKA_OPS_PASSWORD", "", "the operations principal's Kafka password (secret; only the bus-changing jobs' "
        "runs need it; secured profile: generated into `secrets.env`)", secret=True),
    Var("LAKEBUS_CONNECT_USERNAME", "", "Kafka Connect REST basic-auth user", shown_default="unset (`lakebus` for the secured profile)"),
    Var("LAKEBUS_CONNECT_PASSWORD", "", "Kafka Connect REST basic-auth password (secret)", secret=True),
    Var("LAKEBUS_CONNECT_CA_LOCATION", "", "CA file (PEM) verifying `https://` Connect workers",
        shown_default="LAKEBUS_KAFKA_SSL_CA_LOCATION's"),
    Var("LAKEBUS_CATALOG_CREDENTIAL", "", "the Iceberg REST catalog's OAuth2 client credential `client_id:client_secret` "
        "(secret; every client — pyiceberg, the sink (as `${env:…}`), Spark — exchanges it for a token; secured profile: "
        "generated into `secrets.env`)", secret=True),
    Var("LAKEBUS_CATALOG_TOKEN", "", "instead of a credential: a bearer token for the Iceberg REST catalog (secret)",
        secret=True),
    Var("LAKEBUS_CATALOG_SCOPE", "", "the OAuth2 scope a credential asks the catalog for",
        shown_default="unset: the clients' `catalog` (`lakebus` for the secured profile)"),
    Var("LAKEBUS_CATALOG_OAUTH2_SERVER_URI", "", "the OAuth2 token endpoint the credential is exchanged at",
        shown_default="unset: `<catalog URI>/v1/oauth/tokens` (set explicitly so for the secured profile)"),
    # -- secrets (never printed) ----------------------------------------------------------------
    Var("LAKEBUS_S3_ACCESS_KEY_ID", "", "S3 access key (secret; local stack: generated into `.lakebus/secrets.env`)", secret=True),
    Var("LAKEBUS_S3_SECRET_ACCESS_KEY", "", "S3 secret key (secret; the Connect worker needs it too)", secret=True),
    # -- alerts ---------------------------------------------------------------------------------
    Var("LAKEBUS_ALERT_SINK", "log", "where alerts go: `log` (the Dagster daemon's log) or `webhook`"),
    Var("LAKEBUS_ALERT_FORMAT", "slack", "webhook body: `slack`, `feishu` or `generic` (the alert as JSON)"),
    Var("LAKEBUS_ALERT_WEBHOOK_URL", "", "the webhook URL when ALERT_SINK=webhook (secret: read as a Dagster `EnvVar`)", secret=True),
    Var("LAKEBUS_HEARTBEAT_URL", "", "the dead-man's switch: a URL the Dagster daemon GETs while it is alive (e.g. a "
        "healthchecks-style check's ping URL; secret: read as a Dagster `EnvVar`); unset: no heartbeat", secret=True),
    Var("LAKEBUS_HEARTBEAT_INTERVAL_MINUTES", "5", "ping LAKEBUS_HEARTBEAT_URL at most this often (minutes, >= 1); "
        "give the monitoring check a grace period of a few intervals"),
    Var("LAKEBUS_DATAHUB_URL", "", "DataHub's GMS endpoint `publish_to_datahub` sends the bus inventory and the lineage "
        "to (`https://datahub.example:8080`); unset: off"),
    Var("LAKEBUS_DATAHUB_TOKEN", "", "DataHub's access token, when its GMS wants one (secret: read as a Dagster `EnvVar`)",
        secret=True),
    # -- Spark ----------------------------------------------------------------------------------
    Var("LAKEBUS_SPARK_REMOTE", "", "the Spark Connect server the DWS and maintenance runs attach to (`sc://host:port`); "
        "`local`: an embedded Spark session per step instead (LAKEBUS_SPARK_MASTER, slow: a JVM per step)",
        shown_default="`sc://<LAKEBUS_HOST>:<LAKEBUS_SPARK_CONNECT_PORT>` (the local stack's server)"),
    Var("LAKEBUS_SPARK_CONNECT_WAIT_S", "60", "how long a Spark step waits for a Spark Connect server that does not answer "
        "(a restart) before it fails and the run's retries take over"),
    Var("LAKEBUS_SPARK_MASTER", "local[2]", "Spark master of an embedded session (only with LAKEBUS_SPARK_REMOTE=local)"),
    Var("LAKEBUS_SPARK_DRIVER_MEMORY", "2g", "driver memory of an embedded session (`512m`, `2g`, …)"),
    # -- change capture from PostgreSQL (issue 30) -------------------------------------------------
    Var("LAKEBUS_POSTGRES", "off", "`on`: the local stack runs a PostgreSQL server (logical replication, the demo "
        "`shop` schema) and the code location declares its change capture (Debezium source → CDC topics → Iceberg "
        "change tables); `off`: neither (the demo path needs none of it)"),
    Var("LAKEBUS_POSTGRES_HOST", "", "the captured PostgreSQL's host, as the Connect workers and lakebus reach it (the "
        "Debezium source's `database.hostname`, the database checks, the slot watch, re-sync and re-snapshot)",
        shown_default="`<LAKEBUS_HOST>` (the local stack's server)"),
    Var("LAKEBUS_POSTGRES_PORT", "15432", f"the captured PostgreSQL's port ({PORT_RANGE}); the local stack's server listens on it"),
    Var("LAKEBUS_POSTGRES_DB", "shop", "the captured PostgreSQL database"),
    Var("LAKEBUS_POSTGRES_USER", "lakebus_cdc", "the change-capture role (LOGIN REPLICATION; the local stack creates it)"),
    Var("LAKEBUS_POSTGRES_PASSWORD", "", "the change-capture role's password (secret; local stack: generated into "
        "`secrets.env`; the Connect worker reads it as `${env:…}`)", secret=True),
    # -- the local stack ------------------------------------------------------------------------
    Var("LAKEBUS_PROFILE", "single", "local stack: `single` (one of each, `make demo`), `cluster` (3 KRaft brokers, "
        "2 Connect workers; broker/worker *n* at the base port + 10×(*n*−1)) or `secured` (one of each with SASL/SCRAM over TLS, "
        "ACLs, https Connect REST with basic auth, and the REST catalog behind an OAuth2 gate on its port, the catalog itself "
        "on the next port)"),
    Var("LAKEBUS_STATE_DIR", "", "local stack: data, logs, pids, secrets (no spaces)",
        shown_default="`<repo>/.lakebus` (`<repo>/.lakebus-<profile>` for another profile)"),
    Var("LAKEBUS_CONNECT_KAFKA_PASSWORD", "", "local stack (secured profile): the Connect worker's own Kafka password "
        "(principal `connect`; the worker reads it as `${env:…}`)", secret=True),
    Var("LAKEBUS_PRODUCER_KAFKA_PASSWORD", "", "local stack (secured profile): the password of principal `producer`, "
        "which may only write the bus topic", secret=True),
    Var("LAKEBUS_BROKER_KAFKA_PASSWORD", "", "local stack (secured profile): the broker's inter-broker login (principal "
        "`broker`, the only super user; no lakebus run uses it)", secret=True),
    Var("LAKEBUS_TLS_KEYSTORE_PASSWORD", "", "local stack (secured profile): Connect REST's keystore password", secret=True),
    Var("LAKEBUS_JARS_CACHE", "", "local stack: where Maven-resolved jars are kept", shown_default="`~/.cache/lakebus/jars`"),
    Var("LAKEBUS_SPARK_MASTER_PORT", "7077", "local stack: the Spark standalone master's port (its worker: the next port)"),
    Var("LAKEBUS_SPARK_WEBUI_PORT", "18080", "local stack: the Spark master's web UI port (its worker's UI: the next "
        "port, the Spark Connect server's UI: the one after)"),
    Var("LAKEBUS_SPARK_CONNECT_PORT", "15002", "local stack: the Spark Connect server's gRPC port"),
    Var("LAKEBUS_SPARK_CONNECT_MEMORY", "1g", "local stack: the Spark Connect server's driver heap"),
    Var("LAKEBUS_SPARK_EXECUTOR_MEMORY", "1g", "local stack: the Spark Connect server's executor heap (one executor, "
        "2 cores, on the local worker)"),
    Var("LAKEBUS_CONNECT_PROTOCOL", "sessioned", "local stack: the Connect workers' rebalance protocol "
        "(`connect.protocol`): `sessioned` (incremental cooperative, signed internal requests; Kafka's default, and "
        "deploy/'s) or `eager` (every task stops on a rebalance: with the Iceberg sink the group never settles, "
        "BENCHMARKS.md); a benchmark knob: kept for the failover comparison"),
    Var("LAKEBUS_CONNECT_REBALANCE_DELAY_MS", "", "local stack: the Connect workers' "
        "`scheduled.rebalance.max.delay.ms` (how long the group waits for a departed worker before moving its tasks); "
        "a benchmark knob: kept for the failover comparison (BENCHMARKS.md)", shown_default="deploy/'s worker file"),
    Var("LAKEBUS_KAFKA_HEAP", "512m", "local stack: Kafka's max heap"),
    Var("LAKEBUS_CONNECT_HEAP", "768m", "local stack: Connect's max heap"),
    Var("LAKEBUS_REST_CATALOG_HEAP", "256m", "local stack: the catalog's max heap"),
    Var("LAKEBUS_S3_HEAP", "256m", "local stack: S3Proxy's max heap"),
)

BY_NAME: dict[str, Var] = {v.name: v for v in VARIABLES}


def reference_markdown() -> str:
    """The configuration reference: one row per variable (the README embeds this table)."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    rows += [f"| `{v.name}` | {v.documented_default} | {v.meaning} |" for v in VARIABLES]
    return "\n".join(rows) + "\n"
