"""Spark configuration for Iceberg over the REST catalog and S3FileIO, with jars as local files.

The Iceberg runtime and the AWS SDK bundle are handed over through ``spark.jars`` from the Maven
cache, so a Spark session never resolves anything through Ivy at run time. The same settings work
for ``local[*]`` and a cluster master: only ``spark.master`` and the resource sizes change.
"""

from __future__ import annotations

import os
from pathlib import Path

from lakebus_dagster.lake.catalog import LakeEndpoints
from lakebus_dagster.settings import AWS_SDK_ENV

SPARK_CATALOG = "lake"


def spark_jars(jars_dir: Path) -> list[str]:
    jars = sorted(str(p) for p in (jars_dir / "spark").glob("*.jar"))
    if not jars:
        raise FileNotFoundError(f"no Iceberg Spark jars under {jars_dir / 'spark'}; run `make stack-up` (it fetches them)")
    return jars


def spark_conf(
    ep: LakeEndpoints,
    *,
    master: str,
    driver_memory: str,
    jars: list[str],
    catalog: str = SPARK_CATALOG,
) -> dict[str, str]:
    prefix = f"spark.sql.catalog.{catalog}"
    return {
        "spark.master": master,
        "spark.driver.memory": driver_memory,
        "spark.jars": ",".join(jars),
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.defaultCatalog": catalog,
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "rest",
        f"{prefix}.uri": ep.catalog_uri,
        f"{prefix}.warehouse": ep.warehouse,
        f"{prefix}.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        f"{prefix}.s3.endpoint": ep.s3_endpoint,
        f"{prefix}.s3.path-style-access": "true",
        f"{prefix}.s3.access-key-id": ep.access_key,
        f"{prefix}.s3.secret-access-key": ep.secret_key,
        f"{prefix}.client.region": ep.region,
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        # executors on a cluster: AWS SDK checksums only where required (S3-compatible stores)
        **{f"spark.executorEnv.{k}": v for k, v in AWS_SDK_ENV.items()},
    }


def prepare_driver_env() -> None:
    """The local driver JVM inherits this process's environment: set the AWS SDK switches there."""
    for key, value in AWS_SDK_ENV.items():
        os.environ.setdefault(key, value)
