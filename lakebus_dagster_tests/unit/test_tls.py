"""TLS of the secured profile's Kafka and Connect hops: the stack's own CA and server certificate
(lakebus_dagster/stack/tls.py), the CA settings (LAKEBUS_KAFKA_SSL_CA_LOCATION, LAKEBUS_CONNECT_CA_LOCATION)
and how a failed handshake is reported: naming the setting to fix.

The handshakes themselves against the real broker and worker: integration/test_secured_profile.py."""

from __future__ import annotations

import datetime
import os
import ssl
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import pkcs12

from lakebus_dagster.connect import ConnectClient, ConnectUnavailable
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.kafka import login_failure_message
from lakebus_dagster.kafka.auth import TLS_REFUSAL
from lakebus_dagster.kafka.clients import KafkaConfigError, client_config
from lakebus_dagster.settings import SettingsError, load_settings
from lakebus_dagster.stack import tls

PASSWORD = "unit-keystore-password"


@pytest.fixture
def secured(clean_env):
    clean_env.setenv("LAKEBUS_PROFILE", "secured")
    clean_env.setenv("LAKEBUS_TLS_KEYSTORE_PASSWORD", PASSWORD)
    return clean_env


def _san(path: Path) -> x509.SubjectAlternativeName:
    cert = x509.load_pem_x509_certificate(path.read_bytes().split(b"-----END PRIVATE KEY-----", 1)[1])
    return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value


# -- the stack's CA and certificate ---------------------------------------------------------------
def test_up_makes_the_ca_once_and_a_server_certificate_it_signed_for_the_stacks_names(secured):
    settings = load_settings()
    files = tls.ensure_tls(settings)
    assert files.ca_cert == settings.state_dir / "tls" / "ca.crt"
    assert {stat.S_IMODE(p.stat().st_mode) for p in (files.ca_key, files.server_pem, files.rest_keystore)} == {0o600}
    assert stat.S_IMODE(files.ca_cert.parent.stat().st_mode) == 0o700
    ca = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
    pem = files.server_pem.read_bytes()
    # Kafka's PEM keystore: an unencrypted PKCS#8 key, then the chain (server, CA)
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----") and pem.count(b"-----BEGIN CERTIFICATE-----") == 2
    server = x509.load_pem_x509_certificate(pem.split(b"-----END PRIVATE KEY-----", 1)[1])
    server.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    san = _san(files.server_pem)
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    # Connect's REST keystore: the same key and certificate, under the generated password
    key, cert, extra = pkcs12.load_key_and_certificates(files.rest_keystore.read_bytes(), PASSWORD.encode())
    assert cert == server and extra == [ca] and key is not None

    before = {p: p.read_bytes() for p in (files.ca_cert, files.ca_key, files.server_pem, files.rest_keystore)}
    tls.ensure_tls(settings)  # a second `up` changes nothing
    assert {p: p.read_bytes() for p in before} == before


def test_another_host_or_a_certificate_near_its_end_gets_a_new_certificate_from_the_same_ca(secured):
    files = tls.ensure_tls(load_settings())
    ca, first = files.ca_cert.read_bytes(), files.server_pem.read_bytes()
    secured.setenv("LAKEBUS_HOST", "kafka.internal")
    tls.ensure_tls(load_settings())
    assert files.ca_cert.read_bytes() == ca and files.server_pem.read_bytes() != first
    assert set(_san(files.server_pem).get_values_for_type(x509.DNSName)) == {"kafka.internal", "localhost"}
    renewed = files.server_pem.read_bytes()
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=tls.SERVER_DAYS - 10)
    tls.ensure_tls(load_settings(), now=later)
    assert files.ca_cert.read_bytes() == ca and files.server_pem.read_bytes() != renewed


def test_the_keystore_password_must_have_been_generated(secured):
    secured.delenv("LAKEBUS_TLS_KEYSTORE_PASSWORD")
    with pytest.raises(Exception, match="LAKEBUS_TLS_KEYSTORE_PASSWORD is not set"):
        tls.ensure_tls(load_settings())


def test_up_generates_the_keystore_password_only_for_the_secured_profile(clean_env):
    from lakebus_dagster.stack.secrets import create_local_secrets

    clean_env.setattr(os, "environ", dict(os.environ))
    clean_env.delenv("LAKEBUS_TLS_KEYSTORE_PASSWORD", raising=False)
    create_local_secrets(load_settings())
    assert "LAKEBUS_TLS_KEYSTORE_PASSWORD" not in os.environ
    clean_env.setenv("LAKEBUS_PROFILE", "secured")
    secured_settings = load_settings()
    create_local_secrets(secured_settings)
    assert len(os.environ["LAKEBUS_TLS_KEYSTORE_PASSWORD"]) > 20


# -- the settings ---------------------------------------------------------------------------------
def test_the_secured_profile_defaults_to_tls_against_its_own_ca(secured):
    settings = load_settings()
    ca = str(settings.state_dir / "tls" / "ca.crt")
    assert (settings.kafka.security_protocol, settings.kafka.ssl_ca_location) == ("SASL_SSL", ca)
    assert settings.connect.urls == ("https://127.0.0.1:8083",) and settings.connect.verify() == ca


def test_the_other_profiles_keep_plaintext_and_the_system_cas(clean_env):
    for profile in ("single", "cluster"):
        clean_env.setenv("LAKEBUS_PROFILE", profile)
        settings = load_settings()
        assert settings.kafka.security_protocol == "PLAINTEXT" and settings.kafka.ssl_ca_location is None
        assert all(url.startswith("http://") for url in settings.connect.urls) and settings.connect.verify() is True
        assert "ssl.ca.location" not in settings.kafka.client_config()


def test_the_ca_settings_override_the_profiles_and_connect_falls_back_to_kafkas(secured, tmp_path):
    kafka_ca, connect_ca = tmp_path / "kafka-ca.pem", tmp_path / "connect-ca.pem"
    kafka_ca.write_text("x")
    secured.setenv("LAKEBUS_KAFKA_SSL_CA_LOCATION", str(kafka_ca))
    secured.setenv("LAKEBUS_KAFKA_SASL_PASSWORD", "pw")
    settings = load_settings()
    assert settings.kafka.client_config()["ssl.ca.location"] == str(kafka_ca)
    assert settings.connect.ca_location == str(kafka_ca)  # one private CA often signs both
    secured.setenv("LAKEBUS_CONNECT_CA_LOCATION", str(connect_ca))
    assert load_settings().connect.verify() == str(connect_ca)
    assert load_settings().kafka.ssl_ca_location == str(kafka_ca)


def test_the_ca_reaches_the_kafka_and_connect_resources(secured, tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    secured.setenv("LAKEBUS_KAFKA_SSL_CA_LOCATION", str(ca))
    resources = build_resources(load_settings())
    assert resources["kafka"].ssl_ca_location == resources["operations"].ssl_ca_location == str(ca)
    assert resources["connect"].ca_location == str(ca)
    assert resources["connect"].client().verify == str(ca)


def test_a_plaintext_protocol_never_gets_the_ca(clean_env, tmp_path):
    clean_env.setenv("LAKEBUS_KAFKA_SSL_CA_LOCATION", str(tmp_path / "absent.pem"))
    assert "ssl.ca.location" not in load_settings().kafka.client_config()


def test_a_missing_ca_file_names_the_setting(secured, tmp_path):
    with pytest.raises(KafkaConfigError, match="is not a file") as raised:
        client_config("b:9093", security_protocol="SSL", ssl_ca_location=str(tmp_path / "absent.pem"))
    assert raised.value.field == "ssl_ca_location"
    secured.setenv("LAKEBUS_KAFKA_SASL_PASSWORD", "pw")
    secured.setenv("LAKEBUS_KAFKA_SSL_CA_LOCATION", str(tmp_path / "absent.pem"))
    with pytest.raises(SettingsError, match="^LAKEBUS_KAFKA_SSL_CA_LOCATION=.*absent.pem.*is not a file; point it at"):
        load_settings().kafka.client_config()


# -- a failed handshake names the setting ---------------------------------------------------------
def test_a_tls_refusal_names_the_ca_setting_not_the_login():
    config = {"bootstrap.servers": "b:9093", "security.protocol": "SASL_SSL", "ssl.ca.location": "/ca.pem",
              "sasl.username": "lakebus", "sasl.mechanism": "SCRAM-SHA-512"}
    tls_message = login_failure_message(config, f"{TLS_REFUSAL}: certificate verify failed")
    assert "LAKEBUS_KAFKA_SSL_CA_LOCATION" in tls_message and "ssl.ca.location=/ca.pem" in tls_message
    assert "PASSWORD" not in tls_message
    assert "LAKEBUS_KAFKA_SASL_PASSWORD" in login_failure_message(config, "SASL authentication error")


class _Ok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        body = b'{"version": "3.9.2"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - stdlib signature
        pass


@contextmanager
def _https(server_pem: Path) -> Iterator[str]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(server_pem)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_connect_client_verifies_the_workers_certificate_and_names_the_ca_setting(secured, tmp_path):
    files = tls.ensure_tls(load_settings())
    secured.setenv("LAKEBUS_STATE_DIR", str(tmp_path / "other-stack"))
    other = tls.ensure_tls(load_settings())  # another CA, which did not sign the server's certificate
    with _https(files.server_pem) as url:
        with ConnectClient(url, verify=str(files.ca_cert), retries=0) as client:
            assert client.server_info() == {"version": "3.9.2"}
        with ConnectClient(url, verify=str(other.ca_cert), retries=0) as client:
            with pytest.raises(ConnectUnavailable, match="TLS handshake failed.*check LAKEBUS_CONNECT_CA_LOCATION"):
                client.server_info()
