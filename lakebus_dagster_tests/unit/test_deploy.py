"""deploy/ as a platform team applies it, checked as far as this machine allows without a container
engine or a cluster:

* the compose file through Debian's compose implementation (``docker-compose config``: schema,
  interpolation, anchors; no daemon needed), with the secrets given and without them;
* the core Kubernetes manifests against the API server's own schemas through ``kubectl-validate``,
  built from the Go module proxy into ``~/.cache/lakebus/tools`` by ``make test-tools``; the Strimzi
  resources structurally (the fields lakebus relies on, Strimzi's enums for them): Strimzi's CRDs
  are not served by any registry this machine reaches, and lakebus commits no copy of them;
* every ``LAKEBUS_*`` variable the code reads (``envvars.VARIABLES``) is set in deploy/, and deploy/
  sets none the code never reads; secrets only as references;
* the production ``dagster.yaml`` and the Helm values agree on the run queue, and the jobs carry the
  tags its limits name;
* the Strimzi Connect workers run compose's worker file's settings (the file the local stack runs),
  but for the keys Strimzi owns and the differences :data:`STRIMZI_DIFFERS` lists.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lakebus_dagster import envvars
from lakebus_dagster.deployment.values import CAPTURE_VARS, values_document

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
K8S = DEPLOY / "k8s"
#: Jinja2 templates of the rendered files (not YAML until rendered: ``lakebus deploy render``)
TEMPLATES = DEPLOY / "templates"
STRIMZI_API = "kafka.strimzi.io/v1"
PODMONITOR_API = "monitoring.coreos.com/v1"
TOOLS = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lakebus" / "tools"
KUBE_VERSION = "1.30"
VARIABLE = re.compile(r"LAKEBUS_[A-Z0-9_]+")
SECRETS = {v.name for v in envvars.VARIABLES if v.secret}
#: variables the deployment does not set, and why
NOT_DEPLOYED = {
    # the local stack's processes (infra/): deploy/ runs no local stack
    **{v.name: "local stack only" for v in envvars.VARIABLES if v.meaning.startswith("local stack")},
    # host + port pairs of the local stack; deploy/ names every service by URL (the *_BOOTSTRAP/_URL/_URI/_ENDPOINT overrides)
    "LAKEBUS_HOST": "superseded by the address overrides",
    # deploy/ sets the variables themselves; a deployment may name its YAML file instead (docs/configuration.md)
    "LAKEBUS_CONFIG": "optional: the deployment's config file, an alternative to the variables deploy/ sets",
    "LAKEBUS_KAFKA_PORT": "superseded by LAKEBUS_KAFKA_BOOTSTRAP",
    "LAKEBUS_CONNECT_PORT": "superseded by LAKEBUS_CONNECT_URL",
    "LAKEBUS_REST_CATALOG_PORT": "superseded by LAKEBUS_CATALOG_URI",
    "LAKEBUS_S3_PORT": "superseded by LAKEBUS_S3_ENDPOINT",
    # Strimzi has no https for Connect's REST API: in-cluster http behind the NetworkPolicy (deploy/README.md,
    # "Securing Kafka and Connect"); LAKEBUS_KAFKA_SSL_CA_LOCATION is deployed (unit/test_deploy_access.py)
    "LAKEBUS_CONNECT_CA_LOCATION": "deploy/'s Connect REST API is http: no CA to trust",
}
#: what compose refuses to start without (the run logs' key pair is the logs user's, not lakebus's)
COMPOSE_SECRETS = {"LAKEBUS_S3_ACCESS_KEY_ID": "test-access", "LAKEBUS_S3_SECRET_ACCESS_KEY": "test-secret",
                   "MINIO_ROOT_USER": "test-root", "MINIO_ROOT_PASSWORD": "test-root-secret", "LAKEBUS_CONNECT_PASSWORD": "test-rest",
                   "CONNECT_S3_ACCESS_KEY_ID": "test-connect", "CONNECT_S3_SECRET_ACCESS_KEY": "test-connect-secret",
                   "CATALOG_S3_ACCESS_KEY_ID": "test-catalog", "CATALOG_S3_SECRET_ACCESS_KEY": "test-catalog-secret",
                   "SPARK_S3_ACCESS_KEY_ID": "test-spark", "SPARK_S3_SECRET_ACCESS_KEY": "test-spark-secret",
                   "DAGSTER_PG_PASSWORD": "test-pg", "DAGSTER_COMPUTE_LOGS_ACCESS_KEY_ID": "test-logs-access",
                   "DAGSTER_COMPUTE_LOGS_SECRET_ACCESS_KEY": "test-logs-secret", "OAUTH2_PROXY_CLIENT_ID": "test-ui-client",
                   "OAUTH2_PROXY_CLIENT_SECRET": "test-ui-secret", "OAUTH2_PROXY_COOKIE_SECRET": "test-ui-cookie"}
#: the only values deploy/k8s/secrets.example.yaml may hold
PLACEHOLDERS = {"change-me", ""}
SECRET_REF = re.compile(r"^\$\{(?P<name>[A-Z0-9_]+)(:[-?][^}]*)?\}$")
COMPOSE_SERVICES = {
    "postgres", "minio", "minio-init", "kafka", "connect", "iceberg-rest", "spark-connect", "dagster-code", "dagster-webserver", "dagster-daemon",
    "dagster-webserver-read-only", "oauth2-proxy",
}  # fmt: skip


def _yaml_docs(path: Path) -> list:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def _set_in(node, found: dict[str, list], where: str) -> None:
    """Collect ``LAKEBUS_*`` variables a YAML tree sets: mapping keys, and ``{name: ..., value(From): ...}`` entries."""
    if isinstance(node, dict):
        name = node.get("name")
        if isinstance(name, str) and VARIABLE.fullmatch(name) and ({"value", "valueFrom"} & set(node)):
            found.setdefault(name, []).append((where, node.get("value", node.get("valueFrom"))))
        for key, value in node.items():
            if isinstance(key, str) and VARIABLE.fullmatch(key):
                found.setdefault(key, []).append((where, value))
            _set_in(value, found, where)
    elif isinstance(node, list):
        for item in node:
            _set_in(item, found, where)


def deploy_sets() -> dict[str, list[tuple[str, object]]]:
    """Every ``LAKEBUS_*`` variable set anywhere in deploy/ (YAML files, Dockerfile ENV lines) -> [(file, value)]."""
    found: dict[str, list] = {}
    for path in sorted(p for p in DEPLOY.rglob("*.yaml") if TEMPLATES not in p.parents):
        for doc in _yaml_docs(path):
            _set_in(doc, found, path.relative_to(ROOT).as_posix())
    for path in sorted(DEPLOY.rglob("Dockerfile")):
        text = path.read_text().replace("\\\n", " ")
        for line in text.splitlines():
            if line.strip().startswith("ENV "):
                for name, value in re.findall(r"(LAKEBUS_[A-Z0-9_]+)=(\S+)", line):
                    found.setdefault(name, []).append((path.relative_to(ROOT).as_posix(), value))
    return found


# -- environment variables ------------------------------------------------------------------------------
def test_every_variable_the_code_reads_is_set_in_deploy():
    missing = sorted(set(envvars.BY_NAME) - set(deploy_sets()) - set(NOT_DEPLOYED))
    assert missing == [], f"the code reads these but deploy/ never sets them: {missing}"


def test_deploy_sets_no_variable_the_code_never_reads():
    unknown = {name: [w for w, _ in where] for name, where in deploy_sets().items() if name not in envvars.BY_NAME}
    assert unknown == {}, "deploy/ sets variables no code reads (typo, or a removed setting)"
    assert set(NOT_DEPLOYED) <= set(envvars.BY_NAME), sorted(set(NOT_DEPLOYED) - set(envvars.BY_NAME))


def test_compose_and_kubernetes_each_configure_the_code_location():
    """Both targets configure the code location: compose sets every deployable variable in its shared
    block (``${VAR:-default}``, overridable); Kubernetes the ones deploy/values.yaml sets (the ConfigMap,
    :func:`configmap_problems`) and the secrets from the Secret `lakebus-secrets`."""
    deployable = set(envvars.BY_NAME) - set(NOT_DEPLOYED)
    compose_env = _yaml_docs(COMPOSE)[0]["x-lakebus-env"]
    assert sorted(deployable - set(compose_env)) == []
    config_map = _yaml_docs(K8S / "lakebus-config.yaml")[0]
    assert config_map["kind"] == "ConfigMap"
    assert configmap_problems(config_map["data"], values_document(DEPLOY / "values.yaml")) == []
    assert sorted(SECRETS & set(config_map["data"])) == [], "a secret in a ConfigMap"
    values = _yaml_docs(K8S / "dagster-values.yaml")[0]
    (code,) = values["dagster-user-deployments"]["deployments"]
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    for holder in (code, launcher):
        assert holder["envConfigMaps"] == [{"name": config_map["metadata"]["name"]}]
        assert holder["envSecrets"] == [{"name": "lakebus-secrets"}, {"name": "dagster-compute-logs"}]


#: what the code derives from the values and the ConfigMap writes out (the processes get it as the code computes it)
DERIVED = {"LAKEBUS_WAREHOUSE", "LAKEBUS_KAFKA_SECURITY_PROTOCOL"}


def configmap_problems(data: dict[str, str], values: dict) -> list[str]:
    """The production ConfigMap lists only what production reads: each ``LAKEBUS_*`` key is one
    deploy/values.yaml sets for Kubernetes (``settings:`` or ``targets.kubernetes``) or one the code
    derives from them, with that value; every other variable takes the code's default — so no
    setting of a feature production does not run (``LAKEBUS_POSTGRES=off``, the demo database)."""
    given = {**values["settings"], **values["targets"]["kubernetes"]}
    capture_off = str(given.get("LAKEBUS_POSTGRES", "off")) == "off"
    problems = []
    for name, value in data.items():
        if not name.startswith("LAKEBUS_") or name in DERIVED:
            continue
        if name in CAPTURE_VARS and not capture_off:  # capture on: the database is change_capture's
            if value != str(values["change_capture"][CAPTURE_VARS[name]]):
                problems.append(f"{name}={value!r}: change_capture.{CAPTURE_VARS[name]} is {values['change_capture'][CAPTURE_VARS[name]]!r}")
            continue
        if name not in given:
            problems.append(f"{name}={value!r}: deploy/values.yaml does not set it (the code's default needs no key)")
        elif str(given[name]) != value:
            problems.append(f"{name}={value!r}: deploy/values.yaml sets {given[name]!r}")
        if value == "":
            problems.append(f"{name} is empty")
    problems += [f"{name}: set in deploy/values.yaml, missing from the ConfigMap" for name in sorted(set(given) - set(data))]
    problems += [f"{name}: change capture is off" for name in data if capture_off and name.startswith("LAKEBUS_POSTGRES")]
    return problems


def test_the_configmap_rule_refuses_defaults_and_settings_of_features_that_are_off():
    """The old rule (every deployable variable, defaults written out) is seen failing."""
    from lakebus_dagster.deployment.values import load_values

    target = load_values(DEPLOY / "values.yaml").kubernetes
    values = values_document(DEPLOY / "values.yaml")
    assert configmap_problems(target.configured, values) == []
    found = configmap_problems(target.env, values)  # the old rule: every deployed variable, defaults included
    assert "LAKEBUS_POSTGRES: change capture is off" in found and "LAKEBUS_BUS_SUFFIX is empty" in found, found
    assert any(p.startswith("LAKEBUS_POSTGRES_DB='shop': deploy/values.yaml does not set it") for p in found), found
    assert "LAKEBUS_NAMESPACE: set in deploy/values.yaml, missing from the ConfigMap" in configmap_problems(
        {k: v for k, v in target.configured.items() if k != "LAKEBUS_NAMESPACE"}, values)


def test_secrets_are_only_references():
    """No file in deploy/ holds a secret's value: compose interpolates it from the environment,
    Kubernetes reads it from a Secret; the Postgres and catalog passwords likewise."""
    from lakebus_dagster.deployment.access import OBJECT_STORE_USERS
    from lakebus_dagster.secret_env import S3_ACCESS_KEY_VAR, S3_SECRET_KEY_VAR

    for name, places in deploy_sets().items():
        if name not in SECRETS:
            continue
        for where, value in places:
            if where.endswith("secrets.example.yaml"):
                assert value in PLACEHOLDERS, f"{where}: {name} holds {value!r}, not a placeholder"
            elif isinstance(value, dict):
                assert "secretKeyRef" in value, (name, where, value)
            else:
                match = SECRET_REF.match(str(value))
                # a service's own object-store user stands in for the S3 key pair (the Connect workers' sink)
                allowed = {name} | {u.compose_vars[i] for u in OBJECT_STORE_USERS for i in (0, 1)
                                    if (S3_ACCESS_KEY_VAR, S3_SECRET_KEY_VAR)[i] == name}
                assert match and match.group("name") in allowed, f"{where}: {name} is not a ${{{name}}} reference: {value!r}"
    text = COMPOSE.read_text()
    for password_key in ("DAGSTER_PG_PASSWORD:", "POSTGRES_PASSWORD:", "GRAVITINO_JDBC_PASSWORD:", "MINIO_ROOT_PASSWORD:",
                         "GRAVITINO_S3_SECRET_KEY:", "AWS_SECRET_ACCESS_KEY:", "ROOT_PASSWORD:", "LAKEBUS_CONNECT_PASSWORD:"):
        for line in (line for line in text.splitlines() if line.strip().startswith(password_key)):
            assert SECRET_REF.match(line.split(":", 1)[1].strip()), line


def test_connect_workers_can_resolve_the_sinks_secret_placeholders():
    """The sink's config says ${env:LAKEBUS_S3_ACCESS_KEY_ID}: every worker definition sets both keys."""
    from lakebus_dagster.secret_env import S3_ACCESS_KEY_VAR, S3_SECRET_KEY_VAR

    connect = _yaml_docs(COMPOSE)[0]["services"]["connect"]["environment"]
    assert {S3_ACCESS_KEY_VAR, S3_SECRET_KEY_VAR} <= set(connect)
    (strimzi,) = [d for d in _yaml_docs(K8S / "strimzi" / "kafka-connect.yaml") if d["kind"] == "KafkaConnect"]
    env = {e["name"] for e in strimzi["spec"]["template"]["connectContainer"]["env"]}
    assert {S3_ACCESS_KEY_VAR, S3_SECRET_KEY_VAR} <= env
    assert strimzi["spec"]["config"]["config.providers"].split(",")[0] == "env"
    assert strimzi["metadata"]["annotations"]["strimzi.io/use-connector-resources"] == "false"
    worker = (DEPLOY / "connect" / "connect-distributed.properties").read_text()
    assert "config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider" in worker


# -- compose, through Debian's compose implementation ----------------------------------------------------
def _compose(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.fail("docker-compose (Debian package docker-compose) is not installed; run `make test-tools`")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("LAKEBUS_", "DAGSTER_PG_"))}
    return subprocess.run([binary, "-f", str(COMPOSE), *args], env={**clean, **env}, capture_output=True, text=True, timeout=120)


def test_compose_file_is_valid_and_runs_the_whole_system():
    secrets = COMPOSE_SECRETS
    result = _compose("config", env=secrets)
    assert result.returncode == 0, result.stderr
    resolved = yaml.safe_load(result.stdout)
    assert set(resolved["services"]) == COMPOSE_SERVICES
    code_env = resolved["services"]["dagster-code"]["environment"]
    assert code_env["LAKEBUS_S3_SECRET_ACCESS_KEY"] == "test-secret" and code_env["DAGSTER_PG_PASSWORD"] == "test-pg"
    for service in ("dagster-webserver", "dagster-daemon"):
        assert {"DAGSTER_PG_HOST", "DAGSTER_PG_PASSWORD"} <= set(resolved["services"][service]["environment"])
    for service in ("dagster-code", "connect", "iceberg-rest", "spark-connect"):
        assert resolved["services"][service]["build"]["dockerfile"].startswith("deploy/"), service


def test_compose_refuses_to_start_without_its_secrets():
    result = _compose("config", "-q", env={})
    assert result.returncode != 0
    assert re.search(r"set (DAGSTER_PG_PASSWORD|LAKEBUS_S3_ACCESS_KEY_ID|LAKEBUS_S3_SECRET_ACCESS_KEY)", result.stderr), result.stderr


# -- Kubernetes manifests, through kubectl-validate -------------------------------------------------------
def _kubectl_validate() -> str:
    binary = TOOLS / "kubectl-validate"
    if not binary.is_file():
        pytest.fail(f"{binary} is missing; `make test-tools` builds it with `go install` (see the Makefile's test-tools)")
    return str(binary)


def _core_manifests() -> list[Path]:
    """Manifests of the Kubernetes API's own kinds (Strimzi's custom resources and the PodMonitors are checked apart)."""
    return sorted(p for p in K8S.rglob("*.yaml")
                  if p.name != "dagster-values.yaml" and all(d["apiVersion"] not in (STRIMZI_API, PODMONITOR_API)
                                                              for d in _yaml_docs(p)))


def _validate(paths: list[Path]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [_kubectl_validate(), "--version", KUBE_VERSION, *map(str, paths)], capture_output=True, text=True, timeout=300,
    )


def test_core_kubernetes_manifests_are_valid():
    manifests = _core_manifests()
    kinds = {d["kind"] for p in manifests for d in _yaml_docs(p)}
    assert {"ConfigMap", "Deployment", "Service", "Job", "NetworkPolicy"} <= kinds, kinds
    result = _validate(manifests)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("OK") >= len(manifests), result.stdout


def test_kubernetes_validator_rejects_a_broken_manifest(tmp_path: Path):
    """The validator really checks the API's schemas (one that passes everything proves nothing)."""
    (doc,) = [d for d in _yaml_docs(K8S / "iceberg-rest.yaml") if d["kind"] == "Deployment"]
    doc["spec"]["replicas"] = "one"  # the API's own schema: an integer
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(doc))
    result = _validate([broken])
    assert result.returncode != 0, result.stdout
    assert "spec.replicas" in result.stdout + result.stderr, result.stdout + result.stderr


def strimzi_problems(docs: list[dict]) -> list[str]:
    """What is wrong with lakebus's Strimzi resources in the fields it relies on (the ``v1`` API's names: the
    Strimzi release deploy/README.md names serves no other)."""
    problems = []
    by_kind = {d["kind"]: d for d in docs if d.get("apiVersion") == STRIMZI_API}
    for kind in ("Kafka", "KafkaNodePool", "KafkaConnect"):
        if kind not in by_kind:
            problems.append(f"{kind}: missing")
    pool = by_kind.get("KafkaNodePool", {}).get("spec", {})
    if not set(pool.get("roles", [])) or not set(pool.get("roles", [])) <= {"controller", "broker"}:
        problems.append(f"KafkaNodePool.spec.roles: {pool.get('roles')!r} (controller/broker only: KRaft)")
    if not isinstance(pool.get("replicas"), int) or pool["replicas"] < 1:
        problems.append(f"KafkaNodePool.spec.replicas: {pool.get('replicas')!r}")
    kafka = by_kind.get("Kafka", {})
    if not kafka.get("spec", {}).get("kafka", {}).get("version"):
        problems.append("Kafka.spec.kafka.version: missing")
    if not kafka.get("spec", {}).get("kafka", {}).get("listeners"):
        problems.append("Kafka.spec.kafka.listeners: missing")
    connect = by_kind.get("KafkaConnect", {}).get("spec", {})
    for key in ("bootstrapServers", "image", "config", *STRIMZI_WORKER_FIELDS):
        if key not in connect:
            problems.append(f"KafkaConnect.spec.{key}: missing")
    if not isinstance(connect.get("replicas", 1), int):
        problems.append(f"KafkaConnect.spec.replicas: {connect.get('replicas')!r}")
    return problems


def test_strimzi_resources_have_the_fields_lakebus_relies_on():
    docs = [d for p in sorted((K8S / "strimzi").glob("*.yaml")) for d in _yaml_docs(p)]
    assert strimzi_problems(docs) == []
    typo = [dict(d, spec={**d["spec"], "bootstrapServer": d["spec"]["bootstrapServers"]}) if d["kind"] == "KafkaConnect" else d
            for d in docs]
    for d in typo:
        if d["kind"] == "KafkaConnect":
            d["spec"].pop("bootstrapServers")
    assert "KafkaConnect.spec.bootstrapServers: missing" in strimzi_problems(typo)


# -- the run queue -------------------------------------------------------------------------------------------
def _instance_limits() -> list[dict]:
    config = yaml.safe_load((DEPLOY / "dagster.yaml").read_text())
    assert config["run_coordinator"]["class"] == "QueuedRunCoordinator"
    assert set(config["storage"]) == {"postgres"}
    return config["concurrency"]["runs"]["tag_concurrency_limits"]


def test_helm_values_queue_like_the_production_instance():
    values = _yaml_docs(K8S / "dagster-values.yaml")[0]
    coordinator = values["dagsterDaemon"]["runCoordinator"]
    assert coordinator["type"] == "QueuedRunCoordinator"
    assert values["concurrency"]["enabled"] is True
    assert values["concurrency"]["runs"]["tagConcurrencyLimits"] == _instance_limits()
    instance = yaml.safe_load((DEPLOY / "dagster.yaml").read_text())
    assert values["concurrency"]["runs"]["maxConcurrentRuns"] == instance["concurrency"]["runs"]["max_concurrent_runs"]
    assert values["concurrency"]["pools"]["defaultLimit"] == instance["concurrency"]["pools"]["default_limit"]
    # Dagster refuses the queue's limits in both places (and the chart fails on it)
    assert set(coordinator["config"]["queuedRunCoordinator"]) == {"dequeueIntervalSeconds"}
    monitoring = values["dagsterDaemon"]["runMonitoring"]
    assert (monitoring["startTimeoutSeconds"], monitoring["pollIntervalSeconds"]) == (
        instance["run_monitoring"]["start_timeout_seconds"], instance["run_monitoring"]["poll_interval_seconds"])
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    assert values["postgresql"]["enabled"] is False and values["generatePostgresqlPasswordSecret"] is False
    instance_db = yaml.safe_load((DEPLOY / "dagster.yaml").read_text())["storage"]["postgres"]["postgres_db"]
    assert values["postgresql"]["postgresqlScheme"] == instance_db["scheme"] == "postgresql+psycopg2"


def _camel_keys(node):
    """The Dagster instance's snake_case keys in the Helm chart's camelCase (values stay as they are)."""
    if isinstance(node, dict):
        return {k.split("_")[0] + "".join(p.title() for p in k.split("_")[1:]): _camel_keys(v) for k, v in node.items()}
    return node


def daemon_settings_problems(instance: dict, helm: dict) -> list[str]:
    """Where the Helm values and deploy/dagster.yaml disagree on run retries, sensor threads or tick retention
    (each must be in both: the chart writes its own instance, it does not read deploy/dagster.yaml)."""
    daemon = helm.get("dagsterDaemon", {})
    problems = []
    if "run_retries" not in instance or daemon.get("runRetries") != _camel_keys(instance.get("run_retries")):
        problems.append(f"run retries: Helm {daemon.get('runRetries')} vs dagster.yaml {instance.get('run_retries')}")
    sensors = instance.get("sensors") or {}
    if not sensors or daemon.get("sensors") != _camel_keys(sensors):
        problems.append(f"sensor threads: Helm {daemon.get('sensors')} vs dagster.yaml {sensors}")
    retention = helm.get("retention") or {}
    if "retention" not in instance or retention.get("enabled") is not True or \
            {k: v for k, v in retention.items() if k != "enabled"} != _camel_keys(instance.get("retention")):
        problems.append(f"tick retention: Helm {retention} vs dagster.yaml {instance.get('retention')}")
    return problems


def test_helm_values_retry_thread_and_keep_ticks_like_the_production_instance():
    instance = yaml.safe_load((DEPLOY / "dagster.yaml").read_text())
    helm = _yaml_docs(K8S / "dagster-values.yaml")[0]
    assert daemon_settings_problems(instance, helm) == []
    assert instance["run_retries"]["enabled"] is True and instance["sensors"]["use_threads"] is True
    assert instance["retention"]["sensor"]["purge_after_days"]["skipped"] > 0
    # the check sees each of them missing or apart
    for path, kind in ((("dagsterDaemon", "runRetries"), "run retries"), (("dagsterDaemon", "sensors"), "sensor threads"),
                       (("retention",), "tick retention")):
        broken = yaml.safe_load(yaml.safe_dump(helm))
        holder = broken
        for key in path[:-1]:
            holder = holder[key]
        holder.pop(path[-1])
        assert any(p.startswith(kind) for p in daemon_settings_problems(instance, broken)), kind
    apart = yaml.safe_load(yaml.safe_dump(instance))
    apart["retention"]["sensor"]["purge_after_days"]["skipped"] = 1
    assert any(p.startswith("tick retention") for p in daemon_settings_problems(apart, helm))


def test_jobs_carry_the_tags_the_run_queue_limits():
    from lakebus_dagster.definitions import defs

    limited = {lim["value"] for lim in _instance_limits() if lim["key"] == "lakebus/exclusive"}
    assert limited == {"provisioning", "lakehouse"}
    jobs = {j.name: j for j in defs.get_repository_def().get_all_jobs()}
    expected = {
        "provision_lakebus": "provisioning", "dws_hourly_job": "lakehouse", "dws_daily_job": "lakehouse",
        "lakehouse_maintenance": "lakehouse", "lakehouse_retention": "lakehouse", "requeue_lost_records": "provisioning",
    }  # fmt: skip
    assert {name: jobs[name].tags.get("lakebus/exclusive") for name in expected} == expected
    partition_limit = [lim for lim in _instance_limits() if lim["key"] == "dagster/partition"]
    assert partition_limit == [{"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}]


# -- the settings module accepts what each target sets -----------------------------------------------------
def _deploy_environments() -> dict[str, dict[str, str]]:
    secrets = COMPOSE_SECRETS
    result = _compose("config", env=secrets)
    assert result.returncode == 0, result.stderr
    compose_env = yaml.safe_load(result.stdout)["services"]["dagster-code"]["environment"]
    config_map = _yaml_docs(K8S / "lakebus-config.yaml")[0]["data"]
    return {
        "compose dagster-code": {k: str(v) for k, v in compose_env.items() if k.startswith("LAKEBUS_")},
        "kubernetes lakebus-config + lakebus-secrets": {**config_map, **{k: v for k, v in secrets.items() if k.startswith("LAKEBUS_")}},
    }


def test_settings_load_from_each_deploy_environment(monkeypatch: pytest.MonkeyPatch):
    """load_settings() checks every value (ports, URLs, names): each target's environment passes, and the
    code talks to the services deploy/ names, not the local stack's defaults."""
    from lakebus_dagster.settings import load_settings

    for target, env in _deploy_environments().items():
        for name in [k for k in os.environ if k.startswith("LAKEBUS_")]:
            monkeypatch.delenv(name)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        settings = load_settings()
        assert settings.kafka.bootstrap_servers == env["LAKEBUS_KAFKA_BOOTSTRAP"], target
        assert settings.connect.urls[0] == env["LAKEBUS_CONNECT_URL"], target
        assert settings.lake.catalog_uri == env["LAKEBUS_CATALOG_URI"], target
        assert settings.lake.s3_endpoint == env["LAKEBUS_S3_ENDPOINT"], target
        assert settings.connect.catalog_uri == env["LAKEBUS_CONNECT_CATALOG_URI"], target
        assert settings.lake.warehouse == f"s3://{settings.lake.bucket}/", target
        assert "127.0.0.1" not in " ".join([settings.kafka.bootstrap_servers, settings.connect.urls[0], settings.lake.catalog_uri, settings.lake.s3_endpoint])


def test_catalog_gets_exactly_the_settings_its_entrypoint_requires():
    """deploy/catalog/entrypoint.sh stops on a missing GRAVITINO_* setting: compose and Kubernetes set each
    one, and none it never reads; its JDBC password and S3 keys are secret references."""
    required = set(re.findall(r"\$\{(GRAVITINO_[A-Z0-9_]+):\?", (DEPLOY / "catalog" / "entrypoint.sh").read_text()))
    assert {"GRAVITINO_URI", "GRAVITINO_JDBC_PASSWORD", "GRAVITINO_S3_SECRET_KEY"} <= required
    compose_env = _yaml_docs(COMPOSE)[0]["services"]["iceberg-rest"]["environment"]
    (deployment,) = [d for d in _yaml_docs(K8S / "iceberg-rest.yaml") if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    k8s_env = {e["name"]: e for e in container["env"]}
    assert set(compose_env) == required and set(k8s_env) == required
    for name in ("GRAVITINO_JDBC_PASSWORD", "GRAVITINO_S3_ACCESS_KEY", "GRAVITINO_S3_SECRET_KEY"):
        assert SECRET_REF.match(compose_env[name]), (name, compose_env[name])
        assert "secretKeyRef" in k8s_env[name]["valueFrom"], name


def test_catalog_entrypoint_writes_its_configuration_and_names_a_missing_setting(tmp_path: Path):
    """The entrypoint run for real (bash) against a stand-in server directory whose start script prints the
    configuration it would start with."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "gravitino-iceberg-rest-server.conf").write_text("gravitino.iceberg-rest.shutdown.timeout = 3000\n")
    (tmp_path / "bin").mkdir()
    start = tmp_path / "bin" / "gravitino-iceberg-rest-server.sh"
    start.write_text('#!/bin/bash\n[ "$1" = run ] && cat conf/gravitino-iceberg-rest-server.conf\n')
    start.chmod(0o755)
    compose_env = _yaml_docs(COMPOSE)[0]["services"]["iceberg-rest"]["environment"]
    env = {**{k: f"value-of-{k}" for k in compose_env}, "PATH": os.environ["PATH"], "GRAVITINO_SERVER_HOME": str(tmp_path)}
    entrypoint = str(DEPLOY / "catalog" / "entrypoint.sh")
    result = subprocess.run(["bash", entrypoint], env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    conf = dict(line.split(" = ", 1) for line in result.stdout.splitlines() if " = " in line)
    assert conf["gravitino.iceberg-rest.shutdown.timeout"] == "3000"  # the image's own settings stay
    assert conf["gravitino.iceberg-rest.uri"] == "value-of-GRAVITINO_URI"
    assert conf["gravitino.iceberg-rest.s3-secret-access-key"] == "value-of-GRAVITINO_S3_SECRET_KEY"
    assert conf["gravitino.iceberg-rest.s3-path-style-access"] == "true"
    assert oct((tmp_path / "conf" / "gravitino-iceberg-rest-server.conf").stat().st_mode & 0o777) == "0o600"
    missing = subprocess.run(["bash", entrypoint], env={k: v for k, v in env.items() if k != "GRAVITINO_URI"},
                             capture_output=True, text=True, timeout=30)  # fmt: skip
    assert missing.returncode != 0 and "set GRAVITINO_URI" in missing.stderr, missing.stderr


# -- the Connect workers: compose's worker file (the local stack runs it) and Strimzi's resource ------------
WORKER_FILE = DEPLOY / "connect" / "connect-distributed.properties"
#: keys of the worker file Strimzi sets itself (and refuses in ``spec.config``): the addresses, the plugin path
STRIMZI_OWNS = {"bootstrap.servers", "listeners", "rest.advertised.host.name", "rest.advertised.port", "plugin.path"}
#: worker file keys the KafkaConnect resource sets as its own fields (refused in its ``config``)
STRIMZI_WORKER_FIELDS = {"groupId": "group.id", "configStorageTopic": "config.storage.topic",
                         "offsetStorageTopic": "offset.storage.topic", "statusStorageTopic": "status.storage.topic"}
#: where the KafkaConnect resource's config differs from the worker file, and why
STRIMZI_DIFFERS = {
    **dict.fromkeys(("config.storage.replication.factor", "offset.storage.replication.factor",
                     "status.storage.replication.factor"), "three brokers (the file: compose's one)"),
    "config.providers": "the env provider only (no files mounted for connectors)",
    "config.providers.file.class": "no file provider",
    "config.providers.file.param.allowed.paths": "no file provider",
    "plugin.discovery": "Kafka's default (hybrid_warn): Strimzi's image may carry plugins of its own without manifests",
}


def _properties(path: Path) -> dict[str, str]:
    from lakebus_dagster.stack.deploy_files import read_properties

    return read_properties(path)


def test_the_worker_file_carries_the_settings_the_local_stack_proves():
    """The local stack runs this file (unit/test_deploy_files_run.py): the commit latency on a quiet bus
    and the failover time measured there are this file's values."""
    worker = _properties(WORKER_FILE)
    assert int(worker["offset.flush.interval.ms"]) <= 1000 and int(worker["scheduled.rebalance.max.delay.ms"]) <= 60_000
    dockerfile = (DEPLOY / "connect" / "Dockerfile").read_text()
    assert "COPY deploy/connect/connect-distributed.properties" in dockerfile, "the compose worker no longer reads this file"


def test_strimzi_workers_run_the_worker_files_settings():
    worker = _properties(WORKER_FILE)
    docs = [d for d in _yaml_docs(K8S / "strimzi" / "kafka-connect.yaml") if d["kind"] == "KafkaConnect"]
    assert docs
    for doc in docs:
        config = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in doc["spec"]["config"].items()}
        assert not (STRIMZI_OWNS | set(STRIMZI_WORKER_FIELDS.values())) & set(config), doc["metadata"]["name"]
        config.update({key: str(doc["spec"][field]) for field, key in STRIMZI_WORKER_FIELDS.items() if field in doc["spec"]})
        differ = {k for k in (worker.keys() | config.keys()) - STRIMZI_OWNS if worker.get(k) != config.get(k)}
        assert differ == set(STRIMZI_DIFFERS), doc["metadata"]["name"]


def test_deploy_workers_run_the_local_stacks_default_rebalance_protocol():
    """``connect.protocol`` as the local stack's default (issue 29.2: sessioned; eager never settles
    with the Iceberg sink), written out in compose's worker file and every Strimzi KafkaConnect."""
    from lakebus_dagster.envvars import BY_NAME
    from lakebus_dagster.stack.local_settings import StackSettings

    default = StackSettings.__dataclass_fields__["connect_protocol"].default
    assert default == BY_NAME["LAKEBUS_CONNECT_PROTOCOL"].default == "sessioned"
    assert _properties(DEPLOY / "connect" / "connect-distributed.properties")["connect.protocol"] == default
    for doc in (d for d in _yaml_docs(K8S / "strimzi" / "kafka-connect.yaml") if d["kind"] == "KafkaConnect"):
        assert doc["spec"]["config"]["connect.protocol"] == default, doc["metadata"]["name"]


# -- the code location image: the package alone, attached to a Spark Connect server ------------------
def _instructions(dockerfile: Path) -> list[str]:
    text = dockerfile.read_text().replace("\\\n", " ")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_the_code_location_image_installs_the_package_alone():
    """lakebus/dagster is a plain, non-editable install of the package: it copies nothing of infra/
    (the Maven module builds the Connect and Spark images' jars), has no Maven stage and no JVM,
    because its runs attach to a Spark Connect server."""
    instructions = _instructions(DEPLOY / "dagster" / "Dockerfile")
    copied = [src for line in instructions if line.startswith("COPY") for src in line.split()[1:-1]]
    assert sorted(copied) == ["README.md", "constraints.txt", "deploy/dagster.yaml", "deploy/dagster/workspace.yaml", "lakebus_dagster",
                              "pyproject.toml"]
    assert [line for line in instructions if line.startswith("FROM")] == ["FROM python:3.11-slim-bookworm"]
    installs = [line for line in instructions if "pip install" in line]
    assert installs and not any(re.search(r"\s(-e|--editable)(\s|=)", line) for line in installs)
    assert not re.search(r"infra/|maven|openjdk|jre|JAVA_HOME|JARS_CACHE", " ".join(instructions), re.I)


def test_the_code_location_and_its_runs_attach_to_a_spark_connect_server():
    """compose: the code server's environment (its runs are its subprocesses, DefaultRunLauncher);
    Kubernetes: the ConfigMap the user deployment and the run pods load (checked above)."""
    compose = _yaml_docs(COMPOSE)[0]
    code_env = compose["services"]["dagster-code"]["environment"]
    assert code_env["LAKEBUS_SPARK_REMOTE"].startswith("${LAKEBUS_SPARK_REMOTE:-sc://spark-connect:"), code_env
    assert yaml.safe_load((DEPLOY / "dagster.yaml").read_text())["run_launcher"]["class"] == "DefaultRunLauncher"
    assert _yaml_docs(K8S / "lakebus-config.yaml")[0]["data"]["LAKEBUS_SPARK_REMOTE"].startswith("sc://")


def test_with_a_spark_connect_server_the_code_location_locates_no_jars_and_starts_no_jvm(tmp_path: Path):
    """What the image relies on: with LAKEBUS_SPARK_REMOTE set, loading the definitions neither
    locates the Spark jars (that hashes infra/maven, absent from the image) nor starts a JVM (no
    JAVA_HOME that exists here); the Spark resource holds the remote and no jars_dir."""
    script = "\n".join([
        "import lakebus_dagster.lake.jars as jars",
        "def refuse(*args, **kwargs): raise AssertionError('the code location located the Spark jars')",
        "jars.maven_sources_digest = refuse",
        "from lakebus_dagster.definitions import defs",
        "defs.get_repository_def()",
        "spark = defs.resources['spark']",
        "assert (spark.remote, spark.jars_dir) == ('sc://spark.example:15002', None), (spark.remote, spark.jars_dir)",
        "from pyspark import SparkContext",
        "assert SparkContext._gateway is None, 'a JVM gateway was started'",
    ])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKEBUS_", "JAVA_HOME", "SPARK_"))}
    env.update({"LAKEBUS_SPARK_REMOTE": "sc://spark.example:15002", "LAKEBUS_STATE_DIR": str(tmp_path / "state"),
                "JAVA_HOME": str(tmp_path / "no-jvm"), "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"})
    result = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]


def test_an_embedded_session_without_jars_fails_with_one_line(tmp_path: Path):
    import dagster as dg

    from lakebus_dagster.defs.spark import LakeSparkResource
    from lakebus_dagster.lake.spark import spark_jars

    resource = LakeSparkResource(remote=None, jars_dir=None, catalog_uri="http://c:8181", warehouse="s3://w/",
                                 s3_endpoint="http://s:9000", access_key_id="a", secret_access_key="b")
    with pytest.raises(dg.Failure) as failure:
        resource._jars()
    assert "needs `jars_dir`" in str(failure.value) and "\n" not in str(failure.value)
    with pytest.raises(FileNotFoundError) as missing:
        spark_jars(tmp_path)  # what build_resources' jars_dir holds where nothing fetched them (the image)
    assert str(missing.value).startswith(f"no Iceberg Spark jars under {tmp_path / 'spark'}") and "\n" not in str(missing.value)


# --- images: deploy/README.md builds every Dockerfile under the tag compose and k8s run ---------------

README = DEPLOY / "README.md"
BUILD_LINE = re.compile(r"^docker build -f (\S+)(?: --build-arg \S+)* -t (\S+) \.$", re.MULTILINE)
NUMBER_WORDS = {"three": 3, "four": 4, "five": 5}


def _compose_images_by_dockerfile() -> dict[str, set[str]]:
    """deploy/<x>/Dockerfile -> the image names compose gives the services it builds."""
    images: dict[str, set[str]] = {}
    for service in (yaml.safe_load(COMPOSE.read_text())["services"] or {}).values():
        build = service.get("build")
        if isinstance(build, dict) and build.get("dockerfile"):
            images.setdefault(build["dockerfile"], set()).add(service["image"])
    return images


def _kubernetes_lakebus_images() -> set[str]:
    """``lakebus/...`` images the manifests and the Helm values run (``image:`` strings and the chart's repository/tag)."""
    found: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            image = node.get("image")
            if isinstance(image, str) and image.startswith("lakebus/"):
                found.add(image)
            if isinstance(image, dict) and str(image.get("repository", "")).startswith("lakebus/"):
                found.add(f"{image['repository']}:{image['tag']}")
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in sorted(K8S.rglob("*.yaml")):
        for doc in _yaml_docs(path):
            walk(doc)
    return found


def readme_build_problems(readme: str) -> list[str]:
    builds = BUILD_LINE.findall(readme)
    built = {tag for _, tag in builds}
    problems = []
    dockerfiles = sorted(p.relative_to(ROOT).as_posix() for p in DEPLOY.rglob("Dockerfile"))
    compose = _compose_images_by_dockerfile()
    for dockerfile in dockerfiles:
        tags = {tag for path, tag in builds if path == dockerfile}
        if not tags:
            problems.append(f"{dockerfile}: no `docker build -f {dockerfile} -t ... .` line")
        for image in sorted(compose.get(dockerfile, set())):
            if image not in tags:
                problems.append(f"{dockerfile}: compose runs {image}, the README builds {sorted(tags)}")
    for image in sorted(_kubernetes_lakebus_images() - built):
        problems.append(f"k8s runs {image}, the README has no build line for it")
    for path, _ in builds:
        if path not in dockerfiles:
            problems.append(f"the README builds {path}, which is not a Dockerfile under deploy/")
    count = re.search(r"applies: (\w+) images", readme)
    if not count or NUMBER_WORDS.get(count.group(1)) != len(dockerfiles):
        problems.append(f"the README's opening does not say {len(dockerfiles)} images")
    return problems


def test_readme_builds_every_dockerfile():
    assert sorted(_compose_images_by_dockerfile()) == sorted(
        p.relative_to(ROOT).as_posix() for p in DEPLOY.rglob("Dockerfile")
    ), "compose builds every Dockerfile under deploy/"
    assert readme_build_problems(README.read_text()) == []


def test_readme_build_check_sees_a_missing_or_mistagged_build_line():
    readme = README.read_text()
    spark = "docker build -f deploy/spark/Dockerfile -t lakebus/spark-connect:4.1.3 .\n"
    assert spark in readme
    assert any("deploy/spark/Dockerfile: no" in p for p in readme_build_problems(readme.replace(spark, "")))
    retagged = readme.replace(spark, spark.replace(":4.1.3", ":4.1.2"))
    assert any("compose runs lakebus/spark-connect:4.1.3" in p for p in readme_build_problems(retagged))
    strimzi = re.search(r"^docker build .* -t lakebus/connect-strimzi:0\.1\.0 \.\n", readme, re.MULTILINE).group(0)
    assert any("k8s runs lakebus/connect-strimzi:0.1.0" in p for p in readme_build_problems(readme.replace(strimzi, "")))
