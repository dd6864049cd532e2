"""The secrets lakebus reads from the environment: their variables' names, the local stack's secrets
file, and the checked reads of the S3 key pair and the catalog's credential.

Secrets are never settings: production's come from its secret store as environment variables, the
resources read them through ``dg.EnvVar``, and the Connect worker resolves ``${env:...}``
placeholders with the same names. Locally the dev stack generates them into
:attr:`lakebus_dagster.settings.Settings.secrets_file`: :func:`local_secrets` reads that file
without touching the environment (the definitions pass its values to the resources),
:func:`lakebus_dagster.settings.load_local_secrets` exports it for the stack's processes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from lakebus_dagster.envvars import SettingsError

#: Environment variable names of the S3 key pair. Resources read them through ``dg.EnvVar`` and the
#: Connect worker resolves ``${env:...}`` placeholders with them, so their *names* are public API.
S3_ACCESS_KEY_VAR = "LAKEBUS_S3_ACCESS_KEY_ID"
S3_SECRET_KEY_VAR = "LAKEBUS_S3_SECRET_ACCESS_KEY"

#: the alert webhook's URL embeds a token: read through ``dg.EnvVar``, never stored in settings
ALERT_WEBHOOK_URL_VAR = "LAKEBUS_ALERT_WEBHOOK_URL"
#: lakebus's own Kafka password and the Connect REST password: ``dg.EnvVar`` in the resources
KAFKA_PASSWORD_VAR = "LAKEBUS_KAFKA_SASL_PASSWORD"
#: the operations principal's Kafka password (the bus-changing jobs' resource ``operations``)
KAFKA_OPS_PASSWORD_VAR = "LAKEBUS_KAFKA_OPS_PASSWORD"
CONNECT_PASSWORD_VAR = "LAKEBUS_CONNECT_PASSWORD"
#: the change-capture role's PostgreSQL password: the Connect worker resolves ``${env:...}`` with it
POSTGRES_PASSWORD_VAR = "LAKEBUS_POSTGRES_PASSWORD"
#: the Iceberg REST catalog's OAuth2 client credential (``client_id:client_secret``) or bearer token:
#: ``dg.EnvVar`` in the resources, ``${env:…}`` in the sink's config, never in a file of the repo
CATALOG_CREDENTIAL_VAR = "LAKEBUS_CATALOG_CREDENTIAL"
CATALOG_TOKEN_VAR = "LAKEBUS_CATALOG_TOKEN"
#: the secured local stack's Connect REST keystore password (PKCS#12: Jetty takes no PEM keystore); the
#: worker resolves ``${env:...}`` with it (stack/tls.py)
TLS_KEYSTORE_PASSWORD_VAR = "LAKEBUS_TLS_KEYSTORE_PASSWORD"
#: the local stack's generated secrets, in its state directory (mode 0600; see stack/secrets.py)
SECRETS_FILE_NAME = "secrets.env"


def local_secrets(path: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The local stack's generated secrets (name -> value) from the file at ``path``, each one not
    already set in ``environ`` (this process's environment when None): a value set there always wins.
    A missing file is no error (production has none)."""
    environ = os.environ if environ is None else environ
    found: dict[str, str] = {}
    for line in path.read_text().splitlines() if path.exists() else ():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not environ.get(key.strip()):
            found[key.strip()] = value.strip()
    return found


def catalog_secrets(environ: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """The catalog's OAuth2 credential and bearer token from ``environ`` (this process's environment,
    after :func:`lakebus_dagster.settings.load_local_secrets`, when None), each None when unset;
    checked for shape, never echoed."""
    environ = os.environ if environ is None else environ
    credential = environ.get(CATALOG_CREDENTIAL_VAR, "").strip() or None
    token = environ.get(CATALOG_TOKEN_VAR, "").strip() or None
    if credential and token:
        raise SettingsError(CATALOG_TOKEN_VAR, f"and {CATALOG_CREDENTIAL_VAR} are both set",
                            "set one: the OAuth2 client credential, or a bearer token")
    if credential is not None:
        client_id, sep, secret = credential.partition(":")
        if not (sep and client_id and secret) or any(c.isspace() for c in credential):
            raise SettingsError(CATALOG_CREDENTIAL_VAR, "is not `client_id:client_secret` (value not shown)",
                                "set it to the catalog's OAuth2 client id and secret joined by `:` (from your secret store)")
    return credential, token


def s3_credentials() -> tuple[str, str]:
    """The S3 key pair from the environment (after :func:`lakebus_dagster.settings.load_local_secrets`), or a clear error."""
    access, secret = os.environ.get(S3_ACCESS_KEY_VAR), os.environ.get(S3_SECRET_KEY_VAR)
    if not access or not secret:
        raise RuntimeError(
            f"{S3_ACCESS_KEY_VAR} / {S3_SECRET_KEY_VAR} are not set; run `make stack-up` (local) "
            "or provide them from your secret store"
        )
    return access, secret
