"""The secured profile's TLS material: a CA of the stack's own and a server certificate signed by it.

``stack up`` makes the CA once and keeps it in ``<state>/tls`` (:func:`lakebus_dagster.settings.local_ca_file`
names its certificate, which every client of the secured profile verifies against: lakebus's librdkafka
clients, the Connect worker's clients and lakebus's Connect REST client). The server certificate names
``localhost``, ``127.0.0.1`` and ``LAKEBUS_HOST``; it is made again when it lacks one of them, nears its
end, or no longer chains to the CA. Private keys are written with mode 0600.

The files, and who reads them:

* ``ca.crt``: the CA certificate (PEM): the brokers' and the worker's truststore (``ssl.truststore.type=PEM``),
  librdkafka's ``ssl.ca.location``, the Connect REST client's ``verify``;
* ``ca.key``: the CA's key (PEM, 0600): only this module, to sign the server certificate;
* ``server.pem``: the server's key (unencrypted PKCS#8) then its certificate and the CA's (0600): the
  brokers' keystore (``ssl.keystore.type=PEM``; Kafka takes an unencrypted key from a PEM file without
  ``ssl.key.password``, and cannot read a PBES2-encrypted one on Java 17);
* ``connect-rest.p12``: the same key and chain as PKCS#12 (0600) for Connect's REST listener, whose
  Jetty reads no PEM keystore; its password is generated into ``secrets.env``
  (:data:`~lakebus_dagster.secret_env.TLS_KEYSTORE_PASSWORD_VAR`).

Why generated here and not shipped: a certificate in the repository would be the same for every
checkout, its key public; why :mod:`cryptography` and not keytool: keytool writes no PEM key.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from lakebus_dagster.secret_env import TLS_KEYSTORE_PASSWORD_VAR
from lakebus_dagster.settings import TLS_DIR_NAME, Settings, local_ca_file
from lakebus_dagster.stack.errors import StackError
from lakebus_dagster.stack.service import write_file

__all__ = ["TlsFiles", "ensure_tls", "server_names", "tls_files"]

CA_NAME = "lakebus local stack CA"
CA_DAYS = 3650
#: under Apple's and the browsers' 398 days; renewed by ``up`` 30 days before the end
SERVER_DAYS = 397
RENEW_BEFORE = datetime.timedelta(days=30)


@dataclass(frozen=True)
class TlsFiles:
    ca_cert: Path
    ca_key: Path
    server_pem: Path
    rest_keystore: Path


def tls_files(settings: Settings) -> TlsFiles:
    tls_dir = settings.state_dir / TLS_DIR_NAME
    return TlsFiles(ca_cert=local_ca_file(settings.state_dir), ca_key=tls_dir / "ca.key",
                    server_pem=tls_dir / "server.pem", rest_keystore=tls_dir / "connect-rest.p12")


def server_names(host: str) -> tuple[list[str], list[str]]:
    """(DNS names, IP addresses) the server certificate names: localhost, 127.0.0.1 and ``host``."""
    dns, ips = ["localhost"], ["127.0.0.1"]
    try:
        ipaddress.ip_address(host.strip("[]"))
        ips.append(host.strip("[]"))
    except ValueError:
        dns.append(host)
    return sorted(set(dns)), sorted(set(ips))


def ensure_tls(settings: Settings, now: datetime.datetime | None = None) -> TlsFiles:
    """Make the CA unless it exists, and the server certificate unless a valid one for these names
    exists; returns the files. Needs :data:`TLS_KEYSTORE_PASSWORD_VAR` in the environment (``up``
    generates it into ``secrets.env`` first)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    password = os.environ.get(TLS_KEYSTORE_PASSWORD_VAR, "")
    if not password:
        raise StackError(f"secured profile: {TLS_KEYSTORE_PASSWORD_VAR} is not set (it is generated into secrets.env by `stack up`)")
    now = now or datetime.datetime.now(datetime.timezone.utc)
    files = tls_files(settings)
    files.ca_cert.parent.mkdir(parents=True, exist_ok=True)
    files.ca_cert.parent.chmod(0o700)
    if not (files.ca_cert.exists() and files.ca_key.exists()):
        _write_ca(files, now)
    ca_cert = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
    if not (_server_current(files, ca_cert, server_names(settings.host), now) and files.rest_keystore.exists()):
        _write_server(files, ca_cert, ca_key, server_names(settings.host), password.encode(), now)
    return files


def _write_ca(files: TlsFiles, now: datetime.datetime) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME)])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    write_file(files.ca_key, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()).decode(), mode=0o600)
    write_file(files.ca_cert, cert.public_bytes(serialization.Encoding.PEM).decode())
    # a new CA: the old server certificate no longer chains to it
    files.server_pem.unlink(missing_ok=True)


def _server_current(files: TlsFiles, ca_cert, names: tuple[list[str], list[str]], now: datetime.datetime) -> bool:
    from cryptography import x509

    if not files.server_pem.exists():
        return False
    try:
        cert = x509.load_pem_x509_certificate(files.server_pem.read_bytes().split(b"-----END PRIVATE KEY-----", 1)[1])
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, IndexError, x509.ExtensionNotFound):
        return False
    dns, ips = names
    have_ips = {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
    return (cert.issuer == ca_cert.subject and set(dns) <= set(san.get_values_for_type(x509.DNSName))
            and set(ips) <= have_ips and cert.not_valid_after_utc - RENEW_BEFORE > now)


def _write_server(files: TlsFiles, ca_cert, ca_key, names: tuple[list[str], list[str]], password: bytes,
                  now: datetime.datetime) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    dns, ips = names
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=SERVER_DAYS))
            .add_extension(x509.SubjectAlternativeName([*(x509.DNSName(d) for d in dns),
                                                        *(x509.IPAddress(ipaddress.ip_address(i)) for i in ips)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    chain = cert.public_bytes(serialization.Encoding.PEM) + ca_cert.public_bytes(serialization.Encoding.PEM)
    write_file(files.server_pem, (pem_key + chain).decode(), mode=0o600)
    p12 = pkcs12.serialize_key_and_certificates(b"connect-rest", key, cert, [ca_cert],
                                                serialization.BestAvailableEncryption(password))
    files.rest_keystore.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(files.rest_keystore, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(p12)
    files.rest_keystore.chmod(0o600)
