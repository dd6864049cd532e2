"""What only the local dev stack needs: its JVMs' heaps, its own ports, its state directory's layout.

Why apart from :mod:`lakebus_dagster.settings`: a production deployment attaches to existing
services and never starts a JVM of lakebus's, so the code location loads none of this. The stack
(``lakebus stack …``, ``lakebus ui``, the demo) and the tests that drive it load
:class:`StackSettings`, which *is* a :class:`~lakebus_dagster.settings.Settings` (the same endpoints
and credentials, read the same way) plus these fields, so one object still says where everything is.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from lakebus_dagster.settings import PORT_STEP, PROFILES, Settings, SettingsReader, load_settings
from lakebus_dagster.setting_groups import Ports

__all__ = ["JvmHeaps", "METRICS_PORT_OFFSET", "PROFILES", "StackPorts", "StackSettings", "load_stack_settings"]

#: a broker's or Connect worker's Prometheus metrics port (the JMX exporter agent): its own port + 5.
#: Node *n* is at base + PORT_STEP × (n-1), so the cluster profile's metrics ports stay apart too, and
#: below PORT_STEP the offset stays clear of the next node's ports (the controller: the broker's + 1)
METRICS_PORT_OFFSET = 5


@dataclass(frozen=True, kw_only=True)
class StackPorts(Ports):
    """The endpoints' base ports, and the ones only the stack's own processes listen on."""

    kafka_controller: int
    #: the local Spark standalone master; its worker listens on the next port
    spark_master: int = 7077
    #: the master's web UI (its /json/ is the health probe); the worker's UI on the next port, the
    #: Spark Connect server's UI on the one after
    spark_webui: int = 18080


@dataclass(frozen=True)
class JvmHeaps:
    """Maximum heap per JVM. Sized so the stack at rest stays under 3 GiB resident on a 2-core box."""

    kafka: str
    connect: str
    rest_catalog: str
    s3: str


#: the Connect rebalance protocols a local stack may run (``compatible`` is only a migration step)
CONNECT_PROTOCOLS = ("sessioned", "eager")


@dataclass(frozen=True, kw_only=True)
class StackSettings(Settings):
    """The settings plus what the local stack's processes are started with."""

    ports: StackPorts
    heaps: JvmHeaps
    #: the local stack's Spark Connect server: its driver heap and its executor's
    spark_connect_memory: str = "1g"
    spark_executor_memory: str = "1g"
    #: the Dagster UI's port (``lakebus ui``, ``launch``, ``demo``)
    dagster_port: int = 3000
    #: the Connect workers' ``connect.protocol``: "sessioned" (Kafka's default) or "eager"
    connect_protocol: str = "sessioned"
    #: the Connect workers' ``scheduled.rebalance.max.delay.ms``; None: deploy/'s worker file
    connect_rebalance_delay_ms: int | None = None

    @property
    def secured(self) -> bool:
        """The local stack runs SASL/SCRAM with ACLs and Connect REST basic auth (profile ``secured``)."""
        return self.profile == "secured"

    def controller_port(self, node: int) -> int:
        """KRaft controller port of broker ``node`` (1-based)."""
        return self.ports.kafka_controller + PORT_STEP * (node - 1)

    def broker_metrics_port(self, node: int) -> int:
        """Prometheus metrics port of broker ``node`` (1-based): :data:`METRICS_PORT_OFFSET` past its client port."""
        return self.broker_port(node) + METRICS_PORT_OFFSET

    def worker_metrics_port(self, worker: int) -> int:
        """Prometheus metrics port of Connect worker ``worker`` (1-based): :data:`METRICS_PORT_OFFSET` past its REST port."""
        return self.connect_port(worker) + METRICS_PORT_OFFSET

    @property
    def local_spark_master(self) -> str:
        """The local stack's Spark standalone master, for ``LAKEBUS_SPARK_MASTER``."""
        return f"spark://{self.host}:{self.ports.spark_master}"

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


def load_stack_settings(reader: SettingsReader | None = None) -> StackSettings:
    """:func:`~lakebus_dagster.settings.load_settings`, then the stack's own variables, through the same
    reader (same checks, same one-line :class:`~lakebus_dagster.envvars.SettingsError` naming the variable)."""
    e = reader or SettingsReader()
    base = load_settings(e)
    ports = StackPorts(
        kafka=base.ports.kafka, connect=base.ports.connect, rest_catalog=base.ports.rest_catalog, s3=base.ports.s3,
        spark_connect=base.ports.spark_connect, postgres=base.ports.postgres,
        kafka_controller=e.port("LAKEBUS_KAFKA_CONTROLLER_PORT"),
        spark_master=e.port("LAKEBUS_SPARK_MASTER_PORT"),
        spark_webui=e.port("LAKEBUS_SPARK_WEBUI_PORT"),
    )
    heaps = JvmHeaps(
        kafka=e.memory_size("LAKEBUS_KAFKA_HEAP"),
        connect=e.memory_size("LAKEBUS_CONNECT_HEAP"),
        rest_catalog=e.memory_size("LAKEBUS_REST_CATALOG_HEAP"),
        s3=e.memory_size("LAKEBUS_S3_HEAP"),
    )
    inherited = {f.name: getattr(base, f.name) for f in fields(Settings) if f.name != "ports"}
    return StackSettings(
        **inherited, ports=ports, heaps=heaps,
        spark_connect_memory=e.memory_size("LAKEBUS_SPARK_CONNECT_MEMORY"),
        spark_executor_memory=e.memory_size("LAKEBUS_SPARK_EXECUTOR_MEMORY"),
        dagster_port=e.port("LAKEBUS_DAGSTER_PORT"),
        connect_protocol=e.choice("LAKEBUS_CONNECT_PROTOCOL", CONNECT_PROTOCOLS),
        connect_rebalance_delay_ms=e.optional_int("LAKEBUS_CONNECT_REBALANCE_DELAY_MS"),
    )
