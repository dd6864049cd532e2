"""The deploy/ files the local stack runs: the Connect worker's properties, the Spark Connect
server's configuration and the Dagster instance are read from deploy/ at every start, and the
local stack changes only the keys declared here (issue 31.2).

Why: the local stack used to write its own versions of these files, and a broken deploy/ file
(a wrong converter class, a bad Spark property, an invalid instance key) broke nothing that ran.
Now a broken deploy/ file breaks the local stack, so it breaks ``make test``.

Each :class:`DeployFile` declares, key by key and with the reason, what the local stack may change:

* ``substituted``: where the process is (hosts, ports, paths) and local-only secrets;
* ``overlaid``: a setting that makes no sense locally (deploy-only: PostgreSQL storage, S3 run logs),
  or one the local stack sizes otherwise or adds for a profile (``cluster``, ``secured``, the cdc stack).

Every other key of the file reaches the process as the file says it; a change of an undeclared key
is refused at start (:class:`StackError` naming the file and the key), and no key of the file is
dropped. ``deploy/README.md`` ("What the local stack runs of deploy/") lists the same keys; a unit
test holds the three together and fails when the overlay grows beyond them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lakebus_dagster.settings import REPO_ROOT
from lakebus_dagster.stack.errors import StackError

__all__ = ["INSTANCE", "SPARK_CONNECT", "WORKER", "DeployFile", "flatten", "read_properties"]

DEPLOY = REPO_ROOT / "deploy"
_SASL = ("security.protocol", "sasl.mechanism", "sasl.jaas.config", "ssl.truststore.type", "ssl.truststore.location")
#: the secured profile's https REST listener (its key and certificate: lakebus_dagster/stack/tls.py)
_REST_TLS = ("listeners.https.ssl.keystore.type", "listeners.https.ssl.keystore.location", "listeners.https.ssl.keystore.password")
#: the cluster profile's worker file: Connect's internal topics on three brokers (the file: one)
_REPLICATION = ("config.storage.replication.factor", "offset.storage.replication.factor",
                "status.storage.replication.factor")
_CATALOG = "spark.sql.catalog.lake"


@dataclass(frozen=True)
class DeployFile:
    """One file of deploy/ a local process starts from, and the keys the local stack may change in it."""

    path: Path
    #: key -> what the local stack puts there (a host, a port, a path, a local-only secret)
    substituted: Mapping[str, str]
    #: key (a dotted path in a YAML file: its whole subtree) -> why the local stack sets it otherwise
    overlaid: Mapping[str, str]

    @property
    def name(self) -> str:
        return self.path.relative_to(REPO_ROOT).as_posix() if self.path.is_relative_to(REPO_ROOT) else str(self.path)

    @property
    def declared(self) -> set[str]:
        return set(self.substituted) | set(self.overlaid)

    def check(self, changes: Mapping[str, Any]) -> None:
        """Refuse a change of a key this file does not declare (the overlay may not grow unseen)."""
        undeclared = sorted(set(changes) - self.declared)
        if undeclared:
            raise StackError(f"{self.name}: the local stack would change {', '.join(undeclared)}, which "
                             "lakebus_dagster/stack/deploy_files.py does not declare (only hosts, ports, paths and "
                             "the declared overlay may differ from deploy/)")

    def properties(self, changes: Mapping[str, Any]) -> dict[str, str]:
        """The file's properties (its order) with ``changes`` applied; keys it lacks are appended."""
        self.check(changes)
        return {**read_properties(self.path), **{k: str(v) for k, v in changes.items()}}

    def instance(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        """The YAML document with each dotted key of ``changes`` replaced (its subtree with it)."""
        self.check(changes)
        doc = _yaml(self.path)
        for dotted, value in changes.items():
            *parents, last = dotted.split(".")
            node = doc
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = value
        return doc

    def header(self, written: Mapping[str, Any], base: Mapping[str, Any]) -> str:
        """The first lines of the file the local stack writes: where it comes from and which keys differ."""
        keys = ", ".join(k for k, v in written.items() if base.get(k) != v) or "none"
        template = DEPLOY / "templates" / self.path.relative_to(DEPLOY) if self.path.is_relative_to(DEPLOY) else None
        source = f"its template {template.relative_to(REPO_ROOT)}" if template and template.exists() else "that file"
        return (f"# {self.name}, as the local stack runs it (lakebus_dagster/stack/deploy_files.py): edit {source}.\n"
                f"# Changed here (declared hosts, ports, paths, local secrets and overlay): {keys}\n")


def read_properties(path: Path) -> dict[str, str]:
    """A Java properties file as deploy/ writes them (``key=value`` lines, ``#`` comments); any other
    line (a continuation, ``key: value``, a key twice) is refused naming the file and the line."""
    out: dict[str, str] = {}
    try:
        text = path.read_text()
    except OSError as exc:
        raise StackError(f"{path}: cannot be read ({exc.strerror}); the local stack starts its process from it") from None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key or " " in key or line.endswith("\\") or key in out:
            why = f"{key} set twice" if key in out else "not a key=value line"
            raise StackError(f"{path}:{number}: {why}: {raw!r}")
        out[key] = value.strip()
    return out


def _yaml(path: Path) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise StackError(f"{path}: cannot be read as YAML ({exc}); the local stack starts Dagster from it") from None
    if not isinstance(doc, dict):
        raise StackError(f"{path}: not a mapping of instance settings")
    return doc


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """A YAML tree as ``dotted.key -> leaf`` (lists are leaves)."""
    if not isinstance(node, dict) or not node:
        return {prefix: node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


WORKER = DeployFile(
    path=DEPLOY / "connect" / "connect-distributed.properties",
    substituted={
        "bootstrap.servers": "the local brokers (host:port, LAKEBUS_KAFKA_PORT)",
        "listeners": "the worker's REST address (http://host:LAKEBUS_CONNECT_PORT, https:// for the secured profile; "
                     "worker n: +10 per worker)",
        "rest.advertised.host.name": "the host (LAKEBUS_HOST)",
        "rest.advertised.port": "the worker's REST port",
        "plugin.path": "the plugins built into the jars cache (<jars>/connect-plugins), then <state>/connect-plugins (new plugins, brought in by rolling_restart_connect)",
        "config.providers.file.param.allowed.paths": "the stack's run dir (<state>/run/external-configuration)",
    },
    overlaid={
        **{key: "cluster profile: Connect's topics on 3 brokers (the file: compose's single broker)" for key in _REPLICATION},
        "connect.protocol": "LAKEBUS_CONNECT_PROTOCOL when it names another protocol (eager, the failover comparison)",
        "scheduled.rebalance.max.delay.ms": "LAKEBUS_CONNECT_REBALANCE_DELAY_MS when set (the failover comparison)",
        "exactly.once.source.support": "LAKEBUS_POSTGRES=on (the cdc stack): deploy/'s capture example runs without exactly-once (the connect principal's transactional-id ACLs for it are declared, not proven on a secured cluster)",
        **{f"{prefix}{key}": "secured profile: the worker's clients log in as principal connect (SASL/SCRAM over TLS, "
                             "the brokers verified against the stack's CA)"
           for prefix in ("", "producer.", "consumer.", "admin.") for key in _SASL},
        **{key: "secured profile: Connect REST over https (the stack's server certificate; keystore password a "
                "${env:} placeholder)" for key in _REST_TLS},
        "rest.extension.classes": "secured profile: Connect REST behind basic auth",
    },
)

SPARK_CONNECT = DeployFile(
    path=DEPLOY / "spark" / "spark-connect.conf",
    substituted={
        "spark.connect.grpc.binding.address": "the host (LAKEBUS_HOST; deploy binds every interface)",
        "spark.connect.grpc.binding.port": "LAKEBUS_SPARK_CONNECT_PORT",
        "spark.ui.port": "LAKEBUS_SPARK_WEBUI_PORT + 2 (deploy: Spark's 4040)",
        "spark.jars": "the Iceberg runtime and AWS bundle in the jars cache (the image has them in /opt/spark/jars)",
        f"{_CATALOG}.uri": "the local REST catalog (the secured profile: its OAuth2 gate)",
        f"{_CATALOG}.s3.endpoint": "the local S3 (LAKEBUS_S3_PORT)",
        f"{_CATALOG}.credential": "a local-only secret: the secured profile's catalog credential (deploy's entrypoint "
                                  "appends it from the Secret)",
        f"{_CATALOG}.token": "a local-only secret: LAKEBUS_CATALOG_TOKEN when set (as the credential)",
    },
    overlaid={
        "spark.master": "a standalone master and worker locally (deploy: local[<cores>], driver and executors in one container)",
        "spark.driver.memory": "LAKEBUS_SPARK_CONNECT_MEMORY (1g; deploy's container has 4 GiB)",
        "spark.cores.max": "the server's executor on the local worker: 2 cores (the `spark` pool's local limit)",
        "spark.executor.memory": "LAKEBUS_SPARK_EXECUTOR_MEMORY, the executor on the local worker",
        "spark.executor.extraJavaOptions": "the local JVMs' C1-only JIT (stack/service.py CLIENT_COMPILER_ONLY)",
        f"{_CATALOG}.warehouse": "LAKEBUS_BUCKET when set apart from values.yaml's bucket (the same by default)",
        f"{_CATALOG}.client.region": "LAKEBUS_S3_REGION when set apart from values.yaml's region (the same by default)",
        f"{_CATALOG}.scope": "secured profile: the catalog gate's OAuth2 scope",
        f"{_CATALOG}.oauth2-server-uri": "secured profile: the catalog gate's token endpoint",
    },
)

INSTANCE = DeployFile(
    path=DEPLOY / "dagster.yaml",
    substituted={},
    overlaid={
        "storage": "deploy-only: PostgreSQL (DAGSTER_PG_*); locally SQLite under DAGSTER_HOME (the lake stage's "
                   "test_dagster_postgres runs the file's own storage)",
        "compute_logs": "deploy-only: S3 with a bucket and key pair of its own; locally files under DAGSTER_HOME "
                        "(test_dagster_postgres runs the S3 one against the local S3)",
        "concurrency.pools.default_limit": "the `spark` pool = the local server's executor cores (2); deploy: "
                                           "values.yaml's spark_connect.cores",
    },
)
