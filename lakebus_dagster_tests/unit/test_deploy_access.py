"""deploy/ is locked down like the local ``secured`` profile (issue 31.3), as far as files can show it:

* Strimzi: the SCRAM listener, ``simple`` authorization with the profile's super user, one ``KafkaUser``
  per principal with exactly the ACLs ``stack/security.py`` grants (read back from the rendered YAML);
  the ``KafkaConnect`` logs in as ``connect`` and its group and internal topics are within its ACLs;
* Connect's REST API: the image's ``connect-distributed.sh`` run for real (sh) against a stand-in for
  Kafka's script — the JAAS and user files the secured profile writes, the extension, refusal without a
  password — and both targets hand it the pair lakebus's client sends;
* the object store: each service's key pair is its own user's, the root pair only in MinIO and the init,
  the policies least-privilege, every user created by the init on both targets;
* NetworkPolicies select the pods the Deployments, Strimzi and the Helm values label;
* the Debezium plugin in the Connect image is the local stack's module, the KafkaConnector example is
  lakebus's declared source config.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from lakebus_dagster.deployment import access
from lakebus_dagster.kafka import acls
from lakebus_dagster.stack import security
from lakebus_dagster.stack.tls import TlsFiles

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
COMPOSE = DEPLOY / "compose.yaml"
_TYPES = {"topic": "TOPIC", "group": "GROUP", "transactionalId": "TRANSACTIONAL_ID", "cluster": "CLUSTER"}
_PATTERNS = {"literal": "LITERAL", "prefix": "PREFIXED"}


def _docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _kind(path: Path, kind: str) -> list[dict]:
    return [d for d in _docs(path) if d["kind"] == kind]


def _kafka_op(operation: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", operation).upper()


def acls_of(user: dict) -> list[tuple[str, str, str, tuple[str, ...]]] | None:
    """A KafkaUser's ACLs in ``stack/security.py``'s spelling (None: no authorization block)."""
    authz = user["spec"].get("authorization")
    if authz is None:
        return None
    assert authz["type"] == "simple"
    return [(_TYPES[a["resource"]["type"]], _PATTERNS[a["resource"].get("patternType", "literal")], a["resource"].get("name", ""),
             tuple(_kafka_op(op) for op in a["operations"])) for a in authz["acls"]]


def kafka_user_problems(users: list[dict]) -> list[str]:
    by_name = {u["metadata"]["name"]: u for u in users}
    # every principal with ACLs (the broker's own super user has none and no KafkaUser: Strimzi's brokers are its)
    problems = [f"principal {p}: no KafkaUser" for p in security.ACLS if p not in by_name]
    problems += [f"KafkaUser {n}: not a principal of the secured profile" for n in by_name if n not in security.ACLS]
    for name, user in by_name.items():
        if user["spec"]["authentication"]["type"] != "scram-sha-512":
            problems.append(f"KafkaUser {name}: not SCRAM-SHA-512")
        if user["metadata"]["labels"].get("strimzi.io/cluster") != "lakebus":
            problems.append(f"KafkaUser {name}: not of the Kafka cluster lakebus")
        if name in security.ACLS and acls_of(user) != security.ACLS.get(name):
            problems.append(f"KafkaUser {name}: ACLs {acls_of(user)} are not the secured profile's {security.ACLS.get(name)}")
    return problems


# -- Kafka ---------------------------------------------------------------------------------------------------
def test_kafka_users_have_exactly_the_secured_profiles_acls():
    users = _kind(K8S / "strimzi" / "kafka-users.yaml", "KafkaUser")
    assert kafka_user_problems(users) == []
    refs = {u["metadata"]["name"]: u["spec"]["authentication"].get("password", {}).get("valueFrom", {}).get("secretKeyRef")
            for u in users}
    # the observer's password is the code location's; the operations principal's in its own Secret
    assert (refs["lakebus"]["name"], refs["lakebus"]["key"]) == ("lakebus-secrets", security.PRINCIPALS["lakebus"])
    assert (refs["lakebus-ops"]["name"], refs["lakebus-ops"]["key"]) == (acls.OPERATIONS_SECRET, security.PRINCIPALS["lakebus-ops"])
    assert refs["connect"] is None and refs["producer"] is None  # the User Operator generates theirs


def test_no_lakebus_principal_is_a_super_user_and_the_producer_cannot_reach_the_ledger():
    assert [p.name for p in acls.PRINCIPALS.values() if p.super_user] == [acls.BROKER_USER] and acls.BROKER_USER not in acls.ACLS
    assert set(acls.ACLS) == {acls.OBSERVER, acls.OPERATIONS, "connect", "producer"}
    for bus in ("events", "events-run1"):
        rules = acls.acls(bus)
        assert rules["producer"] == [("TOPIC", "LITERAL", bus, ("WRITE", "DESCRIBE"))]
        # the observer writes its ledger (literal) and the connector states, nothing else; creates, alters, deletes nothing
        writes = [(p, n) for _, p, n, ops in rules[acls.OBSERVER] if "WRITE" in ops]
        assert writes == [("LITERAL", f"{bus}.ledger"), ("PREFIXED", "lakebus-connector-states")]
        assert not [r for r in rules[acls.OBSERVER] if {"CREATE", "ALTER", "ALTER_CONFIGS", "DELETE"} & set(r[3])]
    for principal, rules in acls.ACLS.items():  # no cluster-wide, wildcard or ACL-management right for anyone
        assert not [r for r in rules if r[0] == "CLUSTER" or r[2] in ("*", "")], principal


def test_only_the_bus_changing_jobs_take_the_operations_principal_and_mount_its_secret():
    import json

    from lakebus_dagster.definitions import defs
    from lakebus_dagster.defs.kafka_roles import OPERATIONS_KEY, OPERATIONS_TAGS

    ops_jobs = {j.name for j in defs.resolve_all_job_defs() if OPERATIONS_KEY in j.required_resource_keys}
    assert {"provision_lakebus", "provision_change_capture", "replay_dlq", "requeue_lost_records"} <= ops_jobs
    assert "offset_ledger_job" not in ops_jobs and "connector_status_report" not in ops_jobs
    for job in defs.resolve_all_job_defs():  # the K8sRunLauncher mounts the Secret into exactly those runs
        tagged = job.tags.get("dagster-k8s/config") == OPERATIONS_TAGS["dagster-k8s/config"]
        assert tagged == (job.name in ops_jobs), job.name
    env_from = json.loads(OPERATIONS_TAGS["dagster-k8s/config"])["container_config"]["env_from"]
    assert env_from == [{"secret_ref": {"name": acls.OPERATIONS_SECRET}}]
    for sensor in defs.sensors or ():  # sensors watch: the observer
        assert OPERATIONS_KEY not in getattr(sensor, "required_resource_keys", set()), sensor.name
    # the code server and the other runs never hold the operations password
    values = yaml.safe_load((K8S / "dagster-values.yaml").read_text())
    secrets = [s["name"] for s in values["dagster-user-deployments"]["deployments"][0]["envSecrets"]]
    secrets += [s["name"] for s in values["runLauncher"]["config"]["k8sRunLauncher"]["envSecrets"]]
    assert acls.OPERATIONS_SECRET not in secrets


def test_the_acl_comparison_sees_a_changed_missing_or_extra_rule():
    users = _kind(K8S / "strimzi" / "kafka-users.yaml", "KafkaUser")
    connect = next(u for u in users if u["metadata"]["name"] == "connect")
    connect["spec"]["authorization"]["acls"][0]["operations"].remove("Create")
    producer = next(u for u in users if u["metadata"]["name"] == "producer")
    producer["spec"]["authorization"]["acls"].append(
        {"resource": {"type": "topic", "name": "dlq-", "patternType": "prefix"}, "operations": ["Read"], "host": "*"})
    found = kafka_user_problems([u for u in users if u["metadata"]["name"] != "lakebus"])
    assert [p.split(":")[0] for p in found] == ["principal lakebus", "KafkaUser connect", "KafkaUser producer"], found


def test_kafka_authenticates_and_authorizes_like_the_secured_broker(monkeypatch: pytest.MonkeyPatch):
    (kafka,) = _kind(K8S / "strimzi" / "kafka.yaml", "Kafka")
    spec = kafka["spec"]["kafka"]
    assert [(lst["authentication"]["type"], lst["tls"]) for lst in spec["listeners"]] == [("scram-sha-512", True)]
    for variable in security.PRINCIPALS.values():
        monkeypatch.setenv(variable, "x")
    tls = TlsFiles(Path("ca.crt"), Path("ca.key"), Path("server.pem"), Path("connect-rest.p12"))
    broker = security.broker_properties("127.0.0.1", 1, 2, tls)  # the profile's super users, without KRaft's ANONYMOUS
    assert broker["sasl.enabled.mechanisms"] == security.MECHANISM and broker["allow.everyone.if.no.acl.found"] == "false"
    # the local broker's super users are its own inter-broker login and KRaft's anonymous controller listener
    assert broker["super.users"] == f"User:{acls.BROKER_USER};User:ANONYMOUS"
    assert spec["authorization"] == {"type": "simple"}  # no lakebus principal is one; Strimzi's brokers are its own
    (config_map,) = _kind(K8S / "lakebus-config.yaml", "ConfigMap")
    data = config_map["data"]
    assert (data["LAKEBUS_KAFKA_SECURITY_PROTOCOL"], data["LAKEBUS_KAFKA_SASL_MECHANISM"], data["LAKEBUS_KAFKA_SASL_USERNAME"],
            data["LAKEBUS_KAFKA_OPS_USERNAME"]) == ("SASL_SSL", security.MECHANISM, acls.OBSERVER, acls.OPERATIONS)
    assert broker["listener.security.protocol.map"].endswith("SASL_SSL:SASL_SSL")  # the secured broker's, too


# -- TLS on the Kafka hop: Strimzi's cluster CA, trusted by every client ---------------------------------------
#: keys Strimzi writes itself from ``tls`` and ``authentication`` (unprefixed and producer./consumer./admin.)
#: and refuses in ``KafkaConnect.spec.config``
STRIMZI_CLIENT_SECURITY = re.compile(r"^((producer|consumer|admin)\.)?(security\.|ssl\.|sasl\.)")


def kafka_tls_problems(kafka: dict, connect: dict, config_map: dict, helm_values: dict) -> list[str]:
    """What keeps a Kafka client on Kubernetes from SASL_SSL verified against Strimzi's cluster CA: every
    listener TLS with SCRAM; the ConfigMap's protocol SASL_SSL and its CA path a file the code location and
    the run pods mount from the cluster CA's Secret (``<cluster>-cluster-ca-cert``, key ``ca.crt``); the
    KafkaConnect trusting that Secret, on a TLS listener's port, its security settings left to Strimzi."""
    problems = []
    secret = f"{kafka['metadata']['name']}-cluster-ca-cert"
    listeners = kafka["spec"]["kafka"]["listeners"]
    problems += [f"listener {lst['name']}: tls {lst.get('tls')!r}, authentication {lst.get('authentication')!r}"
                 for lst in listeners if lst.get("tls") is not True or lst.get("authentication") != {"type": "scram-sha-512"}]
    data = config_map["data"]
    if data.get("LAKEBUS_KAFKA_SECURITY_PROTOCOL") != "SASL_SSL":
        problems.append(f"lakebus-config: LAKEBUS_KAFKA_SECURITY_PROTOCOL={data.get('LAKEBUS_KAFKA_SECURITY_PROTOCOL')!r}")
    ca = str(data.get("LAKEBUS_KAFKA_SSL_CA_LOCATION", ""))
    directory, _, name = ca.rpartition("/")
    (code,) = helm_values["dagster-user-deployments"]["deployments"]
    pods = {"code location": code, "run pods": helm_values["runLauncher"]["config"]["k8sRunLauncher"]}
    for where, pod in pods.items():
        if {"name": config_map["metadata"]["name"]} not in pod.get("envConfigMaps", []):
            problems.append(f"{where}: does not load {config_map['metadata']['name']}")
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        mounted = [m for m in pod.get("volumeMounts", []) if m["mountPath"] == directory and m["name"] in volumes
                   and {"key": "ca.crt", "path": name} in volumes[m["name"]].get("secret", {}).get("items", [])
                   and volumes[m["name"]]["secret"].get("secretName") == secret]
        if not mounted:
            problems.append(f"{where}: no mount puts Secret {secret} key ca.crt at LAKEBUS_KAFKA_SSL_CA_LOCATION={ca!r}")
    spec = connect["spec"]
    if spec.get("tls", {}).get("trustedCertificates") != [{"secretName": secret, "certificate": "ca.crt"}]:
        problems.append(f"KafkaConnect: tls.trustedCertificates {spec.get('tls')!r}, not Secret {secret} key ca.crt")
    port = int(spec["bootstrapServers"].rsplit(":", 1)[1])
    if port not in [lst["port"] for lst in listeners if lst.get("tls") is True]:
        problems.append(f"KafkaConnect: bootstrapServers {spec['bootstrapServers']} is no TLS listener's port")
    if spec.get("authentication", {}).get("type") != "scram-sha-512":
        problems.append(f"KafkaConnect: authentication {spec.get('authentication')!r}")
    problems += [f"KafkaConnect: config sets {key} (Strimzi's own, from tls and authentication)"
                 for key in spec["config"] if STRIMZI_CLIENT_SECURITY.match(key)]
    return problems


def _tls_inputs(root: Path = DEPLOY) -> tuple[dict, dict, dict, dict]:
    (kafka,) = _kind(root / "k8s" / "strimzi" / "kafka.yaml", "Kafka")
    (connect,) = _kind(root / "k8s" / "strimzi" / "kafka-connect.yaml", "KafkaConnect")
    (config_map,) = _kind(root / "k8s" / "lakebus-config.yaml", "ConfigMap")
    return kafka, connect, config_map, yaml.safe_load((root / "k8s" / "dagster-values.yaml").read_text())


def test_every_kafka_client_on_kubernetes_verifies_the_brokers_against_strimzis_cluster_ca():
    kafka, connect, config_map, helm_values = _tls_inputs()
    assert kafka_tls_problems(kafka, connect, config_map, helm_values) == []
    assert f"{kafka['metadata']['name']}-cluster-ca-cert" == access.KAFKA_CA_SECRET
    # the code reads it as such: SASL_SSL, the mounted file as its CA (the secured profile's client settings)
    from lakebus_dagster.deployment.values import load_values

    settings = load_values(DEPLOY / "values.yaml").kubernetes.settings.kafka
    assert (settings.tls, settings.sasl, settings.ssl_ca_location) == (
        True, True, config_map["data"]["LAKEBUS_KAFKA_SSL_CA_LOCATION"])


def test_the_tls_check_sees_a_plaintext_listener_a_missing_mount_and_a_strimzi_key_in_config():
    kafka, connect, config_map, helm_values = _tls_inputs()
    kafka["spec"]["kafka"]["listeners"][0]["tls"] = False
    helm_values["runLauncher"]["config"]["k8sRunLauncher"].pop("volumeMounts")
    helm_values["dagster-user-deployments"]["deployments"][0]["volumes"][0]["secret"]["secretName"] = "my-ca"
    connect["spec"]["config"]["producer.ssl.truststore.location"] = "/tmp/ca.p12"
    connect["spec"].pop("tls")
    config_map["data"]["LAKEBUS_KAFKA_SECURITY_PROTOCOL"] = "SASL_PLAINTEXT"
    found = kafka_tls_problems(kafka, connect, config_map, helm_values)
    assert [f.split(":")[0] for f in found] == [
        "listener scram", "lakebus-config", "code location", "run pods", "KafkaConnect", "KafkaConnect", "KafkaConnect"], found


def test_another_ca_path_reaches_the_configmap_and_both_mounts(tmp_path: Path):
    from lakebus_dagster.deployment import render

    doc = yaml.safe_load((DEPLOY / "values.yaml").read_text())
    doc["targets"]["kubernetes"]["LAKEBUS_KAFKA_SSL_CA_LOCATION"] = "/var/run/kafka/cluster-ca.pem"
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(doc))
    render.write(render.render(tmp_path / "values.yaml"), tmp_path)
    kafka, connect, _, _ = _tls_inputs()
    (config_map,) = _kind(tmp_path / "k8s" / "lakebus-config.yaml", "ConfigMap")
    helm_values = yaml.safe_load((tmp_path / "k8s" / "dagster-values.yaml").read_text())
    assert config_map["data"]["LAKEBUS_KAFKA_SSL_CA_LOCATION"] == "/var/run/kafka/cluster-ca.pem"
    assert kafka_tls_problems(kafka, connect, config_map, helm_values) == []


def test_connect_logs_in_as_connect_within_its_acls():
    (connect,) = _kind(K8S / "strimzi" / "kafka-connect.yaml", "KafkaConnect")
    auth = connect["spec"]["authentication"]
    assert (auth["type"], auth["username"], auth["passwordSecret"]) == (
        "scram-sha-512", "connect", {"secretName": "connect", "password": "password"})
    rules = security.ACLS["connect"]
    spec = connect["spec"]  # its group and storage topics are the resource's own fields (refused in `config`)

    def allowed(rtype: str, name: str, op: str) -> bool:
        return any(t == rtype and op in ops and (name == n if p == "LITERAL" else name.startswith(n)) for t, p, n, ops in rules)

    assert allowed("GROUP", spec["groupId"], "READ")
    for key in ("configStorageTopic", "offsetStorageTopic", "statusStorageTopic"):
        assert all(allowed("TOPIC", spec[key], op) for op in ("READ", "WRITE", "CREATE", "DESCRIBE")), key


# -- Connect's REST API ----------------------------------------------------------------------------------------
def _run_wrapper(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    wrapper = bin_dir / "connect-distributed.sh"
    wrapper.write_text((DEPLOY / "connect" / "connect-distributed.sh").read_text())
    wrapper.chmod(0o755)
    kafka = bin_dir / "connect-distributed-kafka.sh"
    kafka.write_text('#!/bin/sh\necho "OPTS=$KAFKA_OPTS"\necho "ARGS=$*"\necho "PW=${LAKEBUS_CONNECT_PASSWORD:-unset}"\ncat "$1"\n')
    kafka.chmod(0o755)
    props = tmp_path / "worker.properties"
    props.write_text("group.id=lakebus-connect\nrest.extension.classes=some.Other\n")
    return subprocess.run(["sh", str(wrapper), str(props)], env={"PATH": os.environ["PATH"], "TMPDIR": str(tmp_path), **env},
                          capture_output=True, text=True, timeout=30)


def test_the_connect_image_puts_the_rest_api_behind_the_secured_profiles_basic_auth(tmp_path: Path):
    result = _run_wrapper(tmp_path, {"LAKEBUS_CONNECT_USERNAME": "lakebus", "LAKEBUS_CONNECT_PASSWORD": "s3cret/+="})
    assert result.returncode == 0, result.stderr
    out = result.stdout.splitlines()
    jaas = Path(re.search(r"-Djava\.security\.auth\.login\.config=(\S+)", out[0]).group(1))
    assert f"{security.REST_LOGIN} required" in jaas.read_text() and "KafkaConnect {" in jaas.read_text()
    users = Path(re.search(r'file="([^"]+)"', jaas.read_text()).group(1))
    assert users.read_text() == "lakebus=s3cret/+=\n"
    assert oct(users.stat().st_mode & 0o777) == "0o600" and oct(users.parent.stat().st_mode & 0o777) == "0o700"
    assert out[2] == "PW=unset", "the worker process keeps no copy of the password"
    worker = out[3:]
    assert worker == ["group.id=lakebus-connect", f"rest.extension.classes={access.REST_EXTENSION}"], worker
    refused = _run_wrapper(tmp_path, {"LAKEBUS_CONNECT_USERNAME": "lakebus"})
    assert refused.returncode == 1 and "set LAKEBUS_CONNECT_USERNAME and LAKEBUS_CONNECT_PASSWORD" in refused.stderr
    assert "ARGS" not in refused.stdout


def test_the_rest_extension_is_in_lakebus_plugin_and_uses_kafkas_basic_auth_filter():
    """The class the script names is lakebus's plugin's (registered for ServiceLoader discovery), and it
    wraps Kafka's JaasBasicAuthFilter (the secured profile's extension's filter) with the probe exemption
    only; the exemption itself is JUnit-tested in the plugin's Maven build (ProbeExemptFilterTest)."""
    plugin = ROOT / "infra" / "maven" / "connect-plugin-lakebus" / "src" / "main"
    services = (plugin / "resources" / "META-INF" / "services" / "org.apache.kafka.connect.rest.ConnectRestExtension").read_text()
    assert services.split() == [access.REST_EXTENSION]
    source = (plugin / "java" / Path(*access.REST_EXTENSION.split("."))).with_suffix(".java").read_text()
    assert "new ProbeExemptFilter(new JaasBasicAuthFilter(CONFIGURATION))" in source
    assert security.KAFKA_REST_EXTENSION.rsplit(".", 1)[0] + ".JaasBasicAuthFilter" in source
    assert security.REST_EXTENSION == access.REST_EXTENSION, "the secured profile runs deploy/'s REST extension"
    exempt = (plugin / "java" / "io" / "lakebus" / "connect" / "rest" / "ProbeExemptFilter.java").read_text()
    assert 'Set.of("", "/", "health", "/health", "health/", "/health/")' in exempt and "HttpMethod.GET.equals(method)" in exempt


def test_both_targets_give_the_connect_workers_the_pair_lakebus_sends():
    dockerfile = (DEPLOY / "connect" / "Dockerfile").read_text()
    assert "COPY --chmod=0755 deploy/connect/connect-distributed.sh /opt/kafka/bin/connect-distributed.sh" in dockerfile
    assert "/opt/kafka/bin/connect-distributed.sh /opt/kafka/bin/connect-distributed-kafka.sh" in dockerfile
    compose = yaml.safe_load(COMPOSE.read_text())
    worker, lakebus = compose["services"]["connect"]["environment"], compose["x-lakebus-env"]
    for name in ("LAKEBUS_CONNECT_USERNAME", "LAKEBUS_CONNECT_PASSWORD"):
        assert worker[name] == lakebus[name], name
    assert lakebus["LAKEBUS_CONNECT_PASSWORD"].startswith("${LAKEBUS_CONNECT_PASSWORD:?")
    (connect,) = _kind(K8S / "strimzi" / "kafka-connect.yaml", "KafkaConnect")
    env = {e["name"]: e["valueFrom"] for e in connect["spec"]["template"]["connectContainer"]["env"] if "valueFrom" in e}
    assert env["LAKEBUS_CONNECT_USERNAME"] == {"configMapKeyRef": {"name": "lakebus-config", "key": "LAKEBUS_CONNECT_USERNAME"}}
    assert env["LAKEBUS_CONNECT_PASSWORD"] == {"secretKeyRef": {"name": "lakebus-secrets", "key": "LAKEBUS_CONNECT_PASSWORD"}}
    (config_map,) = _kind(K8S / "lakebus-config.yaml", "ConfigMap")
    assert config_map["data"]["LAKEBUS_CONNECT_USERNAME"] == worker["LAKEBUS_CONNECT_USERNAME"]
    values = yaml.safe_load((K8S / "dagster-values.yaml").read_text())
    (code,) = values["dagster-user-deployments"]["deployments"]
    for holder in (code, values["runLauncher"]["config"]["k8sRunLauncher"]):
        assert {"name": "lakebus-secrets"} in holder["envSecrets"] and {"name": "lakebus-config"} in holder["envConfigMaps"]


# -- the object store ------------------------------------------------------------------------------------------
def _compose_key_vars() -> dict[str, set[str]]:
    """compose service -> the secret variables it interpolates that name an object-store key pair or the root pair."""
    key_vars = {v for u in access.OBJECT_STORE_USERS for v in u.compose_vars} | set(access.ROOT_VARS)
    out: dict[str, set[str]] = {}
    for name, service in yaml.safe_load(COMPOSE.read_text())["services"].items():
        text = yaml.safe_dump(service.get("environment") or {})
        out[name] = {v for v in re.findall(r"\$\{([A-Z0-9_]+)", text) if v in key_vars}
    return out


def object_store_problems(compose: dict[str, set[str]], k8s: dict[str, set[str]]) -> list[str]:
    """Each service uses its own user's key pair only; the root pair only MinIO and the init."""
    own = {u.service: set(u.compose_vars) for u in access.OBJECT_STORE_USERS}
    wanted = {"connect": own["connect"], "iceberg-rest": own["catalog"], "spark-connect": own["spark-connect"],
              "dagster-code": own["dagster"] | own["compute-logs"], "dagster-webserver": own["compute-logs"],
              "dagster-webserver-read-only": own["compute-logs"],
              "dagster-daemon": own["compute-logs"], "minio": set(access.ROOT_VARS),
              "minio-init": set(access.ROOT_VARS) | {v for u in access.OBJECT_STORE_USERS for v in u.compose_vars}}
    problems = [f"compose {s}: uses {sorted(v)}, not {sorted(wanted.get(s, set()))}" for s, v in compose.items() if v != wanted.get(s, set())]
    secrets = {u.service: u.secret for u in access.OBJECT_STORE_USERS}
    k8s_wanted = {"iceberg-rest.yaml": {secrets["catalog"], "iceberg-catalog-db"}, "spark-connect.yaml": {secrets["spark-connect"], "lakebus-secrets"},
                  "kafka-connect.yaml": {secrets["connect"], "lakebus-secrets"},
                  "minio-init.yaml": {access.ROOT_SECRET} | set(secrets.values())}
    problems += [f"k8s {f}: reads {sorted(v)}, not {sorted(k8s_wanted.get(f, v))}" for f, v in k8s.items() if v != k8s_wanted.get(f, v)]
    problems += [f"k8s {f}: reads the root Secret" for f, v in k8s.items() if access.ROOT_SECRET in v and f != "minio-init.yaml"]
    return problems


def _k8s_secrets() -> dict[str, set[str]]:
    out = {}
    for path in sorted(K8S.rglob("*.yaml")):
        if path.name != "secrets.example.yaml":
            out[path.name] = set(re.findall(r"secretKeyRef: \{name: ([a-z0-9-]+)", path.read_text()))
    return out


def test_each_service_uses_its_own_object_store_user_and_only_the_init_the_root_pair():
    assert object_store_problems(_compose_key_vars(), _k8s_secrets()) == []


def test_the_object_store_check_sees_the_root_pair_or_anothers_keys_put_back():
    compose, k8s = _compose_key_vars(), _k8s_secrets()
    compose["connect"] = {"LAKEBUS_S3_ACCESS_KEY_ID", "LAKEBUS_S3_SECRET_ACCESS_KEY"}
    compose["iceberg-rest"] = set(access.ROOT_VARS)
    k8s["spark-connect.yaml"] = k8s["spark-connect.yaml"] | {access.ROOT_SECRET}
    found = object_store_problems(compose, k8s)
    assert [p.split(":")[0] for p in found] == ["compose connect", "compose iceberg-rest", "k8s spark-connect.yaml",
                                               "k8s spark-connect.yaml"], found


def test_the_policies_are_least_privilege_and_the_init_creates_every_user():
    bucket, logs = "warehouse", "lakebus-logs"
    policies = access.object_store_policies(bucket, logs)
    actions = {name: {a for st in doc["Statement"] for a in st["Action"]} for name, doc in policies.items()}
    resources = {name: {r for st in doc["Statement"] for r in st["Resource"]} for name, doc in policies.items()}
    assert not actions["lakebus-warehouse-read"] & {"s3:PutObject", "s3:DeleteObject", "s3:CreateBucket"}
    assert resources["lakebus-warehouse-write"] == {f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"}
    assert resources["lakebus-compute-logs"] == {f"arn:aws:s3:::{logs}", f"arn:aws:s3:::{logs}/*"}
    assert not any(a.startswith("s3:*") or a.startswith("admin:") for a in set().union(*actions.values()))
    script = access.minio_init_script("http://minio:9000", bucket, logs)
    (job,) = _kind(K8S / "minio-init.yaml", "Job")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    compose = yaml.safe_load(COMPOSE.read_text())["services"]["minio-init"]
    for user in access.OBJECT_STORE_USERS:
        key = user.init_vars[0]
        assert f'mc admin policy attach local {user.policy} --user "${key}"' in script, user.service
        assert f'mc admin user add local "$${key}"' in " ".join(compose["command"]), user.service
        ref = next(e for e in container["env"] if e["name"] == key)["valueFrom"]["secretKeyRef"]
        assert (ref["name"], ref["key"]) == (user.secret, user.secret_keys[0])
    assert container["args"][0].strip() == access.minio_init_script(
        yaml.safe_load((K8S / "lakebus-config.yaml").read_text())["data"]["LAKEBUS_S3_ENDPOINT"], bucket, logs).strip()


# -- NetworkPolicies -----------------------------------------------------------------------------------------
def test_network_policies_select_the_pods_the_workloads_label():
    policies = {p["metadata"]["name"]: p for p in _kind(K8S / "network-policies.yaml", "NetworkPolicy")}
    (catalog,) = _kind(K8S / "iceberg-rest.yaml", "Deployment")
    (spark,) = _kind(K8S / "spark-connect.yaml", "Deployment")
    selected = {name: p["spec"]["podSelector"]["matchLabels"] for name, p in policies.items()}
    assert selected["iceberg-rest-lakebus-only"].items() <= catalog["spec"]["template"]["metadata"]["labels"].items()
    assert selected["spark-connect-dagster-only"].items() <= spark["spec"]["template"]["metadata"]["labels"].items()
    (connect,) = _kind(K8S / "strimzi" / "kafka-connect.yaml", "KafkaConnect")
    # Strimzi labels the pods of a KafkaConnect with its name and kind
    assert selected["connect-rest-dagster-only"] == {"strimzi.io/cluster": connect["metadata"]["name"], "strimzi.io/kind": "KafkaConnect"}
    values = yaml.safe_load((K8S / "dagster-values.yaml").read_text())
    (code,) = values["dagster-user-deployments"]["deployments"]
    holders = [values["dagsterWebserver"], values["dagsterDaemon"], code, values["runLauncher"]["config"]["k8sRunLauncher"]]
    assert all(h["labels"] == access.DAGSTER_POD_LABEL for h in holders)
    for name, policy in policies.items():
        peers = [peer["podSelector"]["matchLabels"] for rule in policy["spec"]["ingress"] for peer in rule["from"]]
        assert access.DAGSTER_POD_LABEL in peers, name
        assert policy["spec"]["policyTypes"] == ["Ingress"], name
    catalog_port = catalog["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"]
    assert [p["port"] for p in policies["iceberg-rest-lakebus-only"]["spec"]["ingress"][0]["ports"]] == [catalog_port]


# -- change capture --------------------------------------------------------------------------------------------
def test_the_connect_image_carries_the_local_stacks_debezium_plugin():
    dockerfile = (DEPLOY / "connect" / "Dockerfile").read_text()
    modules = re.search(r"-pl (\S+)", dockerfile).group(1).split(",")
    assert "connect-plugin-debezium-postgres" in modules
    assert "<module>connect-plugin-debezium-postgres</module>" in (ROOT / "infra" / "maven" / "pom.xml").read_text()
    from lakebus_dagster.stack.jars import COMPONENTS  # what the local stack fetches, the same module's output

    assert "connect-plugins/debezium-connector-postgres" in COMPONENTS


def test_the_kafka_connector_example_is_lakebus_declared_source():
    from lakebus_dagster.connect.source_offsets import DEBEZIUM_POSTGRES_CLASS
    from lakebus_dagster.deployment.render import capture_source
    from lakebus_dagster.deployment.values import load_values

    (connector,) = _kind(K8S / "strimzi" / "examples" / "postgres-source.yaml", "KafkaConnector")
    declared = capture_source(load_values(DEPLOY / "values.yaml"))
    assert connector["spec"]["class"] == DEBEZIUM_POSTGRES_CLASS == declared["class"]
    assert connector["spec"]["config"] == declared["config"]
    assert connector["spec"]["config"]["database.password"] == "${env:LAKEBUS_POSTGRES_PASSWORD}"
    assert "exactly.once.support" not in connector["spec"]["config"], "the example is rendered without exactly-once: not proven under ACLs"


def _rendered_allows(user: str):
    """``allowed(resource type, name, operation)`` by the rendered KafkaUser ``user``'s ACLs."""
    (found,) = [u for u in _kind(K8S / "strimzi" / "kafka-users.yaml", "KafkaUser") if u["metadata"]["name"] == user]
    rules = acls_of(found)

    def allowed(rtype: str, name: str, op: str) -> bool:
        return any(t == rtype and op in ops and (name == n if p == "LITERAL" else name.startswith(n)) for t, p, n, ops in rules)

    return allowed


@pytest.mark.parametrize("capture_name", ["shop", "shop_1a2b3c4d"])
def test_the_connect_principal_may_run_change_capture_and_the_producer_may_not(capture_name: str):
    """The rendered KafkaUser ``connect`` (the secured profile's rules) covers what change capture does under
    production ACLs — read back from the rendered YAML, per topic and transactional id of lakebus's own capture
    declaration: the Debezium source writes its change and heartbeat topics, reads its signal channel in its
    group, and commits exactly-once through its task's transactional id (and the leader's); the change-table
    sink reads the change topics and uses its control topic, group and DLQ. Not run on the secured profile."""
    from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
    from lakebus_dagster.kafka.acls import CAPTURE_NAME

    assert ChangeCaptureResource().name == CAPTURE_NAME
    (worker,) = _kind(K8S / "strimzi" / "kafka-connect.yaml", "KafkaConnect")
    group = worker["spec"]["groupId"]
    spec = ChangeCaptureResource(enabled=True, name=capture_name, signal_bootstrap="kafka:9092").spec()

    class Lake:
        catalog_uri, warehouse, region, s3_endpoint = "http://catalog:8181", "s3://warehouse/", "us-east-1", "http://s3:9000"

    allowed, producer = _rendered_allows("connect"), _rendered_allows("producer")
    source, sink = spec.source_spec(), spec.sink_spec(Lake())
    needed = [("TOPIC", t.name, op) for t in spec.change_topics() for op in ("WRITE", "READ", "DESCRIBE")]
    needed += [("TOPIC", spec.heartbeat_topic.name, op) for op in ("WRITE", "DESCRIBE")]
    needed += [("TOPIC", spec.signal_topic.name, op) for op in ("READ", "DESCRIBE")]
    needed += [("GROUP", source.config["signal.kafka.groupId"], "READ")]
    needed += [("TRANSACTIONAL_ID", f"{group}-{source.name}-0", op) for op in ("WRITE", "DESCRIBE")]
    needed += [("TRANSACTIONAL_ID", f"connect-cluster-{group}", op) for op in ("WRITE", "DESCRIBE")]
    needed += [("TOPIC", spec.control_topic.name, op) for op in ("READ", "WRITE")] + [("TOPIC", spec.dlq_topic.name, "WRITE")]
    needed += [("GROUP", f"connect-{sink.name}", "READ"), ("GROUP", f"connect-{sink.name}-coord", "READ")]
    assert source.config["exactly.once.support"] == "required" and {t.name for t in source.topics} <= {n for _, n, _ in needed}
    assert [n for n in needed if not allowed(*n)] == []
    # the producer (a service sending events) gets none of it
    assert [n for n in needed if producer(*n)] == []
    assert not allowed("TOPIC", "orders.app.users", "WRITE"), "only the declared capture's topics"


@pytest.mark.parametrize("name", ["connect-distributed.sh"])
def test_shell_scripts_are_posix(name: str):
    """The Connect image may be Alpine's busybox sh: the script is checked with `sh -n` and uses no bashisms
    the tests would miss (``[[``, arrays, ``function``)."""
    path = DEPLOY / "connect" / name
    assert subprocess.run(["sh", "-n", str(path)], capture_output=True, timeout=10).returncode == 0
    assert not re.search(r"\[\[ |\bfunction\b|\w+=\(", path.read_text())
