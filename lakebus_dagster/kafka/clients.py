"""Kafka clients for one cluster and principal: the librdkafka config builder, and admin / producer /
consumer factories with the bus's safe defaults.

Why below Dagster: the Dagster resource (``defs/resources.py: KafkaResource``), the settings
(``KafkaSettings.client_config``), the CLI, the offset ledger and the dev stack all talk to the same
cluster with the same security setup. One builder is the one place that knows how the security
settings become librdkafka keys (and which are missing), and one :class:`KafkaClients` holds the
defaults every producer and consumer of lakebus needs, so no caller copies them (one did, and
missed ``compression.type``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

#: what "delivered" means on the bus: on every in-sync replica, once, in order; zstd compresses the
#: repetitive envelopes well. A caller's config or overrides may still change them.
SAFE_PRODUCER_DEFAULTS: dict[str, Any] = {"acks": "all", "enable.idempotence": True, "compression.type": "zstd"}


class KafkaConfigError(ValueError):
    """The client settings cannot make a working config; :attr:`field` names the setting to fix
    (``security_protocol``, ``sasl_mechanism``, ``sasl_username``, ``sasl_password`` or ``ssl_ca_location``), so each
    caller can point at its own spelling of it (a resource field, an environment variable)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def client_config(bootstrap_servers: str, *, security_protocol: str = "PLAINTEXT", sasl_mechanism: str | None = None,
                  sasl_username: str | None = None, sasl_password: str | None = None,
                  ssl_ca_location: str | None = None, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The librdkafka settings for one principal: servers, protocol, SASL login (with a SASL
    protocol only), TLS CA (a PEM file that must exist: librdkafka's own error names no setting), then
    ``extra`` on top. Raises :class:`KafkaConfigError` for an unknown protocol, an incomplete SASL login
    (naming the first missing field) or a CA file that is not there."""
    if security_protocol not in SECURITY_PROTOCOLS:
        raise KafkaConfigError("security_protocol",
                               f"security_protocol={security_protocol!r}; expected one of {SECURITY_PROTOCOLS}")
    config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers, "security.protocol": security_protocol}
    if security_protocol.startswith("SASL"):
        login = {"sasl_mechanism": sasl_mechanism, "sasl_username": sasl_username, "sasl_password": sasl_password}
        if missing := [name for name, value in login.items() if not value]:
            raise KafkaConfigError(missing[0], f"security_protocol={security_protocol} needs sasl_mechanism, sasl_username "
                                               f"and sasl_password; not set: {', '.join(missing)}")
        config.update({"sasl.mechanism": sasl_mechanism, "sasl.username": sasl_username, "sasl.password": sasl_password})
    if ssl_ca_location:
        if not os.path.isfile(ssl_ca_location):
            raise KafkaConfigError("ssl_ca_location", f"ssl_ca_location={ssl_ca_location!r} is not a file")
        config["ssl.ca.location"] = ssl_ca_location
    config.update(extra or {})
    return config


class KafkaClients:
    """confluent-kafka clients sharing one librdkafka config (see :func:`client_config`).

    Overrides are librdkafka keys; dotted ones go through a dict: ``admin(**{"bootstrap.servers": b})``.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config: dict[str, Any] = dict(config)

    @property
    def bootstrap_servers(self) -> str:
        return str(self.config.get("bootstrap.servers", ""))

    def admin(self, **overrides: Any) -> AdminClient:
        return AdminClient({**self.config, **overrides})

    def producer(self, **overrides: Any) -> Producer:
        """A producer with :data:`SAFE_PRODUCER_DEFAULTS` unless the config or ``overrides`` say otherwise."""
        return Producer({**SAFE_PRODUCER_DEFAULTS, **self.config, **overrides})

    def consumer(self, group_id: str, **overrides: Any) -> Consumer:
        """A consumer that never commits offsets on its own (``enable.auto.commit`` off): lakebus
        reads by explicit offsets, and the groups it reads beside belong to others (the sink's)."""
        return Consumer({**self.config, "group.id": group_id, "enable.auto.commit": False, **overrides})


def quiet_kafka_logger() -> logging.Logger:
    """A logger for librdkafka that prints nothing: an unreachable broker otherwise fills the
    terminal with one connection error per retry; the caller's own check reports it once instead."""
    logger = logging.getLogger("lakebus.librdkafka")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger
