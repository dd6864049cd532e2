"""The Kafka side of the local stack: KRaft brokers and Kafka Connect workers, one of each or a cluster.

The ``single`` profile runs broker ``kafka`` and worker ``connect``; the ``cluster`` profile runs
three brokers (``kafka``, ``kafka-2``, ``kafka-3``; each broker and controller, one KRaft quorum)
and two workers (``connect``, ``connect-2``) of one distributed Connect cluster. Node *n* listens on
the base port + 10×(n−1) (:meth:`Settings.broker_port`), so the first node of each keeps the single
profile's address and everything that names one endpoint keeps working.
"""

from __future__ import annotations

import base64
import subprocess
import uuid
from pathlib import Path

from lakebus_dagster.bus.door import LAKEBUS_GUARD_CLASS, STRICT_CONVERTER_CLASS
from lakebus_dagster.bus.layout import ICEBERG_SINK_CLASS
from lakebus_dagster.settings import AWS_SDK_ENV, S3_ACCESS_KEY_VAR, S3_SECRET_KEY_VAR, Settings
from lakebus_dagster.stack import security
from lakebus_dagster.stack.errors import StackError
from lakebus_dagster.stack.service import LOG4J, Service, http_ok, properties, write_file

#: the plugins Connect must have loaded before it counts as healthy (the sink and lakebus's door)
CONNECT_PLUGIN_CLASSES = (ICEBERG_SINK_CLASS, STRICT_CONVERTER_CLASS, LAKEBUS_GUARD_CLASS)


def broker_name(node: int) -> str:
    return "kafka" if node == 1 else f"kafka-{node}"


def worker_name(worker: int) -> str:
    return "connect" if worker == 1 else f"connect-{worker}"


def durability(settings: Settings) -> tuple[int, int]:
    """(replication factor, min.insync.replicas) of the cluster's internal topics: 3 and 2 on three
    brokers — one broker may die without losing an acknowledged write or blocking producers."""
    replicas = min(3, settings.brokers)
    return replicas, max(1, replicas - 1)


def _cluster_id(settings: Settings) -> str:
    """One KRaft cluster id for every broker's log dir, kept beside them (formatting needs it once)."""
    path = settings.data_dir / "kafka-cluster-id"
    if not path.exists():
        # Kafka's own format: 22-char URL-safe base64 of a random UUID (no JVM needed to make one)
        write_file(path, base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode() + "\n")
    return path.read_text().strip()


def brokers(settings: Settings, jars: Path, java: str) -> list[Service]:
    host, run = settings.host, settings.run_dir
    log4j_props = run / "log4j.properties"
    log4j_flag = f"-Dlog4j.configuration=file:{log4j_props}"
    voters = ",".join(f"{n}@{host}:{settings.controller_port(n)}" for n in range(1, settings.brokers + 1))
    replicas, min_isr = durability(settings)

    def broker(node: int) -> Service:
        name = broker_name(node)
        suffix = "" if node == 1 else f"-{node}"
        server_props = run / f"kafka-server{suffix}.properties"
        log_dir = settings.data_dir / f"kafka{suffix}"
        port, controller = settings.broker_port(node), settings.controller_port(node)

        def prepare() -> None:
            write_file(log4j_props, LOG4J)
            write_file(
                server_props,
                properties(
                    {
                        "process.roles": "broker,controller",
                        "node.id": node,
                        "controller.quorum.voters": voters,
                        "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller}",
                        "advertised.listeners": f"PLAINTEXT://{host}:{port}",
                        "inter.broker.listener.name": "PLAINTEXT",
                        "controller.listener.names": "CONTROLLER",
                        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                        "log.dirs": log_dir,
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
                        "group.initial.rebalance.delay.ms": 0,
                        "log.retention.hours": 168,
                        **(security.broker_properties(host, port, controller) if settings.secured else {}),
                    }
                ),
                mode=0o600 if settings.secured else 0o644,  # the inter-broker password is in it
            )
            if not (log_dir / "meta.properties").exists():
                log_dir.mkdir(parents=True, exist_ok=True)
                fmt = subprocess.run(
                    [java, "-Xmx256m", "-cp", str(jars / "kafka" / "*"), log4j_flag, "kafka.tools.StorageTool",
                     "format", "-t", _cluster_id(settings), "-c", str(server_props),
                     *(security.format_args() if settings.secured else [])],
                    capture_output=True,
                    text=True,
                )
                if fmt.returncode != 0:
                    raise StackError(f"{name}: formatting the KRaft log dir {log_dir} failed:\n{fmt.stdout}{fmt.stderr}")

        def healthy() -> bool:
            from confluent_kafka.admin import AdminClient

            # this broker itself (bootstrap = only its address) serves metadata and lists itself
            admin = AdminClient({**settings.kafka_client_config(), "bootstrap.servers": f"{host}:{port}", "log_level": 0})
            return node in admin.list_topics(timeout=2).brokers

        def acls() -> str:
            return f"ACLs of principals {', '.join(security.ACLS)} in place ({security.ensure_acls(settings)} bindings)"

        return Service(
            name=name,
            port=port,
            main_class="kafka.Kafka",
            classpath_dirs=["kafka"],
            heap=settings.heaps.kafka,
            args=[str(server_props)],
            jvm_props=[log4j_flag],
            prepare=prepare,
            health=healthy,
            health_text="broker metadata lists a broker" if settings.brokers == 1 else f"it lists itself (node {node}) as a broker",
            timeout=90,
            start_group="kafka" if settings.brokers > 1 else None,
            on_ready=acls if settings.secured and node == settings.brokers else None,
        )

    return [broker(n) for n in range(1, settings.brokers + 1)]


def connect_workers(settings: Settings, jars: Path, access_key: str, secret_key: str) -> list[Service]:
    host, run = settings.host, settings.run_dir
    log4j_flag = f"-Dlog4j.configuration=file:{run / 'log4j.properties'}"
    replicas, _ = durability(settings)
    aws_env = {**AWS_SDK_ENV, "AWS_REGION": settings.region}

    def worker(number: int) -> Service:
        suffix = "" if number == 1 else f"-{number}"
        worker_props = run / f"connect-distributed{suffix}.properties"
        port = settings.connect_port(number)
        cluster: dict[str, object] = {}
        if settings.connect_workers > 1:
            # When a worker leaves, Connect waits this long for it to come back before moving its
            # tasks to the survivors (default 5 minutes: five minutes of no ingest for that share).
            cluster["scheduled.rebalance.max.delay.ms"] = 10_000

        def prepare() -> None:
            write_file(
                worker_props,
                properties(
                    {
                        "bootstrap.servers": settings.bootstrap_servers,
                        "group.id": "lakebus-connect",
                        "listeners": f"http://{host}:{port}",
                        "rest.advertised.host.name": host,
                        "rest.advertised.port": port,
                        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                        "value.converter.schemas.enable": "true",
                        "config.storage.topic": "_connect-configs",
                        "offset.storage.topic": "_connect-offsets",
                        "status.storage.topic": "_connect-status",
                        "config.storage.replication.factor": replicas,
                        "offset.storage.replication.factor": replicas,
                        "status.storage.replication.factor": replicas,
                        # an idle sink task polls for at most this long before it reads the Iceberg control
                        # topic again: at 10 s a commit on a quiet bus took ~19 s, at 1 s under 2 s
                        # (BENCHMARKS.md, end-to-end ingest); the Iceberg sink commits its own offsets
                        "offset.flush.interval.ms": 1000,
                        **cluster,
                        "plugin.path": jars / "connect-plugins",
                        # Connector configs reference secrets as ${env:VAR} / ${file:path:key}; the worker
                        # resolves them, GET /connectors/<name>/config keeps showing the placeholder.
                        "config.providers": "env,file",
                        "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
                        "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
                        **(security.worker_properties() if settings.secured else {}),
                    }
                ),
            )
            if settings.secured:
                security.write_rest_login(run, settings)

        def healthy() -> bool:
            # every plugin the sink's config names must be loaded: a worker started before the
            # lakebus plugin was built would accept no connector config that uses it
            return http_ok(
                f"http://{host}:{port}/connector-plugins?connectorsOnly=false",
                lambda r: set(CONNECT_PLUGIN_CLASSES) <= {p.get("class") for p in r.json()},
                auth=settings.connect_auth(),
            )

        return Service(
            name=worker_name(number),
            port=port,
            main_class="org.apache.kafka.connect.cli.ConnectDistributed",
            classpath_dirs=["kafka"],
            heap=settings.heaps.connect,
            # The Iceberg sink re-reads the worker file from `sun.java.command`: it must be the first
            # program argument, and the path must contain no spaces (checked in `up`).
            args=[str(worker_props)],
            jvm_props=[log4j_flag, *([f"-Djava.security.auth.login.config={run / 'connect-rest-jaas.conf'}"]
                                     if settings.secured else [])],
            env={**aws_env, S3_ACCESS_KEY_VAR: access_key, S3_SECRET_KEY_VAR: secret_key},
            prepare=prepare,
            health=healthy,
            health_text=f"GET /connector-plugins lists {', '.join(c.rsplit('.', 1)[1] for c in CONNECT_PLUGIN_CLASSES)}",
            timeout=240,
            start_group="connect" if settings.connect_workers > 1 else None,
        )

    return [worker(n) for n in range(1, settings.connect_workers + 1)]
