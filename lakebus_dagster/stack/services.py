"""Every local service in start order: S3 first (the catalog writes metadata to it), then the Kafka
broker(s), the REST catalog, the Connect worker(s) (they need the brokers, and the sink needs the
catalog and S3), and the Spark standalone master and its worker last (nothing waits for them;
``LAKEBUS_SPARK_MASTER`` may name the master). The Kafka side is in :mod:`.kafka_services`.
"""

from __future__ import annotations

from pathlib import Path

import requests

from lakebus_dagster.settings import AWS_SDK_ENV, PROFILES, Settings, s3_credentials
from lakebus_dagster.stack.errors import StackError
from lakebus_dagster.stack.kafka_services import CONNECT_PLUGIN_CLASSES, broker_name, brokers, connect_workers, worker_name
from lakebus_dagster.stack.service import Service, http_ok, write_file, properties

__all__ = ["CONNECT_PLUGIN_CLASSES", "SERVICE_NAMES", "Service", "build_services", "profile_service_names"]


#: the local Spark standalone cluster (master + one worker) and the Spark Connect server on it, the
#: application every DWS and maintenance run attaches to; ports: the settings' ``spark_master`` /
#: ``spark_webui`` (the worker's: the next ones; the server's UI: the one after) and ``spark_connect``.
#: The worker offers 4 cores (slots, not CPUs) and 2 GiB: the server's executor takes 2 cores
#: (``spark.cores.max``) and LAKEBUS_SPARK_EXECUTOR_MEMORY, the rest is left for one other
#: application (a notebook; the per-step baseline of ``bench_dws_latency``)
SPARK_WORKER_CORES = 4
SPARK_WORKER_MEMORY = "2g"
SPARK_DAEMON_HEAP = "256m"
SPARK_CONNECT_CORES = 2


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


#: every service any profile runs, in start order (``down`` stops whatever of them runs)
SERVICE_NAMES = (
    "s3",
    *(broker_name(n) for n in range(1, max(b for b, _ in PROFILES.values()) + 1)),
    "rest-catalog",
    *(worker_name(n) for n in range(1, max(w for _, w in PROFILES.values()) + 1)),
    "spark-master",
    "spark-worker",
    "spark-connect",
)


def profile_service_names(settings: Settings) -> list[str]:
    """The services ``settings.profile`` runs, in start order."""
    return ["s3", *(broker_name(n) for n in range(1, settings.brokers + 1)), "rest-catalog",
            *(worker_name(n) for n in range(1, settings.connect_workers + 1)), "spark-master", "spark-worker", "spark-connect"]


def build_services(settings: Settings, jars: Path, java: str) -> list[Service]:
    """The services, configured from ``settings``. Writing configs happens in ``prepare``."""
    host, ports, run = settings.host, settings.ports, settings.run_dir
    access_key, secret_key = s3_credentials()
    s3_dir = settings.data_dir / "s3"

    # -- S3Proxy -----------------------------------------------------------------------------
    s3proxy_conf = run / "s3proxy.conf"
    # S3Proxy ships no logback.xml, and logback's default is DEBUG for everything: gigabytes of
    # Jetty selector lines per hour. INFO for S3Proxy itself, WARN for the shaded Jetty.
    s3proxy_logback = run / "s3proxy-logback.xml"

    def prepare_s3() -> None:
        s3_dir.mkdir(parents=True, exist_ok=True)
        write_file(s3proxy_logback, _S3PROXY_LOGBACK)
        # The key pair is in this file because S3Proxy reads it nowhere else; mode 0600, ignored by git.
        write_file(
            s3proxy_conf,
            properties(
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

    # -- Spark standalone master + worker (the pyspark distribution's own classes, no download) ----
    spark_home = _pyspark_home()
    master_port, master_ui = ports.spark_master, ports.spark_webui
    worker_port, worker_ui = master_port + 1, master_ui + 1
    spark_work = settings.data_dir / "spark-worker"
    spark_env = {"SPARK_HOME": str(spark_home), "SPARK_LOG_DIR": str(settings.logs_dir), "SPARK_NO_DAEMONIZE": "1",
                 "SPARK_WORKER_DIR": str(spark_work), **AWS_SDK_ENV}

    def spark_master_json() -> dict:
        resp = requests.get(f"http://{host}:{master_ui}/json/", timeout=2)
        return resp.json() if resp.status_code == 200 else {}

    def spark_worker_alive() -> bool:
        workers = spark_master_json().get("workers", [])
        return any(w.get("state") == "ALIVE" and w.get("port") == worker_port for w in workers)

    aws_env = {**AWS_SDK_ENV, "AWS_REGION": settings.region}
    # the Spark Connect server and its executors (children of the worker, whose environment they
    # inherit) read the S3 key pair from the environment: no secret in its configuration file
    s3_env = {**aws_env, "AWS_ACCESS_KEY_ID": access_key, "AWS_SECRET_ACCESS_KEY": secret_key}
    connect_conf_file = run / "spark-connect.conf"

    def prepare_spark_connect() -> None:
        from lakebus_dagster.lake.catalog import LakeEndpoints
        from lakebus_dagster.lake.spark import connect_server_conf, spark_jars

        conf = connect_server_conf(
            LakeEndpoints.local(settings), master=settings.local_spark_master, host=host, port=ports.spark_connect,
            ui_port=master_ui + 2, jars=spark_jars(jars), executor_memory=settings.spark_executor_memory,
            cores_max=SPARK_CONNECT_CORES,
        )
        write_file(connect_conf_file, properties(conf))
        (settings.data_dir / "spark-connect").mkdir(parents=True, exist_ok=True)

    def spark_connect_listening() -> bool:
        from lakebus_dagster.lake.spark import probe_connect

        probe_connect(f"sc://{host}:{ports.spark_connect}", timeout_s=1.0)
        return True
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
        *brokers(settings, jars, java),
        Service(
            name="rest-catalog",
            port=ports.rest_catalog,
            main_class="org.apache.iceberg.rest.RESTCatalogServer",
            classpath_dirs=["rest-catalog"],
            heap=settings.heaps.rest_catalog,
            jvm_props=["-Dorg.slf4j.simpleLogger.defaultLogLevel=info"],
            env={**rest_env(), **aws_env},
            prepare=prepare_rest,
            health=lambda: http_ok(f"{settings.catalog_uri}/v1/config"),
            health_text="GET /v1/config answers 200",
            timeout=90,
        ),
        *connect_workers(settings, jars, access_key, secret_key),
        Service(
            name="spark-master",
            port=master_port,
            main_class="org.apache.spark.deploy.master.Master",
            classpath_dirs=[],
            heap=SPARK_DAEMON_HEAP,
            args=["--host", host, "--port", str(master_port), "--webui-port", str(master_ui)],
            env=spark_env,
            spark_class=str(spark_home / "bin" / "spark-class"),
            health=lambda: spark_master_json().get("status") == "ALIVE",
            health_text=f"the master's /json/ says ALIVE (web UI :{master_ui})",
            timeout=90,
        ),
        Service(
            name="spark-worker",
            port=worker_port,
            main_class="org.apache.spark.deploy.worker.Worker",
            classpath_dirs=[],
            heap=SPARK_DAEMON_HEAP,
            args=[f"spark://{host}:{master_port}", "--host", host, "--port", str(worker_port),
                  "--webui-port", str(worker_ui), "--cores", str(SPARK_WORKER_CORES),
                  "--memory", SPARK_WORKER_MEMORY, "--work-dir", str(spark_work)],
            prepare=lambda: spark_work.mkdir(parents=True, exist_ok=True),
            spark_class=str(spark_home / "bin" / "spark-class"),
            env={**spark_env, **s3_env},
            health=spark_worker_alive,
            health_text="the master lists this worker ALIVE",
            timeout=90,
        ),
        Service(
            name="spark-connect",
            port=ports.spark_connect,
            main_class="org.apache.spark.sql.connect.service.SparkConnectServer",
            classpath_dirs=[],
            heap=settings.spark_connect_memory,
            args=["--properties-file", str(connect_conf_file)],
            env={**spark_env, **s3_env, "SPARK_LOCAL_DIRS": str(settings.data_dir / "spark-connect")},
            prepare=prepare_spark_connect,
            spark_class=str(spark_home / "bin" / "spark-class"),
            spark_submit=True,
            health=spark_connect_listening,
            health_text=f"gRPC port {ports.spark_connect} accepts connections (UI :{master_ui + 2})",
            timeout=120,
        ),
    ]


def _pyspark_home() -> Path:
    """The pyspark package is a Spark distribution (bin/spark-class, jars/): the local standalone cluster runs from it."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        raise StackError("spark: the pyspark package is not installed (it provides the standalone master and worker)")
    return Path(spec.origin).parent
