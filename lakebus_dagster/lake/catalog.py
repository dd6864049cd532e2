"""The Iceberg REST catalog over S3 (the same catalog the sink commits to): pyiceberg access, and
the invalidation of a Spark session's cached table metadata."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog

from lakebus_dagster.settings import Settings, s3_credentials


@dataclass(frozen=True)
class LakeEndpoints:
    """Where the catalog and its object store are, and the key pair to read data files with."""

    catalog_uri: str
    warehouse: str
    s3_endpoint: str
    region: str
    access_key: str
    secret_key: str

    @classmethod
    def local(cls, settings: Settings) -> LakeEndpoints:
        access, secret = s3_credentials()
        return cls(settings.catalog_uri, settings.warehouse, settings.s3_endpoint, settings.region, access, secret)


def open_catalog(ep: LakeEndpoints, name: str = "lakebus") -> Catalog:
    # The REST fixture's /v1/config returns no storage settings, so the client brings its own.
    return RestCatalog(
        name,
        uri=ep.catalog_uri,
        warehouse=ep.warehouse,
        **{
            "s3.endpoint": ep.s3_endpoint,
            "s3.region": ep.region,
            "s3.access-key-id": ep.access_key,
            "s3.secret-access-key": ep.secret_key,
            "s3.force-virtual-addressing": "false",
        },
    )


def load_catalog(settings: Settings, name: str = "lakebus") -> Catalog:
    """The local stack's catalog (tests, CLI)."""
    return open_catalog(LakeEndpoints.local(settings), name)


def invalidate_cached_tables(spark: Any, *tables: str) -> None:
    """Forget ``spark``'s cached metadata of ``tables`` so the next read sees their latest snapshot.

    Iceberg's Spark catalog caches loaded tables (``cache-enabled``, 30 s by default): without this,
    a long-lived session would read an ODS table as it was before the sink's latest commits.
    Tables that do not exist are skipped.
    """
    for table in tables:
        if spark.catalog.tableExists(table):
            spark.catalog.refreshTable(table)


def committed_rows(catalog: Catalog, *tables: str) -> int:
    """Rows in the current snapshots of ``tables``, from their summaries (no data file read); a table
    the sink has not created yet counts 0. Cheap enough to poll every second."""
    total = 0
    for name in tables:
        if not catalog.table_exists(name):
            continue
        snapshot = catalog.load_table(name).current_snapshot()
        if snapshot is not None and snapshot.summary is not None:
            total += int(snapshot.summary.additional_properties.get("total-records", 0))
    return total
