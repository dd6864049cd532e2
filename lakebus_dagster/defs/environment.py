"""The one environment helper: every resource of the code location, wired to the settings.

Why its own module and not ``resources.py``: it assembles every domain's resources (change capture,
the connector fleet, the clock) beside the shared ones, so it sits above the domains; the shared
resources (``resources.py``) sit below them, and no domain imports this module. The definitions
(:mod:`lakebus_dagster.definitions`), the CLI and the tests build their resources here.
"""

from __future__ import annotations

import os
from typing import Any

import dagster as dg

from lakebus_dagster.defs.alerts import AlertResource
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.clock import CLOCK_KEY, ClockResource
from lakebus_dagster.defs.connector_fleet.resources import ConnectorSpecsResource, WorkerRestartResource
from lakebus_dagster.defs.kafka_roles import OPERATIONS_KEY
from lakebus_dagster.defs.resources import (BusLayoutResource, ConnectResource, IcebergCatalogResource, KafkaResource,
                                            ObjectStoreResource)
from lakebus_dagster.defs.spark import LakeSparkResource
from lakebus_dagster.lake.jars import jars_dir
from lakebus_dagster.secret_env import (ALERT_WEBHOOK_URL_VAR, CATALOG_CREDENTIAL_VAR, CATALOG_TOKEN_VAR, CONNECT_PASSWORD_VAR,
                                        KAFKA_OPS_PASSWORD_VAR, KAFKA_PASSWORD_VAR, S3_ACCESS_KEY_VAR, S3_SECRET_KEY_VAR,
                                        catalog_secrets, local_secrets)
from lakebus_dagster.settings import Settings, load_settings


def _secret(name: str, local: dict[str, str]) -> str | dg.EnvVar:
    """A secret field: the local stack's generated value when the environment does not set it (``local``,
    :func:`~lakebus_dagster.secret_env.local_secrets`), else ``dg.EnvVar`` (the deployment's secret store)."""
    return local[name] if name in local else dg.EnvVar(name)


def _catalog_auth(settings: Settings, local: dict[str, str]) -> dict[str, Any]:
    """The catalog's credential or token (only the one set: checked, never read into the definitions
    but from the local stack's file), and its scope and token endpoint."""
    credential, token = catalog_secrets({**os.environ, **local})
    return {
        **({"catalog_credential": _secret(CATALOG_CREDENTIAL_VAR, local)} if credential else {}),
        **({"catalog_token": _secret(CATALOG_TOKEN_VAR, local)} if token else {}),
        **({"catalog_scope": settings.lake.catalog_scope} if settings.lake.catalog_scope else {}),
        **({"catalog_oauth2_server_uri": settings.lake.catalog_oauth2_server_uri} if settings.lake.catalog_oauth2_server_uri else {}),
    }


def _kafka(settings: Settings, local: dict[str, str], *, operations: bool) -> KafkaResource:
    """The observer's client, or the operations principal's (:mod:`lakebus_dagster.defs.kafka_roles`)."""
    kafka, sasl = settings.kafka, {}
    if kafka.security_protocol.startswith("SASL"):
        ops = operations and kafka.ops_username is not None
        sasl = dict(sasl_mechanism=kafka.sasl_mechanism, sasl_username=kafka.ops_username if ops else kafka.sasl_username,
                    sasl_password=_secret(KAFKA_OPS_PASSWORD_VAR if ops else KAFKA_PASSWORD_VAR, local))
    return KafkaResource(bootstrap_servers=kafka.bootstrap_servers, security_protocol=kafka.security_protocol, ssl_ca_location=kafka.ssl_ca_location if kafka.tls else None, **sasl)


def build_resources(settings: Settings | None = None) -> dict[str, dg.ConfigurableResource]:
    """The one environment helper: every resource, wired to the settings (local stack by default).

    Secrets are ``EnvVar``s (the secret store's); one the environment does not set is the local stack's
    generated value (:func:`~lakebus_dagster.secret_env.local_secrets`). No environment variable is written."""
    settings = settings or load_settings()
    local = local_secrets(settings.secrets_file)
    access, secret = _secret(S3_ACCESS_KEY_VAR, local), _secret(S3_SECRET_KEY_VAR, local)
    lake = dict(catalog_uri=settings.lake.catalog_uri, warehouse=settings.lake.warehouse, s3_endpoint=settings.lake.s3_endpoint,
                region=settings.lake.region, access_key_id=access, secret_access_key=secret, **_catalog_auth(settings, local))
    return {
        # no values from the settings here: the resource reads them when a run uses it, so run config
        # that names one field (the Launchpad replaces a resource's whole configuration) keeps the others
        "layout": BusLayoutResource(),
        # the observer (sensors, ordinary runs) and the operations principal (only the jobs that change the bus)
        "kafka": _kafka(settings, local, operations=False),
        OPERATIONS_KEY: _kafka(settings, local, operations=True),
        "connect": ConnectResource(
            url=",".join(settings.connect.urls),
            **(dict(username=settings.connect.username, password=_secret(CONNECT_PASSWORD_VAR, local))
               if settings.connect.username else {}),
            **({"ca_location": settings.connect.ca_location} if settings.connect.ca_location else {}),
        ),
        "object_store": ObjectStoreResource(
            endpoint_url=settings.lake.s3_endpoint, region=settings.lake.region, access_key_id=access, secret_access_key=secret
        ),
        "iceberg": IcebergCatalogResource(
            **lake, connect_catalog_uri=settings.connect.catalog_uri, connect_s3_endpoint=settings.connect.s3_endpoint
        ),
        "alerts": AlertResource(
            sink=settings.alerts.sink,
            webhook_url=_secret(ALERT_WEBHOOK_URL_VAR, local) if settings.alerts.sink == "webhook" else None,
            body_format=settings.alerts.body_format,
        ),
        "connector_specs": ConnectorSpecsResource(file_demo_dir=str(settings.state_dir / "file-demo")),
        "worker_restart": WorkerRestartResource.from_settings(settings),
        "capture": ChangeCaptureResource.from_settings(settings), CLOCK_KEY: ClockResource(),
        "spark": LakeSparkResource(
            **lake,
            remote=settings.spark.remote, connect_wait_s=float(settings.spark.connect_wait_s),
            master=settings.spark.master,
            driver_memory=settings.spark.driver_memory,
            # only an embedded session needs local jars; locating them hashes infra/maven
            jars_dir=None if settings.spark.remote else str(jars_dir(settings)),
        ),
    }
