"""The secured profile's principals, their ACLs, its TLS listeners and the Connect REST login files.

One Kafka principal per role (SASL/SCRAM-SHA-512, created when the broker's log dir is formatted),
declared with their ACLs in :mod:`lakebus_dagster.kafka.acls`: ``lakebus`` (the observer: sensors and
ordinary runs), ``lakebus-ops`` (the bus-changing jobs), ``connect`` (the worker and the sink),
``producer`` (a service sending events), and ``broker`` — the broker's inter-broker login and the
only super user (with KRaft's anonymous controller listener), which also creates the ACLs here.

Kafka's client listener is SASL_SSL and Connect's REST listener https, both with the server certificate
of the stack's own CA (:mod:`lakebus_dagster.stack.tls`); every client verifies it against that CA.

Passwords are generated into ``secrets.env`` (mode 0600) and reach the JVMs only as
``${env:…}`` placeholders (the Connect worker) or in files of mode 0600 that the broker and the
REST extension read (they read no environment).
"""

from __future__ import annotations

import os
from pathlib import Path

from lakebus_dagster.kafka.acls import ACLS as KAFKA_ACLS
from lakebus_dagster.kafka.acls import BROKER_USER
from lakebus_dagster.kafka.acls import PRINCIPALS as DECLARED
from lakebus_dagster.kafka.acls import acls
from lakebus_dagster.secret_env import CONNECT_PASSWORD_VAR, TLS_KEYSTORE_PASSWORD_VAR
from lakebus_dagster.stack.errors import StackError
from lakebus_dagster.stack.local_settings import StackSettings
from lakebus_dagster.stack.secrets import CONNECT_KAFKA_PASSWORD_VAR
from lakebus_dagster.stack.service import write_file
from lakebus_dagster.stack.tls import TlsFiles

MECHANISM = "SCRAM-SHA-512"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
#: Kafka's basic-auth REST extension guards every path, the probes' ``GET /`` and ``GET /health`` too
KAFKA_REST_EXTENSION = "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"
#: lakebus's (its Connect plugin): Kafka's filter, the probes left open — what deploy/'s workers run
#: (:data:`lakebus_dagster.deployment.access.REST_EXTENSION`), so the secured profile runs it too
REST_EXTENSION = "io.lakebus.connect.rest.BasicAuthRestExtension"
REST_LOGIN = "org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule"

#: principal -> the variable holding its password
PRINCIPALS = {p.name: p.password_var for p in DECLARED.values()}

#: (resource type, pattern type, name, operations) per principal: declared in :mod:`lakebus_dagster.kafka.acls`,
#: where deploy/'s Strimzi KafkaUsers are rendered from too (lakebus_dagster/deployment/access.py)
ACLS = KAFKA_ACLS


def password(principal: str) -> str:
    value = os.environ.get(PRINCIPALS[principal], "")
    if not value:
        raise StackError(f"secured profile: {PRINCIPALS[principal]} is not set (it is generated into secrets.env by `stack up`)")
    return value


def scram_jaas(principal: str, secret: str) -> str:
    return f'{SCRAM_LOGIN} required username="{principal}" password="{secret}";'


def format_args() -> list[str]:
    """``StorageTool format`` arguments creating every principal's SCRAM credential."""
    return [arg for user in PRINCIPALS for arg in ("--add-scram", f"{MECHANISM}=[name={user},password={password(user)}]")]


def broker_properties(host: str, port: int, controller_port: int, tls: TlsFiles) -> dict[str, object]:
    """SASL_SSL for clients and between brokers, the standard authorizer, deny by default.

    The broker's key and certificate chain, and the CA it verifies other brokers against (its
    inter-broker client), are PEM files (:mod:`lakebus_dagster.stack.tls`); clients are not asked for
    certificates (they log in with SASL/SCRAM inside TLS).

    The controller listener stays PLAINTEXT on the loopback address (it never leaves the host); KRaft's
    own registration requests arrive there as ``User:ANONYMOUS``, which must therefore be a super user
    (without it the broker never registers — seen on 3.9.2).
    """
    return {
        "listeners": f"SASL_SSL://{host}:{port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"SASL_SSL://{host}:{port}",
        "inter.broker.listener.name": "SASL_SSL",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL",
        "sasl.enabled.mechanisms": MECHANISM,
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram_jaas(BROKER_USER, password(BROKER_USER)),
        # Kafka reads an unencrypted PKCS#8 key from a PEM file without ssl.key.password (the file is 0600)
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": tls.server_pem,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": tls.ca_cert,
        "ssl.client.auth": "none",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": ";".join([*(f"User:{p.name}" for p in DECLARED.values() if p.super_user), "User:ANONYMOUS"]),
        "allow.everyone.if.no.acl.found": "false",
    }


#: the worker's client prefixes: its own clients, and those it makes for tasks (the sink's consumer, the
#: dead-letter queue's producer, the admin creating that topic); the Iceberg sink's own control-topic clients
#: take the worker file's unprefixed keys (it re-reads the file: IcebergSinkConfig.loadWorkerProps)
CLIENT_PREFIXES = ("", "producer.", "consumer.", "admin.")


def worker_properties(tls: TlsFiles) -> dict[str, object]:
    """Every client of the worker logs in as ``connect`` over TLS, verifying the brokers against the stack's
    CA (PEM); the password stays a placeholder the worker resolves. REST: https with the server certificate
    (PKCS#12: Connect's Jetty reads no PEM keystore; its password a placeholder too), behind basic auth.

    The unprefixed ``ssl.truststore.*`` is PEM, which Connect's own REST *client* (a follower forwarding a
    request to the leader over https) cannot read; the secured profile runs one worker, which forwards nothing."""
    jaas = scram_jaas("connect", f"${{env:{CONNECT_KAFKA_PASSWORD_VAR}}}")
    props: dict[str, object] = {}
    for prefix in CLIENT_PREFIXES:
        props.update({f"{prefix}security.protocol": "SASL_SSL", f"{prefix}sasl.mechanism": MECHANISM,
                      f"{prefix}sasl.jaas.config": jaas,
                      f"{prefix}ssl.truststore.type": "PEM", f"{prefix}ssl.truststore.location": tls.ca_cert})
    # https the only listener: Connect advertises it to the other workers; clients show no certificate
    props.update({
        "listeners.https.ssl.keystore.type": "PKCS12",
        "listeners.https.ssl.keystore.location": tls.rest_keystore,
        "listeners.https.ssl.keystore.password": f"${{env:{TLS_KEYSTORE_PASSWORD_VAR}}}",
        "rest.extension.classes": REST_EXTENSION,
    })
    return props


def write_rest_login(run_dir: Path, settings: StackSettings) -> Path:
    """The REST extension's JAAS file and its user file (``<user>=<password>``, mode 0600); returns the JAAS file."""
    users = write_file(run_dir / "connect-rest-users.properties",
                       f"{settings.connect.username}={os.environ.get(CONNECT_PASSWORD_VAR, '')}\n", mode=0o600)
    return write_file(run_dir / "connect-rest-jaas.conf", f'KafkaConnect {{\n  {REST_LOGIN} required\n  file="{users}";\n}};\n')


def broker_client_config(settings: StackSettings) -> dict[str, object]:
    """The broker's own login (its super user): only the stack's ACL setup uses it, never a lakebus run."""
    return {**settings.kafka.client_config(), "sasl.username": BROKER_USER, "sasl.password": password(BROKER_USER)}


def ensure_acls(settings: StackSettings, bus: str | None = None) -> int:
    """Create every principal's ACLs for the bus topic ``bus`` (default: the declared default bus's), as the
    broker's super user (creating an existing binding changes nothing); returns how many."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    from lakebus_dagster.kafka.clients import KafkaClients

    admin = KafkaClients(broker_client_config(settings)).admin(log_level=0)
    bindings = [
        AclBinding(ResourceType[rtype], name, ResourcePatternType[ptype], f"User:{principal}", "*", AclOperation[op],
                   AclPermissionType.ALLOW)
        for principal, rules in (acls(bus) if bus else ACLS).items() for rtype, ptype, name, ops in rules for op in ops
    ]
    for binding, future in admin.create_acls(bindings, request_timeout=30).items():
        try:
            future.result()
        except Exception as exc:  # noqa: BLE001 - re-raised with the binding named
            raise StackError(f"kafka: creating ACL {binding} failed: {exc}") from exc
    return len(bindings)
