"""The one librdkafka config builder and the client factories (lakebus_dagster.kafka.clients), and the
two callers that turn its error into their own: the Dagster resource and the settings."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import dagster as dg
import pytest

from lakebus_dagster.defs.resources import KafkaResource
from lakebus_dagster.kafka import clients
from lakebus_dagster.kafka.clients import KafkaClients, KafkaConfigError, client_config
from lakebus_dagster.settings import SettingsError, load_settings


def test_the_builder_adds_the_login_only_with_sasl_and_extra_settings_last(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    assert client_config("b:9092") == {"bootstrap.servers": "b:9092", "security.protocol": "PLAINTEXT"}
    assert client_config("b:9092", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="u",
                         sasl_password="p", ssl_ca_location=str(ca), extra={"security.protocol": "SSL"}) == {
        "bootstrap.servers": "b:9092", "security.protocol": "SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "u", "sasl.password": "p", "ssl.ca.location": str(ca)}
    # a CA file that is not there: librdkafka's own error would name no setting
    with pytest.raises(KafkaConfigError, match="ssl_ca_location=.* is not a file") as raised:
        client_config("b:9092", security_protocol="SSL", ssl_ca_location=str(tmp_path / "absent.pem"))
    assert raised.value.field == "ssl_ca_location"


@pytest.mark.parametrize(("login", "field"), [
    ({"sasl_username": "u", "sasl_password": "p"}, "sasl_mechanism"),
    ({"sasl_mechanism": "PLAIN", "sasl_password": "p"}, "sasl_username"),
    ({"sasl_mechanism": "PLAIN", "sasl_username": "u"}, "sasl_password"),
])
def test_an_incomplete_sasl_login_names_the_missing_field(login, field):
    with pytest.raises(KafkaConfigError, match=f"not set: {field}$") as raised:
        client_config("b:9092", security_protocol="SASL_PLAINTEXT", **login)
    assert raised.value.field == field
    with pytest.raises(KafkaConfigError, match="expected one of") as raised:
        client_config("b:9092", security_protocol="TLS")
    assert raised.value.field == "security_protocol"


def test_the_factories_carry_the_safe_defaults_and_take_overrides(monkeypatch):
    made: list[tuple[str, dict[str, Any]]] = []
    for kind in ("AdminClient", "Producer", "Consumer"):
        monkeypatch.setattr(clients, kind, lambda config, kind=kind: made.append((kind, config)))
    kafka = KafkaClients({"bootstrap.servers": "b:9092"})
    kafka.admin(log_level=0)
    kafka.producer(**{"linger.ms": 5})
    kafka.producer(acks=1)
    kafka.consumer("g", **{"isolation.level": "read_committed"})
    assert made == [
        ("AdminClient", {"bootstrap.servers": "b:9092", "log_level": 0}),
        ("Producer", {"acks": "all", "enable.idempotence": True, "compression.type": "zstd", "bootstrap.servers": "b:9092",
                      "linger.ms": 5}),
        ("Producer", {"acks": 1, "enable.idempotence": True, "compression.type": "zstd", "bootstrap.servers": "b:9092"}),
        ("Consumer", {"bootstrap.servers": "b:9092", "group.id": "g", "enable.auto.commit": False,
                      "isolation.level": "read_committed"}),
    ]
    assert kafka.bootstrap_servers == "b:9092"


def test_the_resource_and_the_settings_name_the_missing_field_their_own_way(monkeypatch):
    resource = KafkaResource(bootstrap_servers="b:9092", security_protocol="SASL_SSL", sasl_mechanism="PLAIN", sasl_username="u")
    with pytest.raises(dg.DagsterInvalidConfigError, match="KafkaResource.security_protocol=SASL_SSL needs .* not set: sasl_password"):
        resource.client_config()
    assert KafkaResource(bootstrap_servers="b:9092").clients().config == {"bootstrap.servers": "b:9092", "security.protocol": "PLAINTEXT"}
    monkeypatch.delenv("LAKEBUS_KAFKA_SASL_PASSWORD", raising=False)
    loaded = load_settings()
    settings = replace(loaded, kafka=replace(loaded.kafka, security_protocol="SASL_PLAINTEXT", sasl_username="lakebus"))
    with pytest.raises(SettingsError, match="^LAKEBUS_KAFKA_SASL_PASSWORD is not set but LAKEBUS_KAFKA_SECURITY_PROTOCOL="):
        settings.kafka.client_config()
    monkeypatch.setenv("LAKEBUS_KAFKA_SASL_PASSWORD", "pw")  # read at call time, never kept on the settings
    assert settings.kafka.client_config()["sasl.password"] == "pw"
