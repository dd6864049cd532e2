"""boto3 access to the local S3 store (health probe, bucket creation, listings in tests)."""

from __future__ import annotations

import boto3
from botocore.config import Config

from lakebus_dagster.settings import Settings, s3_credentials


def s3_client(settings: Settings):
    access_key, secret_key = s3_credentials()
    return boto3.client(
        "s3",
        endpoint_url=settings.s3_endpoint,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        region_name=settings.region,
        config=Config(
            s3={"addressing_style": "path"},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            retries={"max_attempts": 2, "mode": "standard"},
            connect_timeout=2,
            read_timeout=10,
        ),
    )


def ensure_bucket(settings: Settings, bucket: str) -> bool:
    """Create ``bucket`` if missing. Returns True if it was created."""
    client = s3_client(settings)
    existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
    if bucket in existing:
        return False
    client.create_bucket(Bucket=bucket)
    return True
