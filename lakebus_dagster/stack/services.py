"""What each local service is: its classpath, main class, generated config and health probe.

Order matters: S3 first (the catalog writes metadata to it), then Kafka, the REST catalog, and
Connect (its worker needs the broker, and the sink needs the catalog and S3); the Spark standalone
master and its worker last (nothing waits for them; ``LAKEBUS_SPARK_MASTER`` may name the master).

Why this module is longer than 300 lines: it is a table of six service definitions, each with its
generated config file and probe side by side, so one service reads top to bottom in one place.
"""

from __future__ import annotations

import base64
import os
import subprocess
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import requests

from lakebus_dagster.settings import AWS_SDK_ENV, S3_ACCESS_KEY_VAR, S3_SECRET_KEY_VAR, Settings, s3_credentials
from lakebus_dagster.bus.door import LAKEBUS_GUARD_CLASS, STRICT_CONVERTER_CLASS
from lakebus_dagster.bus.layout import ICEBERG_SINK_CLASS
from lakebus_dagster.stack.errors import StackError


#: the local Spark standalone cluster (master + one worker) that ``LAKEBUS_SPARK_MASTER`` can name
SPARK_MASTER_PORT = 7077
SPARK_MASTER_WEBUI_PORT = 18080
SPARK_WORKER_PORT = 7078
SPARK_WORKER_WEBUI_PORT = 18081
SPARK_WORKER_CORES = 2
#: what the worker may hand to executors (one 1 GiB executor); the daemons themselves are small
SPARK_WORKER_MEMORY = "1g"
SPARK_DAEMON_HEAP = "256m"


def local_spark_master(host: str) -> str:
    return f"spark://{host}:{SPARK_MASTER_PORT}"


#: the plugins Connect must have loaded before it counts as healthy (the sink and lakebus's door)
CONNECT_PLUGIN_CLASSES = (ICEBERG_SINK_CLASS, STRICT_CONVERTER_CLASS, LAKEBUS_GUARD_CLASS)

_JVM_FLAGS = [
    "-XX:+UseSerialGC",  # smallest footprint; these services are single-node and lightly loaded
    "-XX:MaxMetaspaceSize=256m",
    "-XX:ReservedCodeCacheSize=96m",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
]


@dataclass
class Service:
    name: str
    port: int
    main_class: str
    classpath_dirs: list[str]
    heap: str
    health: Callable[[], bool]
    health_text: str
    args: list[str] = field(default_factory=list)
    jvm_props: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    prepare: Callable[[], None] | None = None
    timeout: float = 90.0
    #: run through this ``spark-class`` script (Spark's own launcher: classpath, module options)
    #: instead of ``java -cp``; the JVM flags and markers reach it as SPARK_DAEMON_JAVA_OPTS
    spark_class: str | None = None

    def argv(self, settings: Settings, jars: Path, java: str, markers: list[str]) -> list[str]:
        if self.spark_class:
            opts = " ".join([*_JVM_FLAGS, *markers, *self.jvm_props])
            java_home = Path(java).resolve().parent.parent
            # `env` and spark-class both exec: the pid recorded is the JVM's
            return ["env", f"SPARK_DAEMON_JAVA_OPTS={opts}", f"SPARK_DAEMON_MEMORY={self.heap}", f"JAVA_HOME={java_home}",
                    self.spark_class, self.main_class, *self.args]
        classpath = os.pathsep.join(str(jars / d / "*") for d in self.classpath_dirs)
        return [
            java,
            "-Xms64m",
            f"-Xmx{self.heap}",
            *_JVM_FLAGS,
            *markers,
            *self.jvm_props,
            "-cp",
            classpath,
            self.main_class,
            *self.args,
        ]


def _write(path: Path, text: str, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def _properties(values: Mapping[str, object]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


_LOG4J = _properties(
    {
        "log4j.rootLogger": "INFO, stdout",
        "log4j.appender.stdout": "org.apache.log4j.ConsoleAppender",
        "log4j.appender.stdout.layout": "org.apache.log4j.PatternLayout",
        "log4j.appender.stdout.layout.ConversionPattern": "[%d] %p %m (%c)%n",
        "log4j.logger.org.apache.kafka.clients": "WARN",
        "log4j.logger.org.apache.kafka.common.utils.AppInfoParser": "WARN",
        "log4j.logger.org.apache.kafka.connect.runtime.isolation": "WARN",
        "log4j.logger.org.reflections": "ERROR",
        "log4j.logger.kafka.request.logger": "WARN",
        "log4j.logger.org.apache.hadoop": "WARN",
        "log4j.logger.org.apache.parquet": "WARN",
    }
)


_S3PROXY_LOGBACK = """<configuration>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} [%thread] %-5level %logger{36} - %msg%n</pattern></encoder>
  </appender>
  <logger name="org.gaul.shaded.org.eclipse.jetty" level="WARN"/>
  <logger name="org.eclipse.jetty" level="WARN"/>
  <logger name="org.jclouds" level="WARN"/>
  <root level="INFO"><appender-ref ref="STDOUT"/></root>
</configuration>
"""


def _http_ok(url: str, predicate: Callable[[requests.Response], bool] = lambda r: True) -> bool:
    resp = requests.get(url, timeout=2)
    return resp.status_code == 200 and predicate(resp)


def _kafka_cluster_id() -> str:
    """A Kafka-format cluster id (22-char URL-safe base64 of a random UUID) without starting a JVM."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def build_services(settings: Settings, jars: Path, java: str) -> list[Service]:
    """The services, configured from ``settings``. Writing configs happens in ``prepare``."""
    host, ports, run = settings.host, settings.ports, settings.run_dir
    access_key, secret_key = s3_credentials()
    s3_dir = settings.data_dir / "s3"
    kafka_dir = settings.data_dir / "kafka"
    log4j_props = run / "log4j.properties"
    log4j_flag = f"-Dlog4j.configuration=file:{log4j_props}"

    # -- S3Proxy -----------------------------------------------------------------------------
    s3proxy_conf = run / "s3proxy.conf"
    # S3Proxy ships no logback.xml, and logback's default is DEBUG for everything: gigabytes of
    # Jetty selector lines per hour. INFO for S3Proxy itself, WARN for the shaded Jetty.
    s3proxy_logback = run / "s3proxy-logback.xml"

    def prepare_s3() -> None:
        s3_dir.mkdir(parents=True, exist_ok=True)
        _write(s3proxy_logback, _S3PROXY_LOGBACK)
        # The key pair is in this file because S3Proxy reads it nowhere else; mode 0600, ignored by git.
        _write(
            s3proxy_conf,
            _properties(
                {
                    "s3proxy.endpoint": settings.s3_endpoint,
                    "s3proxy.authorization": "aws-v2-or-v4",
                    "s3proxy.identity": access_key,
                    "s3proxy.credential": secret_key,
                    "jclouds.provider": "filesystem-nio2",
                    "jclouds.filesystem.basedir": s3_dir,
                }
            ),
            mode=0o600,
        )

    def s3_healthy() -> bool:
        from lakebus_dagster.stack.s3 import s3_client

        s3_client(settings).list_buckets()
        return True

    # -- Kafka broker (KRaft, one node) --------------------------------------------------------
    server_props = run / "kafka-server.properties"

    def prepare_kafka() -> None:
        _write(log4j_props, _LOG4J)
        _write(
            server_props,
            _properties(
                {
                    "process.roles": "broker,controller",
                    "node.id": 1,
                    "controller.quorum.voters": f"1@{host}:{ports.kafka_controller}",
                    "listeners": f"PLAINTEXT://{host}:{ports.kafka},CONTROLLER://{host}:{ports.kafka_controller}",
                    "advertised.listeners": f"PLAINTEXT://{host}:{ports.kafka}",
                    "inter.broker.listener.name": "PLAINTEXT",
                    "controller.listener.names": "CONTROLLER",
                    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                    "log.dirs": kafka_dir,
                    # The bus layout is provisioned explicitly; a typo must not create a topic.
                    "auto.create.topics.enable": "false",
                    "num.partitions": 1,
                    "default.replication.factor": 1,
                    "offsets.topic.replication.factor": 1,
                    "offsets.topic.num.partitions": 10,
                    # The Iceberg sink commits through Kafka transactions: one broker must suffice.
                    "transaction.state.log.replication.factor": 1,
                    "transaction.state.log.min.isr": 1,
                    "transaction.state.log.num.partitions": 10,
                    "group.initial.rebalance.delay.ms": 0,
                    "log.retention.hours": 168,
                }
            ),
        )
        if not (kafka_dir / "meta.properties").exists():
            kafka_dir.mkdir(parents=True, exist_ok=True)
            fmt = subprocess.run(
                [java, "-Xmx256m", "-cp", str(jars / "kafka" / "*"), log4j_flag, "kafka.tools.StorageTool",
                 "format", "-t", _kafka_cluster_id(), "-c", str(server_props)],
                capture_output=True,
                text=True,
            )
            if fmt.returncode != 0:
                raise StackError(f"kafka: formatting the KRaft log dir {kafka_dir} failed:\n{fmt.stdout}{fmt.stderr}")

    def kafka_healthy() -> bool:
        from confluent_kafka.admin import AdminClient

        metadata = AdminClient({"bootstrap.servers": settings.bootstrap_servers, "log_level": 0}).list_topics(timeout=2)
        return bool(metadata.brokers)

    # -- Iceberg REST catalog (fixture server, JDBC/SQLite in a file) ---------------------------
    def rest_env() -> dict[str, str]:
        return {
            "CATALOG_REST_PORT": str(ports.rest_catalog),
            "CATALOG_WAREHOUSE": settings.warehouse,
            "CATALOG_URI": f"jdbc:sqlite:{settings.data_dir / 'catalog' / 'catalog.db'}",
            "CATALOG_JDBC_USER": "lakebus",
            "CATALOG_JDBC_PASSWORD": "lakebus",
            "CATALOG_IO__IMPL": "org.apache.iceberg.aws.s3.S3FileIO",
            "CATALOG_S3_ENDPOINT": settings.s3_endpoint,
            "CATALOG_S3_PATH__STYLE__ACCESS": "true",
            "CATALOG_CLIENT_REGION": settings.region,
            "AWS_REGION": settings.region,
            "AWS_ACCESS_KEY_ID": access_key,
            "AWS_SECRET_ACCESS_KEY": secret_key,
        }

    def prepare_rest() -> None:
        (settings.data_dir / "catalog").mkdir(parents=True, exist_ok=True)

    # -- Kafka Connect (distributed worker) ----------------------------------------------------
    worker_props = run / "connect-distributed.properties"

    def prepare_connect() -> None:
        _write(
            worker_props,
            _properties(
                {
                    "bootstrap.servers": settings.bootstrap_servers,
                    "group.id": "lakebus-connect",
                    "listeners": f"http://{host}:{ports.connect}",
                    "rest.advertised.host.name": host,
                    "rest.advertised.port": ports.connect,
                    "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                    "value.converter.schemas.enable": "true",
                    "config.storage.topic": "_connect-configs",
                    "offset.storage.topic": "_connect-offsets",
                    "status.storage.topic": "_connect-status",
                    "config.storage.replication.factor": 1,
                    "offset.storage.replication.factor": 1,
                    "status.storage.replication.factor": 1,
                    # an idle sink task polls for at most this long before it reads the Iceberg control
                    # topic again: at 10 s a commit on a quiet bus took ~19 s, at 1 s under 2 s
                    # (BENCHMARKS.md, end-to-end ingest); the Iceberg sink commits its own offsets
                    "offset.flush.interval.ms": 1000,
                    "plugin.path": jars / "connect-plugins",
                    # Connector configs reference secrets as ${env:VAR} / ${file:path:key}; the worker
                    # resolves them, GET /connectors/<name>/config keeps showing the placeholder.
                    "config.providers": "env,file",
                    "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
                    "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
                }
            ),
        )

    def connect_healthy() -> bool:
        # every plugin the sink's config names must be loaded: a worker started before the
        # lakebus plugin was built would accept no connector config that uses it
        return _http_ok(
            f"{settings.connect_url}/connector-plugins?connectorsOnly=false",
            lambda r: set(CONNECT_PLUGIN_CLASSES) <= {p.get("class") for p in r.json()},
        )

    # -- Spark standalone master + worker (the pyspark distribution's own classes, no download) ----
    spark_home = _pyspark_home()
    spark_work = settings.data_dir / "spark-worker"
    spark_env = {"SPARK_HOME": str(spark_home), "SPARK_LOG_DIR": str(settings.logs_dir), "SPARK_NO_DAEMONIZE": "1",
                 "SPARK_WORKER_DIR": str(spark_work), **AWS_SDK_ENV}

    def spark_master_json() -> dict:
        resp = requests.get(f"http://{host}:{SPARK_MASTER_WEBUI_PORT}/json/", timeout=2)
        return resp.json() if resp.status_code == 200 else {}

    def spark_worker_alive() -> bool:
        workers = spark_master_json().get("workers", [])
        return any(w.get("state") == "ALIVE" and w.get("port") == SPARK_WORKER_PORT for w in workers)

    aws_env = {**AWS_SDK_ENV, "AWS_REGION": settings.region}
    return [
        Service(
            name="s3",
            port=ports.s3,
            main_class="org.gaul.s3proxy.Main",
            classpath_dirs=["s3proxy"],
            heap=settings.heaps.s3,
            args=["--properties", str(s3proxy_conf)],
            jvm_props=[f"-Dlogback.configurationFile={s3proxy_logback}"],
            prepare=prepare_s3,
            health=s3_healthy,
            health_text="S3 ListBuckets answers",
            timeout=60,
        ),
        Service(
            name="kafka",
            port=ports.kafka,
            main_class="kafka.Kafka",
            classpath_dirs=["kafka"],
            heap=settings.heaps.kafka,
            args=[str(server_props)],
            jvm_props=[log4j_flag],
            prepare=prepare_kafka,
            health=kafka_healthy,
            health_text="broker metadata lists a broker",
            timeout=90,
        ),
        Service(
            name="rest-catalog",
            port=ports.rest_catalog,
            main_class="org.apache.iceberg.rest.RESTCatalogServer",
            classpath_dirs=["rest-catalog"],
            heap=settings.heaps.rest_catalog,
            jvm_props=["-Dorg.slf4j.simpleLogger.defaultLogLevel=info"],
            env={**rest_env(), **aws_env},
            prepare=prepare_rest,
            health=lambda: _http_ok(f"{settings.catalog_uri}/v1/config"),
            health_text="GET /v1/config answers 200",
            timeout=90,
        ),
        Service(
            name="connect",
            port=ports.connect,
            main_class="org.apache.kafka.connect.cli.ConnectDistributed",
            classpath_dirs=["kafka"],
            heap=settings.heaps.connect,
            # The Iceberg sink re-reads the worker file from `sun.java.command`: it must be the first
            # program argument, and the path must contain no spaces (checked in `up`).
            args=[str(worker_props)],
            jvm_props=[log4j_flag],
            env={
                **aws_env,
                S3_ACCESS_KEY_VAR: access_key,
                S3_SECRET_KEY_VAR: secret_key,
            },
            prepare=prepare_connect,
            health=connect_healthy,
            health_text=f"GET /connector-plugins lists {', '.join(c.rsplit('.', 1)[1] for c in CONNECT_PLUGIN_CLASSES)}",
            timeout=240,
        ),
        Service(
            name="spark-master",
            port=SPARK_MASTER_PORT,
            main_class="org.apache.spark.deploy.master.Master",
            classpath_dirs=[],
            heap=SPARK_DAEMON_HEAP,
            args=["--host", host, "--port", str(SPARK_MASTER_PORT), "--webui-port", str(SPARK_MASTER_WEBUI_PORT)],
            env=spark_env,
            spark_class=str(spark_home / "bin" / "spark-class"),
            health=lambda: spark_master_json().get("status") == "ALIVE",
            health_text=f"the master's /json/ says ALIVE (web UI :{SPARK_MASTER_WEBUI_PORT})",
            timeout=90,
        ),
        Service(
            name="spark-worker",
            port=SPARK_WORKER_PORT,
            main_class="org.apache.spark.deploy.worker.Worker",
            classpath_dirs=[],
            heap=SPARK_DAEMON_HEAP,
            args=[f"spark://{host}:{SPARK_MASTER_PORT}", "--host", host, "--port", str(SPARK_WORKER_PORT),
                  "--webui-port", str(SPARK_WORKER_WEBUI_PORT), "--cores", str(SPARK_WORKER_CORES),
                  "--memory", SPARK_WORKER_MEMORY, "--work-dir", str(spark_work)],
            env=spark_env,
            prepare=lambda: spark_work.mkdir(parents=True, exist_ok=True),
            spark_class=str(spark_home / "bin" / "spark-class"),
            health=spark_worker_alive,
            health_text="the master lists this worker ALIVE",
            timeout=90,
        ),
    ]


def _pyspark_home() -> Path:
    """The pyspark package is a Spark distribution (bin/spark-class, jars/): the local standalone cluster runs from it."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        raise StackError("spark: the pyspark package is not installed (it provides the standalone master and worker)")
    return Path(spec.origin).parent
