"""The storage side of the local stack as service specs: S3Proxy (the object store), the Iceberg
REST catalog (the fixture server, JDBC/SQLite in a file), which writes table metadata to S3, and —
in the ``secured`` profile only — the catalog gate (:mod:`lakebus_dagster.stack.catalog_gate`), an
OAuth2 front on the catalog's port with the fixture moved behind it to the next port."""

from __future__ import annotations

import os

from lakebus_dagster.settings import AWS_SDK_ENV
from lakebus_dagster.secret_env import CATALOG_CREDENTIAL_VAR
from lakebus_dagster.stack.errors import StackError
from lakebus_dagster.stack.service import http_ok, properties, write_file
from lakebus_dagster.stack.spec import Node, ServiceSpec

# S3Proxy ships no logback.xml, and logback's default is DEBUG for everything: gigabytes of Jetty
# selector lines per hour. INFO for S3Proxy itself, WARN for the shaded Jetty.
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


# -- S3Proxy -------------------------------------------------------------------------------------
def _s3proxy_conf(node: Node):
    return node.settings.run_dir / "s3proxy.conf"


def _s3proxy_logback(node: Node):
    return node.settings.run_dir / "s3proxy-logback.xml"


def _prepare_s3(node: Node) -> None:
    settings = node.settings
    access_key, secret_key = node.credentials
    s3_dir = settings.data_dir / "s3"
    s3_dir.mkdir(parents=True, exist_ok=True)
    write_file(_s3proxy_logback(node), _S3PROXY_LOGBACK)
    # The key pair is in this file because S3Proxy reads it nowhere else; mode 0600, ignored by git.
    write_file(
        _s3proxy_conf(node),
        properties(
            {
                "s3proxy.endpoint": settings.lake.s3_endpoint,
                "s3proxy.authorization": "aws-v2-or-v4",
                "s3proxy.identity": access_key,
                "s3proxy.credential": secret_key,
                # Iceberg's S3FileIO deletes in bulk (DeleteObjects) with SDK checksum headers that
                # S3Proxy 3.0 answers with 501 "implies functionality that is not implemented":
                # without this, the catalog's old metadata.json files (write.metadata.delete-after-
                # commit) and the files expire_snapshots / remove_orphan_files drop were never
                # deleted on the local stack (measured: 70 commits left 71 files, 51 with it)
                "s3proxy.ignore-unknown-headers": "true",
                "jclouds.provider": "filesystem-nio2",
                "jclouds.filesystem.basedir": s3_dir,
            }
        ),
        mode=0o600,
    )


def _s3_healthy(node: Node) -> bool:
    from lakebus_dagster.stack.s3 import s3_client

    s3_client(node.settings).list_buckets()
    return True


def _create_bucket(node: Node) -> str | None:
    """The lake's bucket, created once S3 first answers (``stack up`` after a fresh start)."""
    from lakebus_dagster.stack.s3 import ensure_bucket

    bucket = node.settings.lake.bucket
    return f"created bucket {bucket!r}" if ensure_bucket(node.settings, bucket) else None


S3 = ServiceSpec(
    name="s3",
    main_class="org.gaul.s3proxy.Main",
    classpath_dirs=("s3proxy",),
    port=lambda node: node.settings.ports.s3,
    heap=lambda node: node.settings.heaps.s3,
    args=lambda node: ["--properties", str(_s3proxy_conf(node))],
    jvm_props=lambda node: [f"-Dlogback.configurationFile={_s3proxy_logback(node)}"],
    prepare=_prepare_s3,
    probe=_s3_healthy,
    probe_text=lambda node: "S3 ListBuckets answers",
    timeout=60,
    after_start=_create_bucket,
)


# -- Iceberg REST catalog ------------------------------------------------------------------------
def gated(profile: str) -> bool:
    """Whether the profile puts the catalog gate in front of the catalog (the secured one)."""
    return profile == "secured"


def fixture_port(node: Node) -> int:
    """The fixture's own port: the catalog's port, or (gated) the next one, which only the gate calls."""
    return node.settings.ports.rest_catalog + (1 if gated(node.settings.profile) else 0)


def _rest_env(node: Node) -> dict[str, str]:
    settings = node.settings
    access_key, secret_key = node.credentials
    return {
        "CATALOG_REST_PORT": str(fixture_port(node)),
        "CATALOG_WAREHOUSE": settings.lake.warehouse,
        "CATALOG_URI": f"jdbc:sqlite:{settings.data_dir / 'catalog' / 'catalog.db'}",
        "CATALOG_JDBC_USER": "lakebus",
        "CATALOG_JDBC_PASSWORD": "lakebus",
        "CATALOG_IO__IMPL": "org.apache.iceberg.aws.s3.S3FileIO",
        "CATALOG_S3_ENDPOINT": settings.lake.s3_endpoint,
        "CATALOG_S3_PATH__STYLE__ACCESS": "true",
        "CATALOG_CLIENT_REGION": settings.lake.region,
        "AWS_REGION": settings.lake.region,
        "AWS_ACCESS_KEY_ID": access_key,
        "AWS_SECRET_ACCESS_KEY": secret_key,
        **AWS_SDK_ENV,
    }


def _prepare_rest(node: Node) -> None:
    (node.settings.data_dir / "catalog").mkdir(parents=True, exist_ok=True)


REST_CATALOG = ServiceSpec(
    name="rest-catalog",
    main_class="org.apache.iceberg.rest.RESTCatalogServer",
    classpath_dirs=("rest-catalog",),
    depends_on=("s3",),  # it writes table metadata to S3
    port=fixture_port,
    heap=lambda node: node.settings.heaps.rest_catalog,
    jvm_props=lambda node: ["-Dorg.slf4j.simpleLogger.defaultLogLevel=info"],
    env=_rest_env,
    prepare=_prepare_rest,
    probe=lambda node: http_ok(f"http://{node.settings.host}:{fixture_port(node)}/v1/config"),
    probe_text=lambda node: f"GET /v1/config answers 200 on :{fixture_port(node)}",
    timeout=90,
)


# -- the catalog gate (secured profile) ----------------------------------------------------------
def _gate_credential() -> str:
    credential = os.environ.get(CATALOG_CREDENTIAL_VAR, "")
    if not credential:
        raise StackError(f"secured profile: {CATALOG_CREDENTIAL_VAR} is not set (it is generated into secrets.env by `stack up`)")
    return credential


def _gate_args(node: Node) -> list[str]:
    settings = node.settings
    return ["--host", settings.host, "--port", str(settings.ports.rest_catalog),
            "--upstream", f"http://{settings.host}:{fixture_port(node)}", "--scope", settings.lake.catalog_scope or "catalog"]


def _gate_healthy(node: Node) -> bool:
    """The gate answers, and the fixture behind it does (its health path needs no credential: ``status``
    with a wrong LAKEBUS_CATALOG_CREDENTIAL still shows the gate up, and the clients' errors say why)."""
    from lakebus_dagster.stack.catalog_gate import HEALTH_PATH

    return http_ok(f"http://{node.settings.host}:{node.settings.ports.rest_catalog}{HEALTH_PATH}")


CATALOG_GATE = ServiceSpec(
    name="catalog-gate",
    main_class="lakebus_dagster.stack.catalog_gate",
    launcher="python",
    depends_on=("rest-catalog",),
    replicas=lambda profile: 1 if gated(profile) else 0,
    port=lambda node: node.settings.ports.rest_catalog,
    heap=lambda node: "",
    args=_gate_args,
    env=lambda node: {CATALOG_CREDENTIAL_VAR: _gate_credential()},
    probe=_gate_healthy,
    probe_text=lambda node: "its health path answers 200 (the catalog behind it answers)",
    timeout=30,
)
