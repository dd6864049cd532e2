"""pyiceberg access to the Iceberg REST catalog over S3 (the same catalog the sink commits to)."""

from __future__ import annotations

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog

from lakebus_dagster.settings import Settings, s3_credentials


def catalog_properties(settings: Settings, access_key: str, secret_key: str) -> dict[str, str]:
    # The REST fixture's /v1/config returns no storage settings, so the client brings its own.
    return {
        "uri": settings.catalog_uri,
        "warehouse": settings.warehouse,
        "s3.endpoint": settings.s3_endpoint,
        "s3.region": settings.region,
        "s3.access-key-id": access_key,
        "s3.secret-access-key": secret_key,
        "s3.force-virtual-addressing": "false",
    }


def load_catalog(settings: Settings, name: str = "lakebus") -> Catalog:
    access_key, secret_key = s3_credentials()
    return RestCatalog(name, **catalog_properties(settings, access_key, secret_key))
