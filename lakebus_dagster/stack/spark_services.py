"""The Spark side of the local stack as service specs: the standalone master, its worker and the
Spark Connect server on them, the application every DWS and maintenance run attaches to.

They run the pyspark distribution's own classes through its ``spark-class`` (no download).
Ports: the settings' ``spark_master`` / ``spark_webui``; the worker's are the next ones, the
server's UI the one after; the server listens on ``spark_connect``. ``LAKEBUS_SPARK_MASTER`` may
name another master (the server then runs its application there).
"""

from __future__ import annotations

import requests

from lakebus_dagster.lake.spark import CONNECT_SERVER_CLASS
from lakebus_dagster.settings import AWS_SDK_ENV
from lakebus_dagster.stack import deploy_files
from lakebus_dagster.stack.deploy_files import read_properties
from lakebus_dagster.stack.local_settings import StackSettings
from lakebus_dagster.stack.service import CLIENT_COMPILER_ONLY, properties, pyspark_home, write_file
from lakebus_dagster.stack.spec import Node, ServiceSpec

#: The worker offers 4 cores (slots, not CPUs) and 2 GiB: the server's executor takes 2 cores
#: (``spark.cores.max``) and LAKEBUS_SPARK_EXECUTOR_MEMORY, the rest is left for one other
#: application (a notebook; the per-step baseline of ``bench_dws_latency``)
SPARK_WORKER_CORES = 4
SPARK_WORKER_MEMORY = "2g"
SPARK_DAEMON_HEAP = "256m"
SPARK_CONNECT_CORES = 2


def _worker_port(settings: StackSettings) -> int:
    return settings.ports.spark_master + 1


def _spark_env(node: Node) -> dict[str, str]:
    settings = node.settings
    return {"SPARK_HOME": str(pyspark_home()), "SPARK_LOG_DIR": str(settings.logs_dir), "SPARK_NO_DAEMONIZE": "1",
            "SPARK_WORKER_DIR": str(settings.data_dir / "spark-worker"), **AWS_SDK_ENV}


def _s3_env(node: Node) -> dict[str, str]:
    """The Spark Connect server and its executors (children of the worker, whose environment they
    inherit) read the S3 key pair from the environment: no secret in its configuration file."""
    access_key, secret_key = node.credentials
    return {**AWS_SDK_ENV, "AWS_REGION": node.settings.lake.region, "AWS_ACCESS_KEY_ID": access_key,
            "AWS_SECRET_ACCESS_KEY": secret_key}


def _master_json(settings: StackSettings) -> dict:
    resp = requests.get(f"http://{settings.host}:{settings.ports.spark_webui}/json/", timeout=2)
    return resp.json() if resp.status_code == 200 else {}


# -- master --------------------------------------------------------------------------------------
SPARK_MASTER = ServiceSpec(
    name="spark-master",
    main_class="org.apache.spark.deploy.master.Master",
    launcher="spark-class",
    port=lambda node: node.settings.ports.spark_master,
    heap=lambda node: SPARK_DAEMON_HEAP,
    args=lambda node: ["--host", node.settings.host, "--port", str(node.settings.ports.spark_master),
                       "--webui-port", str(node.settings.ports.spark_webui)],
    env=_spark_env,
    probe=lambda node: _master_json(node.settings).get("status") == "ALIVE",
    probe_text=lambda node: f"the master's /json/ says ALIVE (web UI :{node.settings.ports.spark_webui})",
    timeout=90,
)


# -- worker --------------------------------------------------------------------------------------
def _worker_args(node: Node) -> list[str]:
    settings = node.settings
    return [f"spark://{settings.host}:{settings.ports.spark_master}", "--host", settings.host,
            "--port", str(_worker_port(settings)), "--webui-port", str(settings.ports.spark_webui + 1),
            "--cores", str(SPARK_WORKER_CORES), "--memory", SPARK_WORKER_MEMORY,
            "--work-dir", str(settings.data_dir / "spark-worker")]


def _worker_alive(node: Node) -> bool:
    workers = _master_json(node.settings).get("workers", [])
    return any(w.get("state") == "ALIVE" and w.get("port") == _worker_port(node.settings) for w in workers)


SPARK_WORKER = ServiceSpec(
    name="spark-worker",
    main_class="org.apache.spark.deploy.worker.Worker",
    launcher="spark-class",
    depends_on=("spark-master",),
    port=lambda node: _worker_port(node.settings),
    heap=lambda node: SPARK_DAEMON_HEAP,
    args=_worker_args,
    env=lambda node: {**_spark_env(node), **_s3_env(node)},
    prepare=lambda node: (node.settings.data_dir / "spark-worker").mkdir(parents=True, exist_ok=True),
    probe=_worker_alive,
    probe_text=lambda node: "the master lists this worker ALIVE",
    timeout=90,
)


# -- Spark Connect server ------------------------------------------------------------------------
def _connect_conf_file(node: Node):
    return node.settings.run_dir / "spark-connect.conf"


def spark_connect_conf(node: Node) -> dict[str, str]:
    """The server's ``spark-connect.conf``: deploy/spark/spark-connect.conf with its addresses, paths and
    local secrets substituted and the declared overlay (:data:`lakebus_dagster.stack.deploy_files.SPARK_CONNECT`
    lists both; nothing else may differ)."""
    from lakebus_dagster.lake.catalog import LakeEndpoints
    from lakebus_dagster.lake.spark import catalog_secret_conf, connect_server_common, spark_jars

    settings = node.settings
    # the catalog's address, warehouse, region and auth as the local stack's clients see them, spelled
    # by the function deploy/'s file is rendered with; of it only the declared keys are taken
    ep = LakeEndpoints.local(settings)
    catalog = {**connect_server_common(ep), **catalog_secret_conf(ep)}
    changes: dict[str, object] = {
        **{key: value for key, value in catalog.items() if key in deploy_files.SPARK_CONNECT.declared},
        "spark.master": settings.local_spark_master,
        "spark.driver.memory": settings.spark_connect_memory,
        "spark.connect.grpc.binding.address": settings.host,
        "spark.connect.grpc.binding.port": settings.ports.spark_connect,
        "spark.ui.port": settings.ports.spark_webui + 2,
        "spark.jars": ",".join(spark_jars(node.jars)),
        # the server is an application that never ends: bounded, it leaves the rest of the worker to
        # other applications (a notebook, the per-step benchmark baseline)
        "spark.cores.max": SPARK_CONNECT_CORES,
        "spark.executor.memory": settings.spark_executor_memory,
        # the executors the server's application gets on the worker: the stack's JIT setting too
        "spark.executor.extraJavaOptions": CLIENT_COMPILER_ONLY,
    }
    return deploy_files.SPARK_CONNECT.properties(changes)


def _prepare_spark_connect(node: Node) -> None:
    conf = spark_connect_conf(node)
    # the catalog's credential / token (secured profile) is in this file: then only its owner reads it
    holds_secret = any(key.endswith((".credential", ".token")) for key in conf)
    header = deploy_files.SPARK_CONNECT.header(conf, read_properties(deploy_files.SPARK_CONNECT.path))
    write_file(_connect_conf_file(node), header + properties(conf), mode=0o600 if holds_secret else 0o644)
    (node.settings.data_dir / "spark-connect").mkdir(parents=True, exist_ok=True)


def _spark_connect_listening(node: Node) -> bool:
    from lakebus_dagster.lake.spark import probe_connect

    probe_connect(f"sc://{node.settings.host}:{node.settings.ports.spark_connect}", timeout_s=1.0)
    return True


SPARK_CONNECT = ServiceSpec(
    name="spark-connect",
    main_class=CONNECT_SERVER_CLASS,
    launcher="spark-submit",
    # its application's executor runs on the worker; its sessions' catalog is the REST catalog over S3
    depends_on=("s3", "rest-catalog", "catalog-gate", "spark-master", "spark-worker"),
    port=lambda node: node.settings.ports.spark_connect,
    heap=lambda node: node.settings.spark_connect_memory,
    args=lambda node: ["--properties-file", str(_connect_conf_file(node))],
    env=lambda node: {**_spark_env(node), **_s3_env(node), "SPARK_LOCAL_DIRS": str(node.settings.data_dir / "spark-connect")},
    prepare=_prepare_spark_connect,
    source=deploy_files.SPARK_CONNECT.name,
    probe=_spark_connect_listening,
    probe_text=lambda node: (f"gRPC port {node.settings.ports.spark_connect} accepts connections "
                             f"(UI :{node.settings.ports.spark_webui + 2})"),
    timeout=120,
)
