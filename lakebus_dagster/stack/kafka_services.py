"""The Kafka side of the local stack as service specs: KRaft brokers and Kafka Connect workers,
one of each or a cluster.

The ``single`` profile runs broker ``kafka`` and worker ``connect``; the ``cluster`` profile runs
three brokers (``kafka``, ``kafka-2``, ``kafka-3``; each broker and controller, one KRaft quorum)
and two workers (``connect``, ``connect-2``) of one distributed Connect cluster. Node *n* listens on
the base port + 10×(n−1) (:meth:`Settings.broker_port`), so the first node of each keeps the single
profile's address and everything that names one endpoint keeps working.
"""

from __future__ import annotations

import base64
import os
import subprocess
import uuid
from pathlib import Path

from lakebus_dagster.bus.door import LAKEBUS_GUARD_CLASS, STRICT_CONVERTER_CLASS
from lakebus_dagster.bus.layout import ICEBERG_SINK_CLASS
from lakebus_dagster.cdc.capture import DEBEZIUM_POSTGRES_CLASS
from lakebus_dagster.settings import AWS_SDK_ENV, PROFILES
from lakebus_dagster.secret_env import CATALOG_CREDENTIAL_VAR, CATALOG_TOKEN_VAR, POSTGRES_PASSWORD_VAR, S3_ACCESS_KEY_VAR, S3_SECRET_KEY_VAR, catalog_secrets
from lakebus_dagster.stack import jmx_exporter, security
from lakebus_dagster.stack.deploy_files import WORKER, read_properties
from lakebus_dagster.stack.errors import StackError
from lakebus_dagster.stack.local_settings import StackSettings
from lakebus_dagster.stack.service import LOG4J2, LOG4J2_FILE, http_ok, properties, write_file
from lakebus_dagster.stack.spec import Node, ServiceSpec
from lakebus_dagster.stack.tls import tls_files

#: the plugins Connect must have loaded before it counts as healthy (the sink and lakebus's door)
CONNECT_PLUGIN_CLASSES = (ICEBERG_SINK_CLASS, STRICT_CONVERTER_CLASS, LAKEBUS_GUARD_CLASS)


def required_plugin_classes(settings: StackSettings) -> tuple[str, ...]:
    """What the health probe waits for: the sink's plugins, and Debezium's source with LAKEBUS_POSTGRES=on."""
    return CONNECT_PLUGIN_CLASSES + ((DEBEZIUM_POSTGRES_CLASS,) if settings.capture.enabled else ())


def exactly_once_source(settings: StackSettings) -> bool:
    """Whether the workers run source tasks transactionally (KIP-618): :attr:`Settings.exactly_once_sources`.
    A fresh worker group may start at ``enabled`` directly; an existing multi-worker group is rolled
    through ``preparing`` first (Kafka's upgrade notes)."""
    return settings.exactly_once_sources


def broker_name(node: int) -> str:
    return BROKER.node_name(node)


def worker_name(worker: int) -> str:
    return CONNECT_WORKER.node_name(worker)


def durability(settings: StackSettings) -> tuple[int, int]:
    """(replication factor, min.insync.replicas) of the cluster's internal topics: 3 and 2 on three
    brokers — one broker may die without losing an acknowledged write or blocking producers."""
    replicas = min(3, settings.brokers)
    return replicas, max(1, replicas - 1)


def _cluster_id(settings: StackSettings) -> str:
    """One KRaft cluster id for every broker's log dir, kept beside them (formatting needs it once)."""
    path = settings.data_dir / "kafka-cluster-id"
    if not path.exists():
        # Kafka's own format: 22-char URL-safe base64 of a random UUID (no JVM needed to make one).
        # Like Kafka's Uuid.randomUuid, never one starting with "-": kafka-storage's argument parser
        # takes "-t -xyz" for a missing value (1 run in 64; it failed a fresh-clone CI run)
        cluster_id = "-"
        while cluster_id.startswith("-"):
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        write_file(path, cluster_id + "\n")
    return path.read_text().strip()


def _log4j_flag(settings: StackSettings) -> str:
    return f"-Dlog4j2.configurationFile={settings.run_dir / LOG4J2_FILE}"


def _agent_flag(node: Node, port: int) -> str:
    """The Prometheus JMX exporter agent serving this node's metrics on ``port`` (:mod:`.jmx_exporter`)."""
    return jmx_exporter.agent_flag(node.jars, node.settings.host, port)


# -- brokers -------------------------------------------------------------------------------------
def _server_props(node: Node) -> Path:
    return node.settings.run_dir / f"kafka-server{node.suffix}.properties"


def _log_dir(node: Node) -> Path:
    return node.settings.data_dir / f"kafka{node.suffix}"


def broker_properties(node: Node) -> dict[str, object]:
    """Broker *n*'s ``kafka-server[-n].properties``: broker and controller of one KRaft quorum."""
    settings, host = node.settings, node.settings.host
    port, controller = settings.broker_port(node.number), settings.controller_port(node.number)
    voters = ",".join(f"{n}@{host}:{settings.controller_port(n)}" for n in range(1, settings.brokers + 1))
    replicas, min_isr = durability(settings)
    return {
        "process.roles": "broker,controller",
        "node.id": node.number,
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller}",
        "advertised.listeners": f"PLAINTEXT://{host}:{port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": _log_dir(node),
        # The bus layout is provisioned explicitly; a typo must not create a topic.
        "auto.create.topics.enable": "false",
        "num.partitions": 1,
        "default.replication.factor": replicas,
        "min.insync.replicas": min_isr,
        "offsets.topic.replication.factor": replicas,
        "offsets.topic.num.partitions": 10,
        # The Iceberg sink commits through Kafka transactions.
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min_isr,
        "transaction.state.log.num.partitions": 10,
        # Kafka's default (3 s) where Connect runs several workers: a consumer group that was empty (the
        # sink after stop + resume, every task restarted) waits for all its members and assigns once.
        # At 0, the tasks joining one by one made two rebalances in a row, and the Iceberg sink 1.11's
        # election (a describe of its group during open()) saw "no partitions assigned across all
        # members": a coordinator no task answered, every cycle timing out (seen on the cluster
        # profile). One worker (single, secured) keeps 0: its test consumers join without the wait.
        "group.initial.rebalance.delay.ms": 3000 if settings.connect_workers > 1 else 0,
        "log.retention.hours": 168,
        **(security.broker_properties(host, port, controller, tls_files(settings)) if settings.secured else {}),
    }


def _prepare_broker(node: Node) -> None:
    settings, server_props, log_dir = node.settings, _server_props(node), _log_dir(node)
    write_file(settings.run_dir / LOG4J2_FILE, LOG4J2)
    # the secured profile's inter-broker password is in it
    write_file(server_props, properties(broker_properties(node)), mode=0o600 if settings.secured else 0o644)
    if (log_dir / "meta.properties").exists():
        return
    log_dir.mkdir(parents=True, exist_ok=True)
    fmt = subprocess.run(
        [node.java, "-Xmx256m", "-cp", str(node.jars / "kafka" / "*"), _log4j_flag(settings), "kafka.tools.StorageTool",
         "format", f"--cluster-id={_cluster_id(settings)}", "-c", str(server_props),
         *(security.format_args() if settings.secured else [])],
        capture_output=True,
        text=True,
    )
    if fmt.returncode != 0:
        raise StackError(f"{broker_name(node.number)}: formatting the KRaft log dir {log_dir} failed:\n{fmt.stdout}{fmt.stderr}")


def _broker_healthy(node: Node) -> bool:
    from lakebus_dagster.kafka.clients import KafkaClients

    # this broker itself (bootstrap = only its address) serves metadata and lists itself
    settings = node.settings
    bootstrap = f"{settings.host}:{settings.broker_port(node.number)}"
    admin = KafkaClients(settings.kafka.client_config()).admin(**{"bootstrap.servers": bootstrap}, log_level=0)
    return node.number in admin.list_topics(timeout=2).brokers


def _broker_acls(node: Node) -> str | None:
    """The secured profile's ACLs, once the last broker is up (idempotent: on every ``up``)."""
    settings = node.settings
    if not (settings.secured and node.number == settings.brokers):
        return None
    return f"ACLs of principals {', '.join(security.ACLS)} in place ({security.ensure_acls(settings)} bindings)"


BROKER = ServiceSpec(
    name="kafka",
    main_class="kafka.Kafka",
    classpath_dirs=("kafka",),
    replicas=lambda profile: PROFILES[profile][0],
    # broker 1 alone can never elect a controller: the quorum's brokers start before any is waited for
    start_together=True,
    port=lambda node: node.settings.broker_port(node.number),
    heap=lambda node: node.settings.heaps.kafka,
    args=lambda node: [str(_server_props(node))],
    jvm_props=lambda node: [_log4j_flag(node.settings), _agent_flag(node, node.settings.broker_metrics_port(node.number))],
    metrics_port=lambda node: node.settings.broker_metrics_port(node.number),
    prepare=_prepare_broker,
    probe=_broker_healthy,
    probe_text=lambda node: ("broker metadata lists a broker" if node.settings.brokers == 1
                             else f"it lists itself (node {node.number}) as a broker"),
    timeout=90,
    on_ready=_broker_acls,
)


# -- Connect workers -----------------------------------------------------------------------------
def _worker_props(node: Node) -> Path:
    return node.settings.run_dir / f"connect-distributed{node.suffix}.properties"


def connect_worker_properties(node: Node) -> dict[str, str]:
    """Worker *n*'s ``connect-distributed[-n].properties``: deploy/connect/connect-distributed.properties
    (compose's worker file) with its addresses and paths substituted, and the profile's declared overlay
    (:data:`lakebus_dagster.stack.deploy_files.WORKER` lists both; nothing else may differ)."""
    settings, host = node.settings, node.settings.host
    port = settings.connect_port(node.number)
    changes: dict[str, object] = {
        "bootstrap.servers": settings.kafka.bootstrap_servers,
        "listeners": f"{'https' if settings.secured else 'http'}://{host}:{port}",
        "rest.advertised.host.name": host,
        "rest.advertised.port": port,
        # the built plugins, then the operator's own directory: a new plugin dropped there enters the
        # running workers through the rolling_restart_connect job (Connect reads plugin.path at start only)
        "plugin.path": f"{node.jars / 'connect-plugins'},{extra_plugins_dir(settings)}",
        "config.providers.file.param.allowed.paths": settings.run_dir / "external-configuration",
    }
    if settings.brokers > 1:
        replicas, _ = durability(settings)
        changes.update(dict.fromkeys(("config.storage.replication.factor", "offset.storage.replication.factor",
                                      "status.storage.replication.factor"), replicas))
    if settings.connect_protocol != read_properties(WORKER.path).get("connect.protocol"):
        # eager (LAKEBUS_CONNECT_PROTOCOL, for the failover comparison; the file's sessioned is why: BENCHMARKS.md)
        changes["connect.protocol"] = settings.connect_protocol
    if settings.connect_rebalance_delay_ms is not None:
        # LAKEBUS_CONNECT_REBALANCE_DELAY_MS, for the failover comparison (BENCHMARKS.md)
        changes["scheduled.rebalance.max.delay.ms"] = settings.connect_rebalance_delay_ms
    if exactly_once_source(settings):
        # source records and their offsets in one Kafka transaction (Debezium declares SUPPORTED;
        # its connector config asks for exactly.once.support=required)
        changes["exactly.once.source.support"] = "enabled"
    if settings.secured:
        changes.update(security.worker_properties(tls_files(settings)))
    return WORKER.properties(changes)


def extra_plugins_dir(settings: StackSettings) -> Path:
    """``<state>/connect-plugins``: where a plugin not built into the jars cache goes on the local
    stack (one sub-directory per plugin), read by each worker when it starts."""
    return settings.state_dir / "connect-plugins"


def _prepare_worker(node: Node) -> None:
    extra_plugins_dir(node.settings).mkdir(parents=True, exist_ok=True)
    written = connect_worker_properties(node)
    header = WORKER.header(written, read_properties(WORKER.path))
    write_file(_worker_props(node), header + properties(written))
    # the file provider refuses to start on an allowed path that does not exist
    (node.settings.run_dir / "external-configuration").mkdir(parents=True, exist_ok=True)
    if node.settings.secured:
        security.write_rest_login(node.settings.run_dir, node.settings)


def _worker_healthy(node: Node) -> bool:
    # every plugin the sink's config names must be loaded: a worker started before the
    # lakebus plugin was built would accept no connector config that uses it
    settings = node.settings
    return http_ok(
        f"{settings.local_connect_urls[node.number - 1]}/connector-plugins?connectorsOnly=false",
        lambda r: set(required_plugin_classes(settings)) <= {p.get("class") for p in r.json()},
        auth=settings.connect.auth(), verify=settings.connect.verify(),
    )


def _worker_jvm_props(node: Node) -> list[str]:
    run = node.settings.run_dir
    return [_log4j_flag(node.settings), _agent_flag(node, node.settings.worker_metrics_port(node.number)),
            *([f"-Djava.security.auth.login.config={run / 'connect-rest-jaas.conf'}"] if node.settings.secured else [])]


def _worker_env(node: Node) -> dict[str, str]:
    """The secrets the sink's ``${env:…}`` placeholders name: the S3 key pair and the catalog's
    credential or token (when set; the secured profile generates a credential)."""
    access_key, secret_key = node.credentials
    credential, token = catalog_secrets()
    env = {**AWS_SDK_ENV, "AWS_REGION": node.settings.lake.region, S3_ACCESS_KEY_VAR: access_key, S3_SECRET_KEY_VAR: secret_key,
           **({CATALOG_CREDENTIAL_VAR: credential} if credential else {}), **({CATALOG_TOKEN_VAR: token} if token else {})}
    if node.settings.capture.enabled and os.environ.get(POSTGRES_PASSWORD_VAR):
        # the Debezium source reads it as ${env:LAKEBUS_POSTGRES_PASSWORD} (EnvVarConfigProvider)
        env[POSTGRES_PASSWORD_VAR] = os.environ[POSTGRES_PASSWORD_VAR]
    return env


CONNECT_WORKER = ServiceSpec(
    name="connect",
    main_class="org.apache.kafka.connect.cli.ConnectDistributed",
    classpath_dirs=("kafka",),
    # the brokers hold its topics; the sink writes through the catalog to S3
    depends_on=("kafka", "s3", "rest-catalog", "catalog-gate"),
    replicas=lambda profile: PROFILES[profile][1],
    start_together=True,  # the workers' start-ups overlap
    port=lambda node: node.settings.connect_port(node.number),
    heap=lambda node: node.settings.heaps.connect,
    # The Iceberg sink re-reads the worker file from `sun.java.command`: it must be the first
    # program argument, and the path must contain no spaces (checked in `up`).
    args=lambda node: [str(_worker_props(node))],
    jvm_props=_worker_jvm_props,
    metrics_port=lambda node: node.settings.worker_metrics_port(node.number),
    env=_worker_env,
    prepare=_prepare_worker,
    probe=_worker_healthy,
    source=WORKER.name,
    probe_text=lambda node: f"GET /connector-plugins lists {', '.join(c.rsplit('.', 1)[1] for c in required_plugin_classes(node.settings))}",
    timeout=240,
)
