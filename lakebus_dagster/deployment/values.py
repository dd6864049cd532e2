"""deploy/'s values, from one file (``deploy/values.yaml``) read through the settings the code reads.

Why: the bucket, the region, the catalog URI and the other addresses were written by hand in the
compose file, the Spark configuration, the Kubernetes manifests, the Dagster instance and the Helm
values, and had drifted apart (issue 31). Now ``deploy/values.yaml`` holds each once:

* ``settings:`` the ``LAKEBUS_*`` variables both targets share, as in a lakebus config file
  (:mod:`lakebus_dagster.envvars` names and defaults them; secrets are refused);
* ``targets: {compose: …, kubernetes: …}``: each target's ``LAKEBUS_*`` values of its own (where the
  services are, the topics' replication);
* ``spark_connect:`` the server's cores (also the Dagster pool ``spark``'s limit) and driver memory;
* ``run_monitoring:`` and ``compute_logs:`` of the Dagster instance (its run queue is
  :mod:`lakebus_dagster.deployment.instance`'s, the same as the local stack's);
* ``change_capture:`` the captured PostgreSQL database (``name``, ``host``, ``port``, ``database``,
  ``user``): of the Strimzi ``KafkaConnector`` example (the config is lakebus's own :class:`CaptureSpec`'s)
  and, for a target that sets ``LAKEBUS_POSTGRES: "on"``, its ``LAKEBUS_POSTGRES_HOST`` / ``_PORT`` /
  ``_DB`` / ``_USER`` (:data:`CAPTURE_VARS`; set nowhere else).

Each target's settings are loaded with :func:`lakebus_dagster.settings.load_settings` exactly as a
code location loads its config file, so a value the code would refuse is refused here, in one line.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from lakebus_dagster import config_file, envvars
from lakebus_dagster.envvars import SettingsError
from lakebus_dagster.setting_readers import SettingsReader
from lakebus_dagster.settings import Settings, load_settings

__all__ = ["DEPLOYED", "DeployValues", "Target", "ValuesError", "load_values", "values_document"]

TARGETS = ("compose", "kubernetes")
SECTIONS = ("names", "settings", "targets", "spark_connect", "run_monitoring", "compute_logs", "change_capture", "dagster_ui")
#: dagster_ui: the operators' webserver behind oauth2-proxy (the viewers' one runs --read-only)
UI_KEYS = ("proxy_port", "oidc_issuer_url", "email_domains")
#: names: what every file of deploy/ names the same way (the namespace, each image with its tag, the
#: Postgres hosts); ``{namespace}`` in any string of the values file is the namespace
NAMES_KEYS = ("namespace", "images", "postgres_hosts")
IMAGES = ("dagster", "connect", "connect_strimzi", "spark_connect", "iceberg_rest", "postgres", "minio", "kafka", "oauth2_proxy")
#: compose's one Postgres (Dagster's and the catalog's database); on Kubernetes, Dagster's and the catalog's
POSTGRES_HOSTS = ("compose", "dagster", "catalog")
NAMESPACE_PLACEHOLDER = "{namespace}"
#: every LAKEBUS_* variable a deployment sets: not the local stack's own, not the host + port pairs
#: (each service is named by URL), not the config file's name
DEPLOYED = tuple(
    v.name for v in envvars.VARIABLES
    if not v.meaning.startswith("local stack") and v.name != envvars.CONFIG_VAR and v.name != "LAKEBUS_HOST"
    and not (v.name.endswith("_PORT") and v.name not in ("LAKEBUS_DAGSTER_PORT", "LAKEBUS_POSTGRES_PORT"))
)
#: the captured database's settings, from ``change_capture:`` (the one place values.yaml names that
#: database: the KafkaConnector example's too) for a target that switches capture on (LAKEBUS_POSTGRES=on)
CAPTURE_VARS = {"LAKEBUS_POSTGRES_HOST": "host", "LAKEBUS_POSTGRES_PORT": "port", "LAKEBUS_POSTGRES_DB": "database",
                "LAKEBUS_POSTGRES_USER": "user"}
#: the addresses each target must give (the code's defaults are the local stack's)
ADDRESSES = ("LAKEBUS_KAFKA_BOOTSTRAP", "LAKEBUS_CONNECT_URL", "LAKEBUS_CATALOG_URI", "LAKEBUS_S3_ENDPOINT",
             "LAKEBUS_SPARK_REMOTE")


class ValuesError(SettingsError):
    """deploy/values.yaml is unusable: one line naming the file and the key."""

    def __init__(self, where: str, message: str) -> None:  # noqa: D107 - the message is whole
        self.variable = where
        ValueError.__init__(self, f"{where}: {message}")


@dataclass(frozen=True)
class Target:
    """One target's settings: ``env`` = every deployed ``LAKEBUS_*`` value, defaults written out (what
    compose's ``${VAR:-default}`` overrides start from), ``settings`` = as the code reads them,
    ``configured`` = only what the values file sets for this target and what the code derives from it
    (the warehouse, the security protocol): the Kubernetes ConfigMap's ``LAKEBUS_*`` keys. A variable
    the values leave unset takes the code's default there, so a production ConfigMap never carries a
    setting of a feature it does not run (``LAKEBUS_POSTGRES=off`` and the demo database's name)."""

    name: str
    env: dict[str, str]
    settings: Settings
    configured: dict[str, str]

    def port(self, variable: str) -> int:
        """The port of an address variable's URL (``kafka:9092`` → 9092, ``http://minio:9000`` → 9000)."""
        value = self.env[variable].split(",")[0]
        parts = urlsplit(value if "://" in value else f"tcp://{value}")
        if parts.port is None:
            raise ValuesError(f"targets.{self.name}.{variable}", f"{value!r} names no port; give host:port")
        return parts.port


@dataclass(frozen=True)
class DeployValues:
    """Everything the deploy/ templates are rendered from."""

    path: Path
    compose: Target
    kubernetes: Target
    spark_cores: int
    spark_driver_memory: str
    run_monitoring: dict[str, int]
    logs_bucket: str
    logs_prefix: str
    #: change_capture: name, host, port, database, user (strings and the port)
    change_capture: dict[str, Any]
    #: dagster_ui: the auth proxy in front of the operators' webserver (:data:`UI_KEYS`)
    dagster_ui: dict[str, Any]
    #: names: ``namespace``, ``images`` (:data:`IMAGES` -> ``repository:tag``), ``postgres_hosts`` (:data:`POSTGRES_HOSTS`)
    names: dict[str, Any]

    @property
    def region(self) -> str:
        """Both targets' (one ``settings:`` value; the targets may not set it apart)."""
        return self.compose.settings.lake.region


def load_values(path: Path) -> DeployValues:
    """Read and check ``path`` (see the module's docstring); raises :class:`ValuesError` / :class:`SettingsError`."""
    where = str(path)
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ValuesError(where, f"cannot be read as YAML ({exc})") from None
    unknown = sorted(set(doc) - set(SECTIONS)) if isinstance(doc, dict) else ["(not a mapping)"]
    if unknown:
        raise ValuesError(where, f"unknown section {unknown[0]!r}; the sections are {', '.join(SECTIONS)}")
    names = _names_section(where, doc.get("names") or {})
    doc = _with_namespace(doc, names["namespace"])
    names = _with_namespace(names, names["namespace"])
    shared = _settings_section(where, doc.get("settings") or {})
    targets = doc.get("targets") or {}
    if sorted(targets) != sorted(TARGETS):
        raise ValuesError(where, f"targets must be exactly {', '.join(TARGETS)}, got {sorted(targets)}")
    capture = _capture_section(where, doc.get("change_capture") or {})
    loaded = {name: _target(where, name, shared, targets[name] or {}, capture) for name in TARGETS}
    for field, variable in (("bucket", "LAKEBUS_BUCKET"), ("region", "LAKEBUS_S3_REGION")):
        if getattr(loaded["compose"].settings.lake, field) != getattr(loaded["kubernetes"].settings.lake, field):
            raise ValuesError(where, f"the targets set {variable} apart; set it once, under settings:")
    spark = doc.get("spark_connect") or {}
    monitoring = {**_ints(where, "run_monitoring", doc.get("run_monitoring") or {})}
    logs = doc.get("compute_logs") or {}
    bucket = str(logs.get("bucket", ""))
    if not bucket or not bucket.replace("-", "").replace(".", "").isalnum() or bucket == loaded["compose"].settings.lake.bucket:
        raise ValuesError(where, f"compute_logs.bucket={bucket!r} must be an S3 bucket name other than the warehouse's")
    return DeployValues(
        path=path, compose=loaded["compose"], kubernetes=loaded["kubernetes"],
        spark_cores=_ints(where, "spark_connect", {"cores": spark.get("cores")})["cores"],
        spark_driver_memory=str(spark.get("driver_memory") or "3g"),
        run_monitoring=monitoring, logs_bucket=bucket, logs_prefix=str(logs.get("prefix") or "dagster").strip("/"),
        change_capture=capture, dagster_ui=_ui_section(where, doc.get("dagster_ui") or {}), names=names,
    )


def values_document(path: Path) -> dict[str, Any]:
    """``path``'s YAML as written, but with ``{namespace}`` replaced by ``names.namespace`` (unchecked)."""
    doc = yaml.safe_load(path.read_text()) or {}
    return _with_namespace(doc, str((doc.get("names") or {}).get("namespace", NAMESPACE_PLACEHOLDER)))


def _names_section(where: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """The namespace (a DNS label), every image at a pinned tag, the Postgres hosts."""
    if sorted(body) != sorted(NAMES_KEYS):
        raise ValuesError(where, f"names must give exactly {', '.join(NAMES_KEYS)}, got {sorted(body)}")
    namespace = str(body["namespace"])
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", namespace):
        raise ValuesError(where, f"names.namespace={namespace!r} is not a Kubernetes namespace name")
    images = body["images"] or {}
    if sorted(images) != sorted(IMAGES):
        raise ValuesError(where, f"names.images must give exactly {', '.join(IMAGES)}, got {sorted(images)}")
    for key, image in images.items():
        tag = str(image).rsplit("/", 1)[-1].partition(":")[2]
        if not tag or tag == "latest":
            raise ValuesError(where, f"names.images.{key}={image!r} must name a pinned tag")
    hosts = body["postgres_hosts"] or {}
    if sorted(hosts) != sorted(POSTGRES_HOSTS) or not all(isinstance(h, str) and h for h in hosts.values()):
        raise ValuesError(where, f"names.postgres_hosts must give exactly {', '.join(POSTGRES_HOSTS)}, got {sorted(hosts)}")
    return {"namespace": namespace, "images": {k: str(v) for k, v in images.items()}, "postgres_hosts": dict(hosts)}


def _with_namespace(node: Any, namespace: str) -> Any:
    """``node`` with every ``{namespace}`` in its strings replaced by the namespace."""
    if isinstance(node, str):
        return node.replace(NAMESPACE_PLACEHOLDER, namespace)
    if isinstance(node, dict):
        return {k: _with_namespace(v, namespace) for k, v in node.items()}
    if isinstance(node, list):
        return [_with_namespace(v, namespace) for v in node]
    return node


def _ui_section(where: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """The operators' UI: oauth2-proxy's port, the OIDC issuer and the e-mail domains it admits (its
    image is ``names.images.oauth2_proxy``; its client and cookie secrets come from the environment)."""
    if sorted(body) != sorted(UI_KEYS):
        raise ValuesError(where, f"dagster_ui must give exactly {', '.join(UI_KEYS)}, got {sorted(body)}")
    if not str(body["oidc_issuer_url"]).startswith("https://"):
        raise ValuesError(where, "dagster_ui.oidc_issuer_url must be an https:// URL")
    domains = body["email_domains"]
    if not isinstance(domains, list) or not domains or not all(isinstance(d, str) and d for d in domains):
        raise ValuesError(where, "dagster_ui.email_domains must be a non-empty list of domains")
    return {"proxy_port": _ints(where, "dagster_ui", {"proxy_port": body["proxy_port"]})["proxy_port"],
            "oidc_issuer_url": str(body["oidc_issuer_url"]), "email_domains": list(domains)}


def _capture_section(where: str, body: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("name", "host", "port", "database", "user")
    if sorted(body) != sorted(keys):
        raise ValuesError(where, f"change_capture must give exactly {', '.join(keys)}, got {sorted(body)}")
    return {k: body[k] if k == "port" else str(body[k]) for k in keys}


def _ints(where: str, section: str, body: Mapping[str, Any]) -> dict[str, int]:
    out = {}
    for key, value in body.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValuesError(where, f"{section}.{key}={value!r} must be an integer >= 1")
        out[key] = value
    return out


def _settings_section(where: str, section: Mapping[str, Any]) -> dict[str, str]:
    problems: list[str] = []
    settings = config_file.settings_section(where, dict(section), problems)
    if problems:
        raise ValuesError(*problems[0].split(": ", 1))
    outside = sorted(set(settings) - set(DEPLOYED))
    if outside:
        raise ValuesError(where, f"{outside[0]} is not a deployment setting (the local stack's own, or a host/port pair)")
    return settings


def _target(where: str, name: str, shared: dict[str, str], body: Mapping[str, Any], capture: Mapping[str, Any]) -> Target:
    own = _settings_section(f"{where}: targets.{name}", body)
    missing = [v for v in ADDRESSES if not own.get(v)]
    if missing:
        raise ValuesError(where, f"targets.{name}.{missing[0]} is not set: every target names where its services are")
    given = {**shared, **own}
    named = sorted(set(CAPTURE_VARS) & set(given))
    if named:
        raise ValuesError(where, f"{named[0]} is set under settings/targets; the captured database is change_capture's "
                          f"({CAPTURE_VARS[named[0]]}): set it there")
    # a target capturing a database gets change_capture's as its LAKEBUS_POSTGRES_* settings
    captured = ({v: str(capture[k]) for v, k in CAPTURE_VARS.items()} if str(given.get("LAKEBUS_POSTGRES", "off")) == "on"
                else {})
    if name == "compose" and ".svc" in captured.get("LAKEBUS_POSTGRES_HOST", ""):
        raise ValuesError(where, f"targets.compose captures {captured['LAKEBUS_POSTGRES_HOST']!r}, a Kubernetes name compose "
                          "cannot resolve; leave LAKEBUS_POSTGRES off there and set LAKEBUS_POSTGRES_HOST in compose's environment")
    given.update(captured)
    settings = settings_from(given)
    if name == "kubernetes" and settings.kafka.tls and not (settings.kafka.ssl_ca_location or "").startswith("/"):
        # Strimzi's brokers present certificates of its own cluster CA, which no system trusts: the pods
        # mount its Secret at this path (access.kafka_ca_mount)
        raise ValuesError(where, f"targets.kubernetes sets LAKEBUS_KAFKA_SECURITY_PROTOCOL={settings.kafka.security_protocol} "
                          f"but LAKEBUS_KAFKA_SSL_CA_LOCATION={settings.kafka.ssl_ca_location!r}: give the absolute path the "
                          "Dagster pods mount Strimzi's cluster CA at")
    # what the processes get: every deployed non-secret variable, its default written out, and the
    # ones the code computes when unset (the warehouse from the bucket, the protocol) as it computes them
    env = {v: given.get(v) or envvars.BY_NAME[v].default for v in DEPLOYED if not envvars.BY_NAME[v].secret}
    derived = {"LAKEBUS_WAREHOUSE": settings.lake.warehouse, "LAKEBUS_KAFKA_SECURITY_PROTOCOL": settings.kafka.security_protocol,
               **captured}
    env.update(derived)
    configured = {v: env[v] for v in env if v in given or v in derived}
    return Target(name, env, settings, configured)


def settings_from(env: Mapping[str, str]) -> Settings:
    """:func:`load_settings` over ``env`` alone, read the way a code location reads its config file
    (this process's environment and any ./lakebus.yaml are not read: the reader's environment names
    only the file)."""
    with tempfile.TemporaryDirectory(prefix="lakebus-values-") as tmp:
        path = Path(tmp) / "lakebus.yaml"
        path.write_text(yaml.safe_dump({"settings": dict(env)}))
        return load_settings(SettingsReader(environ={envvars.CONFIG_VAR: str(path)}))
