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
    #: the catalog's OAuth2 client credential ``client_id:client_secret`` or bearer token: use
    #: ``dg.EnvVar`` (LAKEBUS_CATALOG_CREDENTIAL / LAKEBUS_CATALOG_TOKEN), never a literal
    catalog_credential: str | None = None
    catalog_token: str | None = None
    #: the OAuth2 scope and token endpoint (None: the clients' defaults)
    catalog_scope: str | None = None
    catalog_oauth2_server_uri: str | None = None

    @property
    def warehouse_bucket(self) -> str:
        """``s3://warehouse/`` -> ``warehouse``: the bucket the catalog's tables live in."""
        scheme, _, rest = self.warehouse.partition("://")
        if scheme not in ("s3", "s3a") or not rest.split("/", 1)[0]:
            raise ValueError(f"warehouse {self.warehouse!r} is not an s3://<bucket>/ location")
        return rest.split("/", 1)[0]

    def endpoints(self) -> LakeEndpoints:
        return LakeEndpoints(self.catalog_uri, self.warehouse, self.s3_endpoint, self.region, self.access_key_id,
                             self.secret_access_key, credential=self.catalog_credential or None,
                             token=self.catalog_token or None, scope=self.catalog_scope or None,
                             oauth2_server_uri=self.catalog_oauth2_server_uri or None)
