"""What the pyiceberg and Spark resources share: the catalog endpoint and the object store's settings."""

from __future__ import annotations

import dagster as dg

from lakebus_dagster.lake.catalog import LakeEndpoints


class LakeAccess(dg.ConfigurableResource):
    """Catalog endpoint + object store settings shared by the pyiceberg and Spark resources."""

    catalog_uri: str
    warehouse: str
    s3_endpoint: str
    region: str = "us-east-1"
    access_key_id: str
    secret_access_key: str

    @property
    def warehouse_bucket(self) -> str:
        """``s3://warehouse/`` -> ``warehouse``: the bucket the catalog's tables live in."""
        scheme, _, rest = self.warehouse.partition("://")
        if scheme not in ("s3", "s3a") or not rest.split("/", 1)[0]:
            raise ValueError(f"warehouse {self.warehouse!r} is not an s3://<bucket>/ location")
        return rest.split("/", 1)[0]

    def endpoints(self) -> LakeEndpoints:
        return LakeEndpoints(self.catalog_uri, self.warehouse, self.s3_endpoint, self.region, self.access_key_id, self.secret_access_key)
