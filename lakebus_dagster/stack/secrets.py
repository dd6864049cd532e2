"""The local stack's generated secrets: the S3 key pair, the Kafka / Connect passwords, the
change-capture role's PostgreSQL password and (secured profile) the catalog's OAuth2 client credential.

Why generated, and here: the dev stack has no secret store, so ``stack up`` makes random ones once
and keeps them in ``<state>/secrets.env`` (mode 0600); :func:`lakebus_dagster.settings.load_local_secrets`
then exports them under the same variable names production's secret store sets. Production never
generates a secret, so this lives with the stack.
"""

from __future__ import annotations

import os
import secrets

from lakebus_dagster.kafka.acls import BROKER_USER, OPERATIONS, PRINCIPALS
from lakebus_dagster.settings import Settings, load_local_secrets
from lakebus_dagster.secret_env import (CATALOG_CREDENTIAL_VAR, CONNECT_PASSWORD_VAR, KAFKA_PASSWORD_VAR, POSTGRES_PASSWORD_VAR,
                                        S3_ACCESS_KEY_VAR, S3_SECRET_KEY_VAR, TLS_KEYSTORE_PASSWORD_VAR)

__all__ = ["BROKER_KAFKA_PASSWORD_VAR", "CONNECT_KAFKA_PASSWORD_VAR", "OPS_KAFKA_PASSWORD_VAR", "PRODUCER_KAFKA_PASSWORD_VAR",
           "create_local_secrets"]

#: the secured local stack's other principals (declared in lakebus_dagster/kafka/acls.py)
CONNECT_KAFKA_PASSWORD_VAR = PRINCIPALS["connect"].password_var
PRODUCER_KAFKA_PASSWORD_VAR = PRINCIPALS["producer"].password_var
OPS_KAFKA_PASSWORD_VAR = PRINCIPALS[OPERATIONS].password_var
BROKER_KAFKA_PASSWORD_VAR = PRINCIPALS[BROKER_USER].password_var

#: the local stack's generated secrets (``<state>/secrets.env``, mode 0600)
_LOCAL_SECRETS = {
    S3_ACCESS_KEY_VAR: lambda: f"lakebus-{secrets.token_hex(4)}",
    S3_SECRET_KEY_VAR: lambda: secrets.token_urlsafe(24),
    KAFKA_PASSWORD_VAR: lambda: secrets.token_urlsafe(24),
    CONNECT_PASSWORD_VAR: lambda: secrets.token_urlsafe(24),
    CONNECT_KAFKA_PASSWORD_VAR: lambda: secrets.token_urlsafe(24),
    PRODUCER_KAFKA_PASSWORD_VAR: lambda: secrets.token_urlsafe(24),
    # the change-capture role of the local PostgreSQL (LAKEBUS_POSTGRES=on); hex: no quoting in SQL or URLs
    POSTGRES_PASSWORD_VAR: lambda: secrets.token_hex(20),
}
#: only the secured profile's catalog authenticates (behind the catalog gate): its client credential
_SECURED_SECRETS = {
    CATALOG_CREDENTIAL_VAR: lambda: f"lakebus-{secrets.token_hex(4)}:{secrets.token_urlsafe(24)}",
    # the bus-changing jobs' principal, and the brokers' own inter-broker login (no lakebus run uses it)
    OPS_KAFKA_PASSWORD_VAR: lambda: secrets.token_urlsafe(24),
    BROKER_KAFKA_PASSWORD_VAR: lambda: secrets.token_urlsafe(24),
    # the Connect REST listener's PKCS#12 keystore (stack/tls.py)
    TLS_KEYSTORE_PASSWORD_VAR: lambda: secrets.token_urlsafe(24),
}


def create_local_secrets(settings: Settings) -> None:
    """Generate the keys missing from ``settings.secrets_file`` (only ``stack up`` does this), then
    export the file like :func:`~lakebus_dagster.settings.load_local_secrets`. A file from before a
    key existed gets only the missing keys; existing ones never change."""
    path = settings.secrets_file
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    wanted = {**_LOCAL_SECRETS, **(_SECURED_SECRETS if settings.profile == "secured" else {})}
    with os.fdopen(fd, "a") as fh:
        present = {line.partition("=")[0] for line in path.read_text().splitlines()}
        fh.writelines(f"{key}={make()}\n" for key, make in wanted.items() if key not in present)
    load_local_secrets(settings)
