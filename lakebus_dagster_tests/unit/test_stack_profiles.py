"""The local stack's profiles: what the ``cluster`` profile generates (3 KRaft brokers in one
quorum, 2 workers in one Connect cluster, replication 3 / min ISR 2) and that ``single`` is unchanged.

The cluster itself runs in the ``cluster`` stage of ``make test`` (integration/test_cluster_failover.py);
these tests pin the generated configuration, which a live run would only show as a hang."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakebus_dagster.settings import SettingsError
from lakebus_dagster.stack.local_settings import load_stack_settings as load_settings
from lakebus_dagster.stack.engine import prerequisites
from lakebus_dagster.stack.services import build_services, profile_service_names


def _props(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


@pytest.fixture
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("LAKEBUS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("LAKEBUS_S3_ACCESS_KEY_ID", "unit-access")
    monkeypatch.setenv("LAKEBUS_S3_SECRET_ACCESS_KEY", "unit-secret")
    for var in ("LAKEBUS_PROFILE", "LAKEBUS_TOPIC_REPLICATION_FACTOR", "LAKEBUS_TOPIC_MIN_INSYNC_REPLICAS",
                "LAKEBUS_KAFKA_BOOTSTRAP", "LAKEBUS_CONNECT_PROTOCOL", "LAKEBUS_POSTGRES", "LAKEBUS_POSTGRES_PORT",
                "LAKEBUS_KAFKA_SSL_CA_LOCATION", "LAKEBUS_CONNECT_CA_LOCATION", "LAKEBUS_CONNECT_URL", "LAKEBUS_HOST",
                "LAKEBUS_KAFKA_SECURITY_PROTOCOL"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def _services(tmp_path: Path):
    settings = load_settings()
    services = build_services(settings, tmp_path / "jars", "java")
    for svc in services:
        if svc.name.startswith("kafka"):
            # a formatted log dir: prepare() then only writes the config (formatting needs the jars)
            log_dir = settings.data_dir / ("kafka" if svc.name == "kafka" else svc.name)
            log_dir.mkdir(parents=True, exist_ok=True)
            (log_dir / "meta.properties").write_text("version=1\n")
        if svc.prepare and not svc.name.startswith("spark"):
            svc.prepare()
    return settings, services


def test_single_profile_is_one_of_each(env, tmp_path):
    settings, services = _services(tmp_path)

    assert [s.name for s in services] == profile_service_names(settings) == [
        "s3", "kafka", "rest-catalog", "connect", "spark-master", "spark-worker", "spark-connect"]
    assert settings.kafka.bootstrap_servers == "127.0.0.1:19092"
    assert settings.state_dir.name == "state"
    broker = _props(settings.run_dir / "kafka-server.properties")
    assert broker["controller.quorum.voters"] == "1@127.0.0.1:19093"
    assert (broker["default.replication.factor"], broker["min.insync.replicas"]) == ("1", "1")
    assert (settings.bus.replication_factor, settings.bus.min_insync_replicas) == (1, None)
    # each service starts once what it depends on is healthy: the Spark chain beside the ingest's
    assert prerequisites(services) == {
        "s3": set(), "kafka": set(), "rest-catalog": {"s3"}, "connect": {"kafka", "s3", "rest-catalog"},
        "spark-master": set(), "spark-worker": {"spark-master"},
        "spark-connect": {"s3", "rest-catalog", "spark-master", "spark-worker"}}


def test_cluster_profile_runs_three_brokers_in_one_quorum_and_two_workers(env, tmp_path):
    env.setenv("LAKEBUS_PROFILE", "cluster")
    settings, services = _services(tmp_path)

    assert [s.name for s in services] == [
        "s3", "kafka", "kafka-2", "kafka-3", "rest-catalog", "connect", "connect-2", "spark-master", "spark-worker", "spark-connect"]
    assert settings.kafka.bootstrap_servers == "127.0.0.1:19092,127.0.0.1:19102,127.0.0.1:19112"
    voters = "1@127.0.0.1:19093,2@127.0.0.1:19103,3@127.0.0.1:19113"
    for node, suffix in ((1, ""), (2, "-2"), (3, "-3")):
        props = _props(settings.run_dir / f"kafka-server{suffix}.properties")
        assert props["node.id"] == str(node)
        assert props["controller.quorum.voters"] == voters
        assert props["listeners"] == f"PLAINTEXT://127.0.0.1:{19082 + 10 * node},CONTROLLER://127.0.0.1:{19083 + 10 * node}"
        assert props["log.dirs"].endswith(f"kafka{suffix}")
        for key, value in {"default.replication.factor": "3", "min.insync.replicas": "2",
                           "offsets.topic.replication.factor": "3", "transaction.state.log.replication.factor": "3",
                           "transaction.state.log.min.isr": "2"}.items():
            assert props[key] == value, key
    # the brokers start together (broker 1 alone can never elect a controller), and so do the workers
    needs = prerequisites(services)
    assert needs["kafka"] == needs["kafka-2"] == needs["kafka-3"] == set()
    assert needs["connect"] == needs["connect-2"] == {"kafka", "kafka-2", "kafka-3", "s3", "rest-catalog"}

    for port, suffix in ((8083, ""), (8093, "-2")):
        worker = _props(settings.run_dir / f"connect-distributed{suffix}.properties")
        assert worker["group.id"] == "lakebus-connect"  # one Connect cluster
        assert worker["listeners"] == f"http://127.0.0.1:{port}"
        assert worker["bootstrap.servers"] == settings.kafka.bootstrap_servers
        assert {worker[f"{t}.storage.replication.factor"] for t in ("config", "offset", "status")} == {"3"}
        assert worker["scheduled.rebalance.max.delay.ms"] == "0"
        assert worker["connect.protocol"] == "sessioned"  # Kafka's default, written out
    assert settings.connect.urls[0] == "http://127.0.0.1:8083"
    assert (settings.bus.replication_factor, settings.bus.min_insync_replicas) == (3, 2)


def test_the_workers_rebalance_protocol_is_a_checked_setting(env, tmp_path):
    """LAKEBUS_CONNECT_PROTOCOL=eager reaches every worker's properties (issue 29.2's comparison);
    anything else is refused naming the variable."""
    from lakebus_dagster.envvars import SettingsError

    env.setenv("LAKEBUS_PROFILE", "cluster")
    env.setenv("LAKEBUS_CONNECT_PROTOCOL", "eager")
    settings, _ = _services(tmp_path)
    for suffix in ("", "-2"):
        assert _props(settings.run_dir / f"connect-distributed{suffix}.properties")["connect.protocol"] == "eager"
    env.setenv("LAKEBUS_CONNECT_PROTOCOL", "cooperative")
    with pytest.raises(SettingsError, match="LAKEBUS_CONNECT_PROTOCOL"):
        _services(tmp_path)


def test_cluster_profile_keeps_its_own_state_dir(env, tmp_path):
    env.delenv("LAKEBUS_STATE_DIR")
    env.setenv("LAKEBUS_PROFILE", "cluster")
    assert load_settings().state_dir.name == ".lakebus-cluster"
    env.delenv("LAKEBUS_PROFILE")
    assert load_settings().state_dir.name == ".lakebus"


def test_the_bus_layout_follows_the_profile(env):
    from lakebus_dagster.defs.environment import build_resources

    env.setenv("LAKEBUS_PROFILE", "cluster")
    layout = build_resources()["layout"].layout()
    topics = [layout.bus_topic, layout.control_topic, layout.dlq_topic, layout.state_topic,
              layout.replay_ledger_topic, layout.offset_ledger_topic]
    assert {(t.replication_factor, t.configs.get("min.insync.replicas")) for t in topics} == {(3, "2")}
    assert layout.control_topic.partitions == 1


def test_the_connect_resource_knows_every_worker_of_the_cluster(env):
    """Issue 19: with only worker 1's URL, killing worker 1 made Connect look unreachable although
    worker 2 served the cluster; the cluster profile's default names both workers."""
    from lakebus_dagster.defs.environment import build_resources

    env.delenv("LAKEBUS_CONNECT_URL", raising=False)
    env.setenv("LAKEBUS_PROFILE", "cluster")
    settings = load_settings()
    assert settings.connect.urls == ("http://127.0.0.1:8083", "http://127.0.0.1:8093")
    assert settings.connect.urls[0] == "http://127.0.0.1:8083"  # one address, for raw HTTP calls
    assert build_resources()["connect"].urls == settings.connect.urls

    env.setenv("LAKEBUS_CONNECT_URL", "https://w1.prod:8083, https://w2.prod:8083/")
    assert load_settings().connect.urls == ("https://w1.prod:8083", "https://w2.prod:8083")
    assert build_resources()["connect"].client().urls == ("https://w1.prod:8083", "https://w2.prod:8083")

    env.setenv("LAKEBUS_CONNECT_URL", "https://w1.prod:8083,w2.prod:8083")
    with pytest.raises(SettingsError, match="LAKEBUS_CONNECT_URL.*'w2.prod:8083'"):
        load_settings()


@pytest.mark.parametrize(
    ("values", "named"),
    [({"LAKEBUS_PROFILE": "huge"}, "LAKEBUS_PROFILE"),
     ({"LAKEBUS_TOPIC_REPLICATION_FACTOR": "0"}, "LAKEBUS_TOPIC_REPLICATION_FACTOR"),
     ({"LAKEBUS_TOPIC_REPLICATION_FACTOR": "2", "LAKEBUS_TOPIC_MIN_INSYNC_REPLICAS": "3"}, "LAKEBUS_TOPIC_MIN_INSYNC_REPLICAS")],
)
def test_bad_profile_settings_name_the_variable(env, values, named):
    for key, value in values.items():
        env.setenv(key, value)
    with pytest.raises(SettingsError, match=named):
        load_settings()


def test_secured_profile_keeps_every_password_out_of_configs_it_can(env, tmp_path):
    """SASL/SCRAM + ACLs on the broker, basic auth on Connect's REST API; the worker's config holds
    only ``${env:…}`` placeholders, and the files that must hold a password (the broker's, the REST
    extension's user file) are readable by their owner only."""
    import os
    import stat

    from lakebus_dagster.stack.secrets import create_local_secrets
    from lakebus_dagster.stack.security import ACLS
    from lakebus_dagster.stack.tls import ensure_tls

    env.setattr(os, "environ", dict(os.environ))  # the generated secrets are exported: into a copy, dropped after
    env.setenv("LAKEBUS_PROFILE", "secured")
    for var in ("LAKEBUS_KAFKA_SASL_PASSWORD", "LAKEBUS_CONNECT_PASSWORD", "LAKEBUS_CONNECT_KAFKA_PASSWORD",
                "LAKEBUS_PRODUCER_KAFKA_PASSWORD", "LAKEBUS_CATALOG_CREDENTIAL", "LAKEBUS_TLS_KEYSTORE_PASSWORD"):
        env.delenv(var, raising=False)
    settings = load_settings()
    create_local_secrets(settings)
    assert stat.S_IMODE(settings.secrets_file.stat().st_mode) == 0o600
    tls = ensure_tls(settings)  # what `up` does after the secrets (stack/manager.py)
    settings, services = _services(tmp_path)
    assert settings.state_dir.name == "state" and [s.name for s in services][:5] == [
        "s3", "kafka", "rest-catalog", "catalog-gate", "connect"]
    assert settings.kafka.client_config()["security.protocol"] == "SASL_SSL"
    assert settings.kafka.client_config()["ssl.ca.location"] == str(tls.ca_cert) == str(settings.state_dir / "tls" / "ca.crt")
    assert settings.kafka.client_config()["sasl.username"] == "lakebus"
    assert settings.connect.auth() == ("lakebus", os.environ["LAKEBUS_CONNECT_PASSWORD"])
    assert settings.connect.urls == ("https://127.0.0.1:8083",) and settings.connect.verify() == str(tls.ca_cert)

    broker_file = settings.run_dir / "kafka-server.properties"
    broker = _props(broker_file)
    assert broker["listeners"].startswith("SASL_SSL://") and "CONTROLLER://" in broker["listeners"]
    assert broker["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL"
    assert (broker["ssl.keystore.type"], broker["ssl.keystore.location"]) == ("PEM", str(tls.server_pem))
    assert (broker["ssl.truststore.type"], broker["ssl.truststore.location"]) == ("PEM", str(tls.ca_cert))
    assert "ssl.key.password" not in broker and "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config" in broker
    assert {stat.S_IMODE(p.stat().st_mode) for p in (tls.ca_key, tls.server_pem, tls.rest_keystore)} == {0o600}
    assert broker["allow.everyone.if.no.acl.found"] == "false"
    assert broker["super.users"] == "User:broker;User:ANONYMOUS"  # the broker's own login, never a lakebus run's
    assert stat.S_IMODE(broker_file.stat().st_mode) == 0o600

    worker_file = settings.run_dir / "connect-distributed.properties"
    worker = worker_file.read_text()
    for prefix in ("", "producer.", "consumer.", "admin."):
        assert f'{prefix}sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="connect" ' \
               'password="${env:LAKEBUS_CONNECT_KAFKA_PASSWORD}";' in worker
        assert f"{prefix}security.protocol=SASL_SSL" in worker and f"{prefix}ssl.truststore.type=PEM" in worker
        assert f"{prefix}ssl.truststore.location={tls.ca_cert}" in worker
    secrets = [os.environ[v] for v in ("LAKEBUS_KAFKA_SASL_PASSWORD", "LAKEBUS_CONNECT_PASSWORD",
                                       "LAKEBUS_CONNECT_KAFKA_PASSWORD", "LAKEBUS_PRODUCER_KAFKA_PASSWORD")]
    # REST over https with the stack's certificate; the keystore's password a placeholder, like the others
    assert "listeners=https://127.0.0.1:8083" in worker
    assert f"listeners.https.ssl.keystore.location={tls.rest_keystore}" in worker
    assert "listeners.https.ssl.keystore.password=${env:LAKEBUS_TLS_KEYSTORE_PASSWORD}" in worker
    secrets.append(os.environ["LAKEBUS_TLS_KEYSTORE_PASSWORD"])
    assert not [s for s in secrets if s in worker]
    assert "rest.extension.classes=io.lakebus.connect.rest.BasicAuthRestExtension" in worker
    users = settings.run_dir / "connect-rest-users.properties"
    assert stat.S_IMODE(users.stat().st_mode) == 0o600
    connect = next(s for s in services if s.name == "connect")
    assert f"-Djava.security.auth.login.config={settings.run_dir / 'connect-rest-jaas.conf'}" in connect.jvm_props

    # the catalog behind the gate (a Python service on the catalog's port, the fixture on the next one),
    # with a generated client credential that reaches the worker's environment, not its file
    by_name = {s.name: s for s in services}
    gate, fixture = by_name["catalog-gate"], by_name["rest-catalog"]
    assert (gate.port, fixture.port) == (settings.ports.rest_catalog, settings.ports.rest_catalog + 1)
    assert gate.python_module and gate.main_class == "lakebus_dagster.stack.catalog_gate"
    assert gate.args[gate.args.index("--upstream") + 1] == f"http://{settings.host}:{fixture.port}"
    assert gate.args[gate.args.index("--scope") + 1] == "lakebus"
    credential = os.environ["LAKEBUS_CATALOG_CREDENTIAL"]
    assert ":" in credential and len(credential) > 30 and f"LAKEBUS_CATALOG_CREDENTIAL={credential}" in settings.secrets_file.read_text()
    assert connect.env["LAKEBUS_CATALOG_CREDENTIAL"] == credential and credential not in worker
    assert {"catalog-gate", "rest-catalog"} <= prerequisites(services)["connect"]
    assert "catalog-gate" in prerequisites(services)["spark-connect"]
    # the Spark Connect server's file holds the credential: its owner's only
    jars = tmp_path / "jars" / "spark"
    jars.mkdir(parents=True)
    (jars / "iceberg.jar").write_text("")
    spark_connect = build_services(settings, tmp_path / "jars", "java")[-1]
    spark_connect.prepare()
    conf_file = settings.run_dir / "spark-connect.conf"
    assert _props(conf_file)["spark.sql.catalog.lake.credential"] == credential
    assert _props(conf_file)["spark.sql.catalog.lake.scope"] == "lakebus"
    assert stat.S_IMODE(conf_file.stat().st_mode) == 0o600

    # the producer may only write the bus topic (literal: not events.ledger); the sink's principal gets no
    # cluster-wide or wildcard rights
    assert ACLS["producer"] == [("TOPIC", "LITERAL", "events", ("WRITE", "DESCRIBE"))]
    assert not [r for r in ACLS["connect"] if r[0] == "CLUSTER" or r[2] in ("*", "")]


def test_single_profile_has_no_authentication(env, tmp_path):
    settings, _ = _services(tmp_path)
    assert settings.kafka.client_config() == {"bootstrap.servers": "127.0.0.1:19092", "security.protocol": "PLAINTEXT"}
    assert settings.connect.auth() is None
    assert "sasl" not in (settings.run_dir / "kafka-server.properties").read_text()


def test_the_service_table_is_the_one_start_order():
    """Issue 22: one table orders the services; every spec comes after what it depends on."""
    from dataclasses import replace

    from lakebus_dagster.stack.services import SERVICE_NAMES, TABLE
    from lakebus_dagster.stack.spec import check_order

    assert SERVICE_NAMES == ("s3", "postgres", "kafka", "kafka-2", "kafka-3", "rest-catalog", "catalog-gate", "connect",
                             "connect-2", "spark-master", "spark-worker", "spark-connect")
    assert [spec.name for spec in TABLE] == ["s3", "postgres", "kafka", "rest-catalog", "catalog-gate", "connect", "spark-master",
                                             "spark-worker", "spark-connect"]
    s3, _postgres, broker, catalog, *rest = TABLE
    with pytest.raises(ValueError, match="'rest-catalog' depends on s3"):
        check_order((broker, catalog, s3, *rest))
    with pytest.raises(ValueError, match="'kafka' twice"):
        check_order((s3, broker, replace(broker, depends_on=())))
