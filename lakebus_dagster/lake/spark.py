"""Spark over Iceberg's REST catalog and S3FileIO: the catalog settings, and the two ways a run gets
a session.

* **Spark Connect** (the default): one long-lived server holds the driver, the executors and the
  catalog; a run attaches with ``sc://host:port`` in about a second and gets a session of its own
  (temp views and SQL confs are per session on the server). :func:`connect_server_common` is the
  server's configuration (deploy/spark/spark-connect.conf) — the catalog is configured once, server-side.
* **Embedded** (``LAKEBUS_SPARK_REMOTE=local``): a Spark application inside the step's process, as
  before Spark Connect existed; tens of seconds of JVM start-up per step.

The Iceberg runtime and the AWS SDK bundle are handed over through ``spark.jars`` from the Maven
cache, so Spark never resolves anything through Ivy at run time.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from lakebus_dagster.lake.catalog import LakeEndpoints, catalog_auth_props
from lakebus_dagster.settings import AWS_SDK_ENV

SPARK_CATALOG = "lake"
#: what Spark hides in its UI and logs: its default, and the catalog's OAuth2 credential
SPARK_REDACTION_REGEX = "(?i)secret|password|token|access[.]?key|credential"
#: the server class shipped in pyspark's own jars/ (spark-connect_2.13-<version>.jar)
CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def spark_jars(jars_dir: Path) -> list[str]:
    jars = sorted(str(p) for p in (jars_dir / "spark").glob("*.jar"))
    if not jars:
        raise FileNotFoundError(f"no Iceberg Spark jars under {jars_dir / 'spark'}; run `make stack-up` (it fetches them)")
    return jars


def catalog_conf(ep: LakeEndpoints, *, catalog: str = SPARK_CATALOG, with_keys: bool = True) -> dict[str, str]:
    """The Iceberg catalog ``catalog`` over the REST catalog + S3FileIO, and the session defaults.

    ``with_keys=False`` leaves the S3 key pair out: S3FileIO then takes it from the AWS SDK's
    default chain (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` in the driver's and executors'
    environment), so a server's configuration file holds no secret. It leaves the catalog's
    credential / token out too (Iceberg's SparkCatalog reads them only from its options: see
    :func:`catalog_secret_conf`); the scope and the token endpoint are no secrets and stay.
    """
    prefix = f"spark.sql.catalog.{catalog}"
    conf = {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.defaultCatalog": catalog,
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "rest",
        f"{prefix}.uri": ep.catalog_uri,
        f"{prefix}.warehouse": ep.warehouse,
        f"{prefix}.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        f"{prefix}.s3.endpoint": ep.s3_endpoint,
        f"{prefix}.s3.path-style-access": "true",
        f"{prefix}.client.region": ep.region,
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.session.timeZone": "UTC",
        # Spark's default redaction (secret|password|token|access key) misses the catalog's `credential`:
        # without this the UI's Environment tab and the event log would show it
        "spark.redaction.regex": SPARK_REDACTION_REGEX,
        # executors on a cluster: AWS SDK checksums only where required (S3-compatible stores)
        **{f"spark.executorEnv.{k}": v for k, v in AWS_SDK_ENV.items()},
    }
    conf |= {f"{prefix}.{key}": value for key, value in catalog_auth_props(ep, with_secrets=False).items()}
    if with_keys:
        conf[f"{prefix}.s3.access-key-id"] = ep.access_key
        conf[f"{prefix}.s3.secret-access-key"] = ep.secret_key
        conf |= catalog_secret_conf(ep, catalog=catalog)
    return conf


def catalog_secret_conf(ep: LakeEndpoints, *, catalog: str = SPARK_CATALOG) -> dict[str, str]:
    """The catalog's credential or token as Spark catalog options (``spark.sql.catalog.<name>.credential``
    / ``.token``), when set. Iceberg's SparkCatalog has no environment fallback for them, so a Spark
    Connect server gets them in its configuration: locally a file of mode 0600 (the stack writes it),
    in deploy/ appended from the Secret's environment variable when the container starts (never in
    the ConfigMap)."""
    secrets = {key: value for key, value in catalog_auth_props(ep).items() if key in ("credential", "token")}
    return {f"spark.sql.catalog.{catalog}.{key}": value for key, value in secrets.items()}


def spark_conf(
    ep: LakeEndpoints,
    *,
    master: str,
    driver_memory: str,
    jars: list[str],
    catalog: str = SPARK_CATALOG,
) -> dict[str, str]:
    """An embedded session's whole configuration (its driver runs in the calling process)."""
    return {
        "spark.master": master,
        "spark.driver.memory": driver_memory,
        "spark.jars": ",".join(jars),
        "spark.ui.enabled": "false",
        **catalog_conf(ep, catalog=catalog),
    }


def connect_server_common(ep: LakeEndpoints) -> dict[str, str]:
    """What every Spark Connect server of lakebus's runs with: ``lakebus deploy render`` writes
    deploy/spark/spark-connect.conf from it, and the local stack's server runs that file
    (``stack/spark_services.py``, its hosts, ports and paths substituted). The catalog without keys.

    Why these values:
    * ``spark.scheduler.mode=FAIR`` — two runs attached at once (the hourly schedule and a
      backfill) share the executors job by job instead of the second waiting for the first.
    * ``spark.connect.session.manager.defaultSessionTimeout`` — a run that dies without releasing
      its session (kill -9 of the step process) has its temp views and cached plans dropped after
      10 minutes, not the default hour.
    * ``cache-enabled=false`` on the catalog — every session on the server is long-lived from its
      user's view (a notebook, a test) while other sessions commit to the same tables; Iceberg's
      per-session table cache (30 s) would show such a reader a table as it was before another
      run's MERGE. Loading a table's metadata per query costs milliseconds at this scale.
    """
    return {
        "spark.app.name": "lakebus-spark-connect",
        "spark.scheduler.mode": "FAIR",
        "spark.connect.session.manager.defaultSessionTimeout": "10m",
        **catalog_conf(ep, with_keys=False),
        f"spark.sql.catalog.{SPARK_CATALOG}.cache-enabled": "false",
    }


def prepare_driver_env() -> None:
    """The local driver JVM inherits this process's environment: set the AWS SDK switches there."""
    for key, value in AWS_SDK_ENV.items():
        os.environ.setdefault(key, value)


class SparkConnectUnreachable(ConnectionError):
    """Nothing accepts connections at the Spark Connect URL (one line: the URL and what to do)."""

    def __init__(self, remote: str, reason: str) -> None:
        self.remote, self.reason = remote, reason
        super().__init__(
            f"Spark Connect at {remote} is unreachable ({reason}): start it with `lakebus stack up` (local stack), "
            "or set LAKEBUS_SPARK_REMOTE to your Spark Connect server (`local` for an embedded session)")


def connect_address(remote: str) -> tuple[str, int]:
    """``sc://host:port/;params`` -> (host, port)."""
    parts = urlsplit(remote.replace("sc://", "http://", 1))
    if not parts.hostname or parts.port is None:
        raise ValueError(f"{remote!r} is not a Spark Connect URL (sc://host:port)")
    return parts.hostname, parts.port


def probe_connect(remote: str, timeout_s: float = 3.0) -> None:
    """Fail in seconds, naming the endpoint, when no Spark Connect server listens at ``remote``.

    The gRPC client itself retries an unreachable server with backoff for minutes before it gives
    up; a plain TCP connect answers at once ("connection refused") or within ``timeout_s``.
    """
    host, port = connect_address(remote)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return
    except OSError as exc:
        raise SparkConnectUnreachable(remote, exc.strerror or type(exc).__name__) from None


#: how long a step waits for a Spark Connect server that does not answer (a server restart: ~12 s
#: on the local stack, longer on busy cores) before the step fails and the run's retries take over
SPARK_CONNECT_WAIT_S = 60.0


def wait_for_connect(remote: str, wait_s: float, timeout_s: float = 3.0,
                     progress: Callable[[str], None] | None = None, *, every_s: float = 2.0,
                     clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
    """:func:`probe_connect` until it answers or ``wait_s`` passed; then the last refusal is raised.

    ``progress`` hears one line when the wait starts and one about every 10 s, each naming the
    endpoint and the time left, so a step that waits says why in its log."""
    deadline, told = clock() + wait_s, None
    while True:
        try:
            probe_connect(remote, timeout_s)
            return
        except SparkConnectUnreachable as exc:
            now = clock()
            if now + every_s > deadline:
                raise
            if progress is not None and (told is None or now - told >= 10.0):
                progress(f"Spark Connect at {exc.remote} is unreachable ({exc.reason}); "
                         f"trying again for {deadline - now:.0f} more s")
                told = now
        sleep(every_s)


def attach(remote: str, conf: dict[str, str] | None = None, *, timeout_s: float = 3.0, probe: bool = True):
    """A new session of its own on the Spark Connect server at ``remote`` (``create``, never a
    session cached in this process: a server restarted since then would have forgotten it).
    ``probe=False`` when the caller has just probed (the resource does at init)."""
    from pyspark.sql import SparkSession

    if probe:
        probe_connect(remote, timeout_s)
    builder = SparkSession.builder.remote(remote)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.create()
    session.client.set_retry_policies([bounded_retry_policy()])
    return session


def bounded_retry_policy():
    """The gRPC retry policy of a step's session: a blip is retried, a dead server fails the step in
    about half a minute.

    The client's default policy is built to tolerate at least ten minutes of an unreachable server
    (15 retries, backoff up to 60 s). A step that was mid-query when the server went away then hung
    for those ten minutes, holding the lakehouse concurrency slot, so every scheduled DWS run queued
    behind it. Retrying longer buys nothing here: a restarted server has forgotten the session, and
    the run's own retry (``dagster/max_retries``) or the gap-fill sensor rebuilds the partition.
    Backoff 50 ms x4 capped at 5 s: 50 ms, 0.2, 0.8, 3.2, then 5 s five times, ~29 s plus jitter.
    """
    from pyspark.sql.connect.client.retries import DefaultPolicy

    return DefaultPolicy(max_retries=9, initial_backoff=50, backoff_multiplier=4.0, max_backoff=5000)
