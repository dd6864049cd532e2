"""``lakebus deploy render``: deploy/'s files from ``deploy/templates/`` and ``deploy/values.yaml``.

Why rendered: the Spark configuration, the Dagster instance YAML and the Helm values cannot read an
environment variable for every value they need, so "one source" means one file rendered into all of
them. The templates are Jinja2 (``{{ … }}``; compose's own ``${VAR}`` interpolation passes through);
what they may use is :func:`context`: the values (:mod:`.values`), each target's settings as the code
reads them, the Spark Connect server's configuration (:func:`lakebus_dagster.lake.spark.connect_server_common`)
and the run queue (:mod:`.instance`). The local stack runs the rendered Spark configuration and
instance themselves (``stack/deploy_files.py``).

``--check`` renders into memory and names each committed file that differs (a unit test runs it).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import jinja2
import yaml

from lakebus_dagster.deployment import access, instance
from lakebus_dagster.deployment.values import DeployValues, Target, load_values
from lakebus_dagster.errors import CliError
from lakebus_dagster.settings import REPO_ROOT

__all__ = ["DEPLOY", "TEMPLATES", "configure", "context", "render", "stale", "write"]

DEPLOY = REPO_ROOT / "deploy"
TEMPLATES = DEPLOY / "templates"
VALUES = DEPLOY / "values.yaml"
#: the local stack's JMX exporter rules (lakebus_dagster/stack/jmx_exporter.py), Strimzi's too
JMX_RULES = REPO_ROOT / "infra" / "jmx-exporter" / "kafka-connect.yaml"

DESCRIPTION = """\
Render deploy/'s compose file, Dagster instance, Spark Connect configuration, Kubernetes ConfigMaps, Helm
values, object-store init Job, NetworkPolicies, Strimzi KafkaUsers and KafkaConnector example, the JMX
exporter's ConfigMap, `lakebus metrics`' Deployment and the PodMonitors from
deploy/templates/ and one values file (deploy/values.yaml): the bucket, the region, the addresses, the
pool limit and the run-monitoring timeouts are written there once; who may do what
(lakebus_dagster/deployment/access.py: the secured profile's Kafka ACLs, the object-store users) in code. --check changes
nothing and exits 1 naming every file that is not what the values give.
"""
EXAMPLES = """\
  lakebus deploy render                  # after editing deploy/values.yaml or deploy/templates/
  lakebus deploy render --check          # are the committed files current?
  lakebus deploy render --values prod.yaml --out /tmp/prod-deploy
"""


def _quoted(value: Any) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is one)."""
    return json.dumps(str(value))


def _yaml(value: Any, indent: int = 0) -> str:
    """``value`` as block YAML, every line after the first indented by ``indent`` spaces."""
    text = yaml.safe_dump(value, sort_keys=False, default_flow_style=False).rstrip("\n")
    return text.replace("\n", "\n" + " " * indent)


def _camel(value: Any) -> Any:
    """Dagster instance keys (``max_concurrent_runs``) in the Helm chart's spelling (``maxConcurrentRuns``);
    the keys of tag values (``applyLimitPerUniqueValue``) stay as they are."""
    if isinstance(value, list):
        return [_camel(v) for v in value]
    if isinstance(value, dict):
        return {(k.split("_")[0] + "".join(p.title() for p in k.split("_")[1:]) if k != "value" else k):
                (_camel(v) if k != "value" else v) for k, v in value.items()}
    return value


def spark_connect_conf(values: DeployValues, target: Target) -> dict[str, str]:
    """The deployment's Spark Connect server: the local stack's server settings and catalog
    (:func:`lakebus_dagster.lake.spark.connect_server_common`, no keys) at the target's addresses."""
    from lakebus_dagster.lake.catalog import LakeEndpoints
    from lakebus_dagster.lake.spark import connect_server_common

    s = target.settings.lake
    # the catalog's scope and token endpoint are no secrets; its credential / token never reach this file
    endpoints = LakeEndpoints(s.catalog_uri, s.warehouse, s.s3_endpoint, s.region, "", "", scope=s.catalog_scope,
                              oauth2_server_uri=s.catalog_oauth2_server_uri)
    return {
        "spark.master": f"local[{values.spark_cores}]",
        "spark.driver.memory": values.spark_driver_memory,
        "spark.connect.grpc.binding.port": str(target.port("LAKEBUS_SPARK_REMOTE")),
        **connect_server_common(endpoints),
    }


def capture_source(values: DeployValues) -> dict[str, Any]:
    """The change-capture source as lakebus declares it (:class:`lakebus_dagster.cdc.capture.CaptureSpec`,
    the demo schema's tables) for ``values.yaml``'s database, as the locked-down (``secured``) profile
    declares it: no exactly-once source transactions and no Kafka signal channel (the ``connect``
    principal's ACLs for them are declared, :mod:`lakebus_dagster.kafka.acls`, but not proven under
    ACLs): ``{"class": …, "tasks_max": …, "config": …}``."""
    from lakebus_dagster.cdc import demo
    from lakebus_dagster.cdc.capture import CaptureSpec

    k8s = values.kubernetes.settings
    spec = CaptureSpec(**values.change_capture, schema=demo.SCHEMA, tables=demo.TABLES, heartbeat_table=demo.HEARTBEAT_TABLE,
                       namespace=f"{k8s.lake.namespace}_cdc", exactly_once=False, signal_bootstrap="",
                       replication_factor=k8s.bus.replication_factor)
    connector = spec.source_spec()
    config = dict(connector.config)
    return {"name": connector.name, "class": connector.connector_class, "tasks_max": int(config.pop("tasks.max")),
            "config": config, "topics": [t.name for t in connector.topics], "slot": spec.slot, "publication": spec.publication,
            "published_tables": list(spec.published_tables), "user": spec.user, "database": spec.database}


def context(values: DeployValues) -> dict[str, Any]:
    """Everything a template may name."""
    from lakebus_dagster.bus.door import LAKEBUS_GUARD_CLASS, STRICT_CONVERTER_CLASS
    from lakebus_dagster.bus.layout import ICEBERG_SINK_CLASS
    from lakebus_dagster.connect.source_offsets import DEBEZIUM_POSTGRES_CLASS

    bucket, logs = values.compose.settings.lake.bucket, values.logs_bucket
    kafka = values.kubernetes.settings.kafka
    return {
        "values": values,
        # the namespace, the images and the Postgres hosts (values.yaml's names:)
        "names": values.names,
        "compose": values.compose,
        "k8s": values.kubernetes,
        "spark_conf": {t.name: spark_connect_conf(values, t) for t in (values.compose, values.kubernetes)},
        "concurrency": instance.concurrency(values.spark_cores),
        "run_monitoring": {**instance.RUN_MONITORING, **values.run_monitoring},
        "sensor_workers": instance.SENSOR_WORKERS,
        "run_retries": instance.RUN_RETRIES,
        "retention": instance.RETENTION,
        # what the local stack's Connect probe waits for (stack/kafka_services.py): the sink and lakebus's door
        # and Debezium's PostgreSQL source, which the image always carries
        "connect_plugins": [c.rsplit(".", 1)[1] for c in (ICEBERG_SINK_CLASS, STRICT_CONVERTER_CLASS, LAKEBUS_GUARD_CLASS,
                                                          DEBEZIUM_POSTGRES_CLASS)],
        "source": "deploy/values.yaml",
        # who may do what (lakebus_dagster/deployment/access.py): Kafka principals, object-store users
        "kafka_observer": access.OBSERVER, "kafka_operations": access.OPERATIONS, "kafka_ops_secret": access.OPERATIONS_SECRET,
        "kafka_users": access.kafka_users(),
        "object_store_users": access.OBJECT_STORE_USERS,
        "minio_root": {"vars": access.ROOT_VARS, "secret": access.ROOT_SECRET},
        "dagster_label": access.DAGSTER_POD_LABEL,
        # Strimzi's cluster CA as a file at LAKEBUS_KAFKA_SSL_CA_LOCATION in the code location and run pods
        # (None: a Kubernetes target without TLS to Kafka)
        "kafka_ca": access.kafka_ca_mount(kafka.ssl_ca_location) if kafka.tls and kafka.ssl_ca_location else None,
        "kafka_ca_secret": access.KAFKA_CA_SECRET,
        "capture": capture_source(values),
        "connect_pods": access.CONNECT_POD_LABELS,
        # the JMX exporter's rules, the local stack's file as it is (Strimzi's metricsConfig reads them from a ConfigMap)
        "jmx_rules": JMX_RULES.read_text(),
        "minio_init": {"compose": access.minio_init_script(values.compose.settings.lake.s3_endpoint, bucket, logs, dollar="$$"),
                       "kubernetes": access.minio_init_script(values.kubernetes.settings.lake.s3_endpoint, bucket, logs)},
    }


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, autoescape=False)
    env.filters.update(q=_quoted, to_yaml=_yaml, camel=_camel)
    return env


def templates() -> list[str]:
    """The templates' paths under deploy/templates/, which are also the rendered files' paths under deploy/."""
    return sorted(p.relative_to(TEMPLATES).as_posix() for p in TEMPLATES.rglob("*") if p.is_file())


def render(values_path: Path = VALUES) -> dict[str, str]:
    """deploy/-relative path -> its text, rendered from ``values_path``."""
    env, ctx = _environment(), context(load_values(values_path))
    return {name: env.get_template(name).render(ctx) for name in templates()}


def write(rendered: dict[str, str], out: Path) -> list[Path]:
    written = []
    for name, text in rendered.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            written.append(path)
    return written


def stale(rendered: dict[str, str], out: Path = DEPLOY) -> list[str]:
    """The rendered files under ``out`` whose text is not what ``rendered`` says."""
    return [name for name, text in rendered.items() if not (out / name).exists() or (out / name).read_text() != text]


def configure(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="deploy_command", metavar="{render}")
    r = sub.add_parser("render", help="write deploy/'s files from deploy/values.yaml", description=DESCRIPTION,
                       epilog=f"examples:\n{EXAMPLES}", formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--values", type=Path, default=VALUES, help="the values file (default: deploy/values.yaml)")
    r.add_argument("--out", type=Path, default=DEPLOY, help="where the files go (default: deploy/)")
    r.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each file that is not current")
    r.set_defaults(func=run, _prog="lakebus deploy render", _parser=r)


def run(args: argparse.Namespace) -> int:
    if not args.values.is_file():
        raise CliError(f"--values {args.values} is not a file")
    rendered = render(args.values)
    if args.check:
        names = stale(rendered, args.out)
        for name in names:
            print(f"{args.out / name} is not what `lakebus deploy render` gives from {args.values}: run it and commit the result")
        return 1 if names else 0
    for path in write(rendered, args.out):
        print(f"wrote {path}")
    return 0
