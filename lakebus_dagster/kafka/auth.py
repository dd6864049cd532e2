"""Telling "wrong credentials" (or a TLS handshake that failed) from "unreachable".

librdkafka reports a refused SASL login only through the client's error callback (code
``_AUTHENTICATION``, within a fraction of a second) and keeps retrying; a metadata request meanwhile
just times out with ``_TRANSPORT``. A job or a command that only saw the timeout would say "Kafka is
unreachable" for a wrong password. :func:`refused_login` asks for metadata and listens to the error
callback, so the caller can say which it is. A broker whose certificate the client's CA does not
verify is reported the same way (code ``_SSL``): :func:`login_failure_message` then names the CA
setting instead of the login's. (A plaintext client at a TLS listener gets no such error, only
"connection closed by peer" while asking for API versions: it stays "unreachable".)
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from lakebus_dagster.kafka.clients import KafkaClients


#: how a refusal's reason starts when the TLS handshake failed
TLS_REFUSAL = "TLS handshake failed"


def refused_login(config: Mapping[str, Any], timeout_s: float = 10.0) -> str | None:
    """The broker's reason when it refuses ``config``'s SASL login (or the TLS handshake fails: the reason
    starts with :data:`TLS_REFUSAL`); None once metadata arrives (or the deadline passes without a refusal: then the caller's own request
    reports what went wrong)."""
    refusals: list[str] = []

    def on_error(err: KafkaError) -> None:
        if err.code() == KafkaError._AUTHENTICATION:
            refusals.append(err.str())
        elif err.code() == KafkaError._SSL:
            refusals.append(f"{TLS_REFUSAL}: {err.str()}")

    quiet = {k: v for k, v in config.items() if k not in ("error_cb", "logger")}
    admin = KafkaClients(quiet).admin(error_cb=on_error, log_level=0)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=1.0)
            return None
        except KafkaException:
            admin.poll(0.2)  # serves the error callback
            if refusals:
                return refusals[0]
    return None


def login_failure_message(config: Mapping[str, Any], reason: str) -> str:
    """One line naming the servers, the user and the mechanism (never the password), and what to check (the
    operations principal's variables for its user, :mod:`lakebus_dagster.kafka.acls`); for a TLS refusal the
    CA setting."""
    from lakebus_dagster.kafka.acls import OPERATIONS, PRINCIPALS

    servers = config.get("bootstrap.servers")
    if reason.startswith(TLS_REFUSAL):
        return (f"Kafka at {servers}: {reason}; the broker's certificate was not verified against "
                f"ssl.ca.location={config.get('ssl.ca.location') or '(the system CAs)'}: check LAKEBUS_KAFKA_SSL_CA_LOCATION "
                "(the PEM file of the CA that signed the brokers' certificates)")
    ops = PRINCIPALS[OPERATIONS]
    user_var, password_var = ((ops.username_var, ops.password_var) if config.get("sasl.username") == OPERATIONS
                              else ("LAKEBUS_KAFKA_SASL_USERNAME", "LAKEBUS_KAFKA_SASL_PASSWORD"))
    return (f"Kafka at {servers} refused the login of user {config.get('sasl.username')!r} "
            f"({config.get('sasl.mechanism')}): {reason}; check {user_var} and {password_var}")
