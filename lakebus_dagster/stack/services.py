"""The stack's service table: every kind of local service, in start order — the one place that orders them.

S3 first (the catalog writes metadata to it), PostgreSQL when LAKEBUS_POSTGRES=on (the captured
database; nothing waits for it but the change capture), then the Kafka broker(s), the REST catalog
(and, in the secured profile, the catalog gate in front of it), the Connect worker(s) (they need the
brokers, and the sink needs the catalog and S3), and the Spark
standalone master, its worker and the Spark Connect server last (nothing of the ingest waits for
them). ``up`` starts each as soon as the rows it depends on are healthy (so the Spark master and
worker start beside S3 and the brokers), ``down`` stops them in reverse order; a profile
(:data:`lakebus_dagster.settings.PROFILES`) decides how many brokers and workers the rows expand to.
Each row is a :class:`~lakebus_dagster.stack.spec.ServiceSpec`, declared beside its siblings in
:mod:`.storage_services`, :mod:`.kafka_services` and :mod:`.spark_services`.
"""

from __future__ import annotations

from pathlib import Path

from lakebus_dagster.settings import PROFILES
from lakebus_dagster.secret_env import s3_credentials
from lakebus_dagster.stack.kafka_services import BROKER, CONNECT_PLUGIN_CLASSES, CONNECT_WORKER
from lakebus_dagster.stack.local_settings import StackSettings
from lakebus_dagster.stack.postgres_service import POSTGRES
from lakebus_dagster.stack.service import Service
from lakebus_dagster.stack.spark_services import SPARK_CONNECT, SPARK_MASTER, SPARK_WORKER
from lakebus_dagster.stack.spec import ServiceSpec, check_order
from lakebus_dagster.stack.storage_services import CATALOG_GATE, REST_CATALOG, S3

__all__ = ["CONNECT_PLUGIN_CLASSES", "SERVICE_NAMES", "STOP_SIGNALS", "TABLE", "Service", "build_services",
           "profile_service_names"]

#: every kind of service, in start order
TABLE: tuple[ServiceSpec, ...] = (S3, POSTGRES, BROKER, REST_CATALOG, CATALOG_GATE, CONNECT_WORKER, SPARK_MASTER, SPARK_WORKER,
                                  SPARK_CONNECT)
check_order(TABLE)


def profile_service_names(settings: StackSettings) -> list[str]:
    """The services ``settings.profile`` runs, in start order."""
    return [name for spec in TABLE for name in spec.names(settings)]


#: every service any profile runs, in start order (``down`` stops whatever of them runs)
SERVICE_NAMES = tuple(
    spec.node_name(n) for spec in TABLE for n in range(1, max(spec.replicas(p) for p in PROFILES) + 1)
)


#: the signal ``down`` stops each service with (SIGTERM unless its spec says otherwise)
STOP_SIGNALS = {
    spec.node_name(n): spec.stop_signal for spec in TABLE for n in range(1, max(spec.replicas(p) for p in PROFILES) + 1)
}


def build_services(settings: StackSettings, jars: Path, java: str) -> list[Service]:
    """The services of ``settings.profile``, configured from ``settings``. Writing configs happens in ``prepare``."""
    credentials = s3_credentials()
    return [spec.bind(node) for spec in TABLE for node in spec.nodes(settings, jars, java, credentials)]
