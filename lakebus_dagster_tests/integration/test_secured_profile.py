"""The secured profile (``LAKEBUS_PROFILE=secured``): Kafka with SASL/SCRAM over TLS and ACLs, Connect's
REST API over https behind basic auth (both with the certificate of the stack's own CA, which every client
verifies), the Iceberg REST catalog behind OAuth2 (the catalog gate, a local stand-in
for a production catalog's auth), every password and the catalog's client credential only in the
environment (generated into ``secrets.env``).

Proven against the real services: provisioning (as the operations principal ``lakebus-ops``), the
sink (its catalog credential a ``${env:…}`` placeholder), pyiceberg, the Spark Connect server, the
status sensor (Dagster's tick evaluation), the connector report and the offset ledger (as the observer
``lakebus``) work with lakebus's credentials; a producer principal writes the bus and nothing else (not
the ledger's ``<bus>.ledger``); the observer creates and deletes no topic and does not write the bus;
a wrong password, a wrong catalog secret, an anonymous REST call and an anonymous catalog request
are refused with a clear error; so are a plaintext Kafka client, a client trusting another CA (the
error naming LAKEBUS_KAFKA_SSL_CA_LOCATION or LAKEBUS_CONNECT_CA_LOCATION) and plain http to Connect; no secret is in a run's event log, the stored connector config or a
service log.

Runs in the ``secured`` stage of ``make test`` (marker ``secured``); the stage starts that profile.
"""

from __future__ import annotations

import datetime
import os
import time
from pathlib import Path

import dagster as dg
import pytest
import requests
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from lakebus_dagster.connect import ConnectClient, ConnectUnavailable
from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.alerts import AlertResource
from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import BusLayoutResource, ConnectResource, KafkaResource
from lakebus_dagster.events import Bet
from lakebus_dagster.events.envelope import EnvelopeEncoder
from lakebus_dagster.lake.catalog import CatalogAuthError, LakeEndpoints, load_catalog, open_catalog
from lakebus_dagster.lake.spark import attach
from lakebus_dagster.stack.secrets import PRODUCER_KAFKA_PASSWORD_VAR
from lakebus_dagster.kafka.acls import OBSERVER, OPERATIONS
from lakebus_dagster.kafka.clients import KafkaClients
from lakebus_dagster.stack.security import PRINCIPALS, ensure_acls

from .helpers import TEST_COMMIT_INTERVAL_MS, committed_rows, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.secured]

N = 40


@pytest.fixture
def secured(stack):
    if not stack.secured:
        pytest.fail("these tests need the secured profile: LAKEBUS_PROFILE=secured (make test runs them in its secured stage)")
    return stack


def _secrets() -> dict[str, str]:
    names = [*PRINCIPALS.values(), "LAKEBUS_CONNECT_PASSWORD", "LAKEBUS_S3_SECRET_ACCESS_KEY", "LAKEBUS_CATALOG_CREDENTIAL"]
    values = {name: os.environ[name] for name in names}
    values["the catalog's client secret"] = os.environ["LAKEBUS_CATALOG_CREDENTIAL"].split(":", 1)[1]
    assert all(len(v) >= 16 for v in values.values())  # generated, long enough not to match by accident
    return values


def _as_producer(settings) -> dict[str, str]:
    return {"bootstrap.servers": settings.kafka.bootstrap_servers, "security.protocol": "SASL_SSL",
            "ssl.ca.location": settings.kafka.ssl_ca_location, "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "producer",
            "sasl.password": os.environ[PRODUCER_KAFKA_PASSWORD_VAR]}


def _other_ca(directory: Path) -> Path:
    """A throwaway CA's certificate (PEM), which signed nothing the stack serves."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "not the stack's CA")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True).sign(key, hashes.SHA256()))
    path = directory / "other-ca.crt"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _bets(n: int) -> list[Bet]:
    return [Bet(category="biz", event="bet", log_date="2025-11-26", hour="11", plat_id=1, app_id=2, ts=1764154800000 + i,
                schema_version=1, user_id=300 + i % 5, order_id=f"sec{i}", amount=2.5, currency="BRL", game_id=9)
            for i in range(n)]


def _first_error(consumer: Consumer, deadline_s: float = 30.0) -> KafkaError | None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is not None and msg.error().code() != KafkaError._PARTITION_EOF:
            return msg.error()
        if msg is not None and msg.error() is None:
            return None  # a record was read: the ACLs let it through
    return None


def _refusal(error: KafkaError | KafkaException | None) -> str:
    """The Kafka error code's name of a refusal, or "ALLOWED"."""
    if isinstance(error, KafkaException):
        error = error.args[0]
    return "ALLOWED" if error is None else error.name()


def _produce_refusal(config: dict, topic: str) -> str:
    errors: list = []
    producer = Producer({**config, "acks": "all", "message.timeout.ms": 20000})
    # keyed: the ledger topic is compacted (an unkeyed record would be refused for that, not for the ACL)
    producer.produce(topic, key=b"not-mine", value=b"not mine", on_delivery=lambda e, m: errors.append(e))
    producer.flush(30)
    return _refusal(errors[0] if errors else KafkaError(KafkaError._MSG_TIMED_OUT))


def _admin_refusal(future) -> str:
    try:
        future.result(timeout=30)
    except KafkaException as exc:
        return _refusal(exc)
    return "ALLOWED"


def _confinement(secured, resources, layout) -> dict[str, str]:
    """Each role's forbidden action -> how Kafka answered (a refusal's code name, or ALLOWED)."""
    observer = secured.kafka.client_config()  # what resources["kafka"] logs in as (its password is an EnvVar here)
    assert observer["sasl.username"] == resources["kafka"].sasl_username == OBSERVER
    admin = AdminClient(observer)
    made = NewTopic(f"{layout.bus_topic.name}-observer-made", 1, 1)
    found = {
        "observer creates a topic": _admin_refusal(admin.create_topics([made], operation_timeout=20)[made.topic]),
        "observer writes the bus": _produce_refusal(observer, layout.bus_topic.name),
        "producer writes the ledger": _produce_refusal(_as_producer(secured), layout.offset_ledger_topic.name),
    }
    # last: were it allowed, the bus would be gone
    found["observer deletes the bus"] = _admin_refusal(
        admin.delete_topics([layout.bus_topic.name], operation_timeout=20)[layout.bus_topic.name])
    return found


def test_lakebus_works_secured_and_principals_stay_confined(secured, run_id, webhook):
    url, received = webhook
    layout_resource = BusLayoutResource(name_suffix=run_id, commit_interval_ms=TEST_COMMIT_INTERVAL_MS)
    resources = {**build_resources(), "layout": layout_resource,
                 "alerts": AlertResource(sink="webhook", webhook_url=url, body_format="generic"),
                 "monitoring_policy": MonitoringPolicyResource()}
    assert resources["kafka"].security_protocol == "SASL_SSL" and resources["connect"].username == "lakebus"
    # every client verifies the brokers and the workers against the stack's CA
    ca = str(secured.state_dir / "tls" / "ca.crt")
    assert resources["kafka"].ssl_ca_location == resources["operations"].ssl_ca_location == ca
    assert resources["connect"].ca_location == ca and secured.connect.urls[0].startswith("https://")
    # one principal per role: the observer by default, the operations principal only under its own key
    assert (resources["kafka"].sasl_username, resources["operations"].sasl_username) == (OBSERVER, OPERATIONS)
    layout = layout_resource.layout()
    bus, table = layout.bus_topic.name, layout.routes["bet"]
    # this run's bus gets its bus-specific (LITERAL) rules from the one declaration, as the platform grants a new bus's
    ensure_acls(secured, bus)
    instance = dg.DagsterInstance.ephemeral()

    provisioned = defs.resolve_job_def("provision_lakebus").execute_in_process(resources=resources, instance=instance)
    assert provisioned.success  # as lakebus-ops: the observer may create no topic (below)

    # least privilege: the observer creates and deletes no topic and does not write the bus; a producer does
    # not write the ledger's verified points
    refused = _confinement(secured, resources, layout)
    assert refused == {"observer creates a topic": "TOPIC_AUTHORIZATION_FAILED",
                       "observer deletes the bus": "TOPIC_AUTHORIZATION_FAILED",
                       "observer writes the bus": "TOPIC_AUTHORIZATION_FAILED",
                       "producer writes the ledger": "TOPIC_AUTHORIZATION_FAILED"}, refused

    # the producer principal writes the bus ...
    encoder = EnvelopeEncoder()
    producer = Producer({**_as_producer(secured), "acks": "all", "enable.idempotence": True})
    errors: list = []
    for bet in _bets(N):
        producer.produce(bus, key=str(bet.user_id), value=encoder.encode(bet), on_delivery=lambda e, m: e and errors.append(e))
    assert producer.flush(30) == 0 and errors == []

    # ... and the sink, as principal `connect`, lands every record
    catalog = load_catalog(secured)
    with ConnectClient(secured.connect.urls[0], auth=secured.connect.auth(), verify=secured.connect.verify()) as client:
        def landed():
            failed = [t for t in client.status(layout.connector_name).tasks if t.state == "FAILED"]
            assert not failed, f"task FAILED: {failed[0].trace_summary}"
            return committed_rows(catalog, table) >= N

        wait_for(landed, f"{N} rows in {table}", 180)
        assert committed_rows(catalog, table) == N
        stored_config = client.get_config(layout.connector_name)

    # ... through the catalog gate: the sink, pyiceberg and the Spark Connect server all authenticated
    assert resources["iceberg"].catalog_credential and stored_config["iceberg.catalog.scope"] == "lakebus"
    spark = attach(secured.spark.remote)
    try:
        assert spark.sql(f"SELECT count(*) AS n FROM lake.{table}").collect()[0]["n"] == N
    finally:
        spark.stop()

    # ... but may neither read the bus nor write any other topic
    reader = Consumer({**_as_producer(secured), "group.id": f"producer-reads-{run_id}", "auto.offset.reset": "earliest"})
    reader.subscribe([bus])
    refused = _first_error(reader)
    reader.close()
    assert refused is not None and refused.code() in (KafkaError.GROUP_AUTHORIZATION_FAILED,
                                                      KafkaError.TOPIC_AUTHORIZATION_FAILED), refused
    # without a group's help either: a direct fetch is refused too (first on the group it names, or on the topic)
    assigned = Consumer({**_as_producer(secured), "group.id": f"producer-assigns-{run_id}"})
    assigned.assign([TopicPartition(bus, 0, 0)])
    refused = _first_error(assigned)
    assigned.close()
    assert refused is not None and refused.code() in (KafkaError.GROUP_AUTHORIZATION_FAILED,
                                                      KafkaError.TOPIC_AUTHORIZATION_FAILED), refused
    producer.produce(layout.dlq_topic.name, value=b"not mine", on_delivery=lambda e, m: errors.append(e))
    producer.flush(30)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]

    # the status sensor, ticked as the daemon ticks it, reads Connect and Kafka with the same credentials
    sensor = defs.resolve_sensor_def("connector_status_sensor")
    with dg.build_sensor_context(instance=instance, definitions=defs, sensor_name=sensor.name, resources=resources) as ctx:
        tick = sensor.evaluate_tick(ctx)
    assert tick.skip_message and tick.skip_message.startswith("no change"), tick.skip_message
    report = defs.resolve_job_def("connector_status_report").execute_in_process(resources=resources, instance=instance)
    assert report.success
    # the offset ledger, as the observer: reads the bus, the DLQ and the table, writes its verified point to <bus>.ledger
    ledger = defs.resolve_job_def("offset_ledger_job").execute_in_process(resources=resources, instance=instance)
    assert ledger.success
    checks = [e.event_specific_data for e in ledger.all_events if e.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION]
    assert checks and all(c.passed for c in checks), [c.description for c in checks]
    assert received == []

    # no secret in a run's event log, the stored connector config or any service's log
    secrets = _secrets()
    for run in (provisioned, report, ledger):
        text = "\n".join(str(entry) for entry in instance.all_logs(run.run_id))
        assert [n for n, v in secrets.items() if v in text] == [], f"secret in run {run.run_id}'s events"
    config_text = str(stored_config)
    assert [n for n, v in secrets.items() if v in config_text] == []
    assert "${env:LAKEBUS_S3_SECRET_ACCESS_KEY}" in config_text
    assert stored_config["iceberg.catalog.credential"] == "${env:LAKEBUS_CATALOG_CREDENTIAL}"
    for log in sorted(secured.logs_dir.glob("*.log")):
        text = log.read_text(errors="replace")
        assert [n for n, v in secrets.items() if v in text] == [], f"secret in {log}"

    with ConnectClient(secured.connect.urls[0], auth=secured.connect.auth(), verify=secured.connect.verify()) as client:
        client.delete(layout.connector_name)


def test_a_wrong_kafka_password_fails_the_run_naming_the_user(secured, run_id):
    wrong = "not-the-password-" + run_id
    kafka = KafkaResource(bootstrap_servers=secured.kafka.bootstrap_servers, security_protocol="SASL_SSL",
                          ssl_ca_location=secured.kafka.ssl_ca_location, sasl_mechanism="SCRAM-SHA-512",
                          sasl_username="lakebus", sasl_password=wrong)
    started = time.monotonic()
    result = defs.resolve_job_def("provision_lakebus").execute_in_process(
        resources={**build_resources(), "kafka": kafka, "layout": BusLayoutResource(name_suffix=run_id)}, raise_on_error=False)
    assert not result.success
    assert time.monotonic() - started < 60
    failure = next(e for e in result.all_events if e.is_failure)
    message = str(failure.event_specific_data.error)
    assert "refused the login of user 'lakebus'" in message and "SCRAM-SHA-512" in message, message
    assert "LAKEBUS_KAFKA_SASL_PASSWORD" in message and wrong not in message


def test_connect_rest_refuses_anonymous_and_wrong_credentials(secured, run_id):
    url, ca = secured.connect.urls[0], secured.connect.verify()
    assert requests.get(f"{url}/connectors", timeout=10, verify=ca).status_code == 401
    user, _ = secured.connect.auth()
    assert requests.get(f"{url}/connectors", auth=(user, "wrong"), timeout=10, verify=ca).status_code == 401
    assert requests.get(f"{url}/connectors", auth=secured.connect.auth(), timeout=10, verify=ca).status_code == 200
    # lakebus's REST extension (deploy/'s workers run it): the probes Strimzi and compose call without
    # credentials answer, every other path needs the login
    for path in ("/", "/health"):
        assert requests.get(f"{url}{path}", timeout=10, verify=ca).status_code == 200, path
    for path in ("/connector-plugins", "/admin/loggers", f"/connectors/lakebus-{run_id}/status", "/health/x", "/no-such-path"):
        assert requests.get(f"{url}{path}", timeout=10, verify=ca).status_code == 401, path

    # a job configured without the credentials says what is missing
    result = defs.resolve_job_def("provision_lakebus").execute_in_process(
        resources={**build_resources(), "connect": ConnectResource(url=url, ca_location=secured.connect.ca_location),
                   "layout": BusLayoutResource(name_suffix=run_id)}, raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    message = str(failure.event_specific_data.error)
    assert "HTTP 401" in message and "LAKEBUS_CONNECT_USERNAME" in message, message


def test_the_catalog_refuses_anonymous_requests(secured):
    """The catalog's port is the gate's: nothing reaches the catalog without a token, not even its config."""
    for path in ("/v1/config", "/v1/namespaces"):
        resp = requests.get(f"{secured.lake.catalog_uri}{path}", timeout=10)
        assert resp.status_code == 401, (path, resp.status_code)
        assert 'error="invalid_token"' in resp.headers["WWW-Authenticate"]
    made_up = requests.get(f"{secured.lake.catalog_uri}/v1/namespaces", headers={"Authorization": "Bearer made-up"}, timeout=10)
    assert made_up.status_code == 401


def test_a_wrong_catalog_secret_fails_in_one_line_naming_the_catalog(secured):
    client_id = os.environ["LAKEBUS_CATALOG_CREDENTIAL"].split(":", 1)[0]
    good = LakeEndpoints.local(secured)
    wrong = LakeEndpoints(good.catalog_uri, good.warehouse, good.s3_endpoint, good.region, good.access_key, good.secret_key,
                          credential=f"{client_id}:not-the-secret", scope=good.scope, oauth2_server_uri=good.oauth2_server_uri)
    with pytest.raises(CatalogAuthError) as caught:
        open_catalog(wrong, "lakebus")
    message = str(caught.value)
    assert message.startswith(f"Iceberg REST catalog 'lakebus' at {secured.lake.catalog_uri} refused lakebus"), message
    assert "invalid_client" in message and "LAKEBUS_CATALOG_CREDENTIAL" in message
    assert "\n" not in message and "not-the-secret" not in message


# -- TLS: the Kafka and Connect hops are encrypted, and only the stack's CA is trusted -------------------
def test_kafka_refuses_a_plaintext_client(secured):
    """The client listener speaks TLS only: a plaintext client (with or without a SASL login) gets no metadata."""
    from lakebus_dagster.kafka import refused_login

    login = {k: v for k, v in secured.kafka.client_config().items() if k != "ssl.ca.location"}
    for protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
        config = {**login, "security.protocol": protocol, "log_level": 0}
        if protocol == "PLAINTEXT":
            config = {k: v for k, v in config.items() if not k.startswith("sasl.")}
        with pytest.raises(KafkaException) as caught:
            AdminClient(config).list_topics(timeout=5)
        assert caught.value.args[0].code() == KafkaError._TRANSPORT, (protocol, caught.value)
        assert refused_login(config, timeout_s=3.0) is None  # no login was refused: nothing got that far
    # the same servers with lakebus's own settings answer
    assert AdminClient({**secured.kafka.client_config(), "log_level": 0}).list_topics(timeout=10).brokers


def test_a_kafka_client_trusting_another_ca_is_refused_naming_the_ca_setting(secured, run_id, tmp_path):
    other = str(_other_ca(tmp_path))
    config = {**secured.kafka.client_config(), "ssl.ca.location": other, "log_level": 0}
    with pytest.raises(KafkaException):
        AdminClient(config).list_topics(timeout=5)
    # a run whose Kafka resource trusts another CA fails at once, naming the setting to fix
    kafka = KafkaResource(bootstrap_servers=secured.kafka.bootstrap_servers, security_protocol="SASL_SSL", ssl_ca_location=other,
                          sasl_mechanism="SCRAM-SHA-512", sasl_username="lakebus",
                          sasl_password=os.environ["LAKEBUS_KAFKA_SASL_PASSWORD"])
    started = time.monotonic()
    result = defs.resolve_job_def("provision_lakebus").execute_in_process(
        resources={**build_resources(), "kafka": kafka, "layout": BusLayoutResource(name_suffix=run_id)}, raise_on_error=False)
    assert not result.success and time.monotonic() - started < 60
    message = str(next(e for e in result.all_events if e.is_failure).event_specific_data.error)
    assert "TLS handshake failed" in message and "certificate verify failed" in message, message
    assert "LAKEBUS_KAFKA_SSL_CA_LOCATION" in message and other in message
    assert os.environ["LAKEBUS_KAFKA_SASL_PASSWORD"] not in message


def test_connect_rest_is_https_only_and_verified_against_the_stacks_ca(secured, tmp_path):
    url = secured.connect.urls[0]
    assert url.startswith("https://")
    # plain http to the worker's port: no HTTP answer at all (its only listener is https)
    plain = url.replace("https://", "http://", 1)
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{plain}/", timeout=10)
    with ConnectClient(plain, auth=secured.connect.auth(), retries=0, timeout=10) as client:
        with pytest.raises(ConnectUnavailable):
            client.server_info()
    # the system's CAs do not know the stack's CA, nor does a throwaway one: the handshake fails, naming the setting
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"{url}/", timeout=10)
    with ConnectClient(url, auth=secured.connect.auth(), verify=str(_other_ca(tmp_path)), retries=0, timeout=10) as client:
        with pytest.raises(ConnectUnavailable, match="TLS handshake failed.*LAKEBUS_CONNECT_CA_LOCATION"):
            client.server_info()
    # the settings' CA: the worker answers
    with ConnectClient(url, auth=secured.connect.auth(), verify=secured.connect.verify(), retries=0, timeout=10) as client:
        assert client.server_info()["version"]


def test_the_sinks_dead_letter_queue_is_written_over_tls(secured, run_id):
    """Connect's DLQ producer (the worker's ``producer.`` settings) reaches the TLS listener too: a record
    the strict converter refuses lands in the DLQ, which the observer reads over TLS."""
    layout_resource = BusLayoutResource(name_suffix=f"{run_id}dlq", commit_interval_ms=TEST_COMMIT_INTERVAL_MS)
    resources = {**build_resources(), "layout": layout_resource}
    layout = layout_resource.layout()
    ensure_acls(secured, layout.bus_topic.name)
    assert defs.resolve_job_def("provision_lakebus").execute_in_process(resources=resources).success
    try:
        producer = Producer({**_as_producer(secured), "acks": "all"})
        producer.produce(layout.bus_topic.name, key=b"not-an-envelope", value=b"not json at all")
        assert producer.flush(30) == 0
        # the observer's login (resources["kafka"]'s password is an EnvVar, resolved only inside a run)
        reader = KafkaClients(secured.kafka.client_config()).consumer(f"lakebus-test-dlq-{run_id}")
        try:
            def dead_letters() -> int:
                low, high = reader.get_watermark_offsets(TopicPartition(layout.dlq_topic.name, 0), timeout=10)
                return high - low

            wait_for(lambda: dead_letters() >= 1, f"the refused record in {layout.dlq_topic.name}", 120)
        finally:
            reader.close()
    finally:
        with ConnectClient(secured.connect.urls[0], auth=secured.connect.auth(), verify=secured.connect.verify()) as client:
            client.delete(layout.connector_name)
