"""One boto3 S3 client recipe for every caller: the stack's health probe and bucket creation, and
the Dagster object-store resource. S3-compatible stores want path-style addressing, and the AWS SDK
must only send checksums where an operation requires them (see ``settings.AWS_SDK_ENV``)."""

from __future__ import annotations

import boto3
from botocore.config import Config


def s3_client(endpoint_url: str, region: str, access_key: str, secret_key: str, *, path_style: bool = True):
    return boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        region_name=region,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        config=Config(
            s3={"addressing_style": "path" if path_style else "auto"},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            retries={"max_attempts": 2, "mode": "standard"},
            connect_timeout=2,
            read_timeout=10,
        ),
    )


def ensure_bucket(client, bucket: str) -> bool:
    """Create ``bucket`` unless it exists; True if it was created."""
    if bucket in {b["Name"] for b in client.list_buckets().get("Buckets", [])}:
        return False
    client.create_bucket(Bucket=bucket)
    return True
