"""The local S3 store through the shared client recipe (health probe, bucket creation)."""

from __future__ import annotations

from lakebus_dagster.lake import object_store
from lakebus_dagster.secret_env import s3_credentials
from lakebus_dagster.stack.local_settings import StackSettings


def s3_client(settings: StackSettings):
    access_key, secret_key = s3_credentials()
    return object_store.s3_client(settings.lake.s3_endpoint, settings.lake.region, access_key, secret_key)


def ensure_bucket(settings: StackSettings, bucket: str) -> bool:
    """Create ``bucket`` if missing. Returns True if it was created."""
    return object_store.ensure_bucket(s3_client(settings), bucket)
