"""The Iceberg REST catalog over S3 (the same catalog the sink commits to): pyiceberg access, the
catalog's authentication (an OAuth2 client credential or a bearer token, with a scope and the token
endpoint: :func:`catalog_auth_props`, the same property names for pyiceberg and Iceberg's Java
clients), and the invalidation of a Spark session's cached table metadata.

A catalog that refuses lakebus's credential fails :func:`open_catalog` in one line naming the
catalog and the variable to fix (:class:`CatalogAuthError`), never echoing the secret."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog

from lakebus_dagster.errors import UserError
from lakebus_dagster.settings import Settings
from lakebus_dagster.secret_env import CATALOG_CREDENTIAL_VAR, CATALOG_TOKEN_VAR, catalog_secrets, s3_credentials


class CatalogAuthError(UserError):
    """The Iceberg REST catalog refused lakebus's credential or token (one line: the catalog, the
    variable, the catalog's own reason; never the secret)."""


@dataclass(frozen=True)
class LakeEndpoints:
    """Where the catalog and its object store are, and the key pair to read data files with."""

    catalog_uri: str
    warehouse: str
    s3_endpoint: str
    region: str
    access_key: str
    secret_key: str
    #: the catalog's OAuth2 client credential ``client_id:client_secret`` (secret), or None
    credential: str | None = None
    #: a bearer token instead of a credential (secret), or None
    token: str | None = None
    #: the OAuth2 scope the credential asks for (None: the clients' default, ``catalog``)
    scope: str | None = None
    #: the OAuth2 token endpoint (None: ``<catalog_uri>/v1/oauth/tokens``, the clients' default)
    oauth2_server_uri: str | None = None

    @classmethod
    def local(cls, settings: Settings) -> LakeEndpoints:
        access, secret = s3_credentials()
        credential, token = catalog_secrets()
        return cls(settings.lake.catalog_uri, settings.lake.warehouse, settings.lake.s3_endpoint, settings.lake.region, access, secret,
                   credential=credential, token=token, scope=settings.lake.catalog_scope,
                   oauth2_server_uri=settings.lake.catalog_oauth2_server_uri)

    def __repr__(self) -> str:  # the secrets never reach a log line through a repr
        return (f"LakeEndpoints(catalog_uri={self.catalog_uri!r}, warehouse={self.warehouse!r}, "
                f"s3_endpoint={self.s3_endpoint!r}, auth={self.auth_kind!r})")

    @property
    def auth_kind(self) -> str:
        """How lakebus authenticates to the catalog, as a message says it (no secret)."""
        if self.credential:
            return f"OAuth2 client credential ({CATALOG_CREDENTIAL_VAR})"
        return f"bearer token ({CATALOG_TOKEN_VAR})" if self.token else "no credential"


def catalog_auth_props(ep: LakeEndpoints, *, with_secrets: bool = True) -> dict[str, str]:
    """The catalog's authentication as Iceberg catalog properties (``credential``, ``token``, ``scope``,
    ``oauth2-server-uri``): pyiceberg and Iceberg's Java clients (Spark's ``spark.sql.catalog.<name>.*``,
    the sink's ``iceberg.catalog.*``) spell them alike. Only what is set; ``with_secrets=False``
    leaves the credential and the token out (a file that may not hold them)."""
    secrets = {"credential": ep.credential, "token": ep.token} if with_secrets else {}
    props = {**secrets, "scope": ep.scope, "oauth2-server-uri": ep.oauth2_server_uri}
    return {key: value for key, value in props.items() if value}


def open_catalog(ep: LakeEndpoints, name: str = "lakebus") -> Catalog:
    """pyiceberg's client of the REST catalog (with the catalog's credential or token when set).

    Raises :class:`CatalogAuthError` in one line when the catalog refuses the credential.
    """
    from pyiceberg.exceptions import ForbiddenError, OAuthError, UnauthorizedError

    # The REST fixture's /v1/config returns no storage settings, so the client brings its own.
    props = {
        "s3.endpoint": ep.s3_endpoint,
        "s3.region": ep.region,
        "s3.access-key-id": ep.access_key,
        "s3.secret-access-key": ep.secret_key,
        "s3.force-virtual-addressing": "false",
        **catalog_auth_props(ep),
    }
    try:
        return RestCatalog(name, uri=ep.catalog_uri, warehouse=ep.warehouse, **props)
    except (OAuthError, UnauthorizedError, ForbiddenError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        for secret in (ep.credential, ep.token, *(ep.credential or "").split(":", 1)[1:]):
            # a catalog that echoes the secret gets it masked (short test values like "wrong" are words, not secrets)
            reason = reason.replace(secret, "***") if secret and len(secret) >= 8 else reason
        if ep.credential or ep.token:
            var = CATALOG_CREDENTIAL_VAR if ep.credential else CATALOG_TOKEN_VAR
            sent, fix = f"'s {ep.auth_kind}", f"check {var} (from your secret store)"
        else:
            sent = ", which sent no credential"
            fix = f"set {CATALOG_CREDENTIAL_VAR} (client_id:client_secret) or {CATALOG_TOKEN_VAR} from your secret store"
        raise CatalogAuthError(f"Iceberg REST catalog {name!r} at {ep.catalog_uri} refused lakebus{sent}: {reason}; {fix}") from None


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
