"""The local S3 store through the shared client recipe (health probe, bucket creation)."""

from __future__ import annotations

from lakebus_dagster.lake import object_store
from lakebus_dagster.settings import Settings, s3_credentials


def s3_client(settings: Settings):
    access_key, secret_key = s3_credentials()
    return object_store.s3_client(settings.s3_endpoint, settings.region, access_key, secret_key)


def ensure_bucket(settings: Settings, bucket: str) -> bool:
    """Create ``bucket`` if missing. Returns True if it was created."""
    return object_store.ensure_bucket(s3_client(settings), bucket)
