"""deploy/'s values come from one file (issue 31.1): ``lakebus deploy render`` writes the compose file,
the Dagster instance, the Spark Connect configuration, the ConfigMaps and the Helm values from
``deploy/values.yaml`` through the settings the code reads, and the other manifests take the values from
the one ConfigMap ``lakebus-config``.

* the committed files are what the render gives (``lakebus deploy render --check``);
* another bucket, region, catalog URI, pool limit, logs bucket and start timeout reach every artifact (resolved as compose, Kubernetes, Spark and
  Dagster would read them), and no old value is left anywhere under deploy/ — a literal put back in any
  file (rendered, hand-written or a template) fails the scan;
* the values are checked as the code checks them (a secret, a bad bucket: one line).
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

from lakebus_dagster.deployment import render as deploy_render
from lakebus_dagster.deployment.values import ValuesError, load_values
from lakebus_dagster.envvars import SettingsError

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
VALUES = DEPLOY / "values.yaml"
COMPOSE_SECRETS = {"LAKEBUS_S3_ACCESS_KEY_ID": "a", "LAKEBUS_S3_SECRET_ACCESS_KEY": "b", "DAGSTER_PG_PASSWORD": "c",
                   "MINIO_ROOT_USER": "f", "MINIO_ROOT_PASSWORD": "g", "LAKEBUS_CONNECT_PASSWORD": "h", "CONNECT_S3_ACCESS_KEY_ID": "i",
                   "CONNECT_S3_SECRET_ACCESS_KEY": "j", "CATALOG_S3_ACCESS_KEY_ID": "k", "CATALOG_S3_SECRET_ACCESS_KEY": "l",
                   "SPARK_S3_ACCESS_KEY_ID": "m", "SPARK_S3_SECRET_ACCESS_KEY": "n",
                   "DAGSTER_COMPUTE_LOGS_ACCESS_KEY_ID": "d", "DAGSTER_COMPUTE_LOGS_SECRET_ACCESS_KEY": "e",
                   "OAUTH2_PROXY_CLIENT_ID": "o", "OAUTH2_PROXY_CLIENT_SECRET": "p", "OAUTH2_PROXY_COOKIE_SECRET": "q"}
NEW = {"bucket": "zz-lake-bucket", "region": "eu-north-7", "cores": 7, "logs": "zz-logs-bucket", "timeout": 222,
       "catalog": {"compose": "http://zz-catalog:9001/iceberg", "kubernetes": "http://zz-catalog.lakebus.svc:9001/iceberg"}}


def _old_values() -> dict:
    doc = yaml.safe_load(VALUES.read_text())
    return {"bucket": doc["settings"]["LAKEBUS_BUCKET"], "region": doc["settings"]["LAKEBUS_S3_REGION"],
            "cores": doc["spark_connect"]["cores"], "logs": doc["compute_logs"]["bucket"],
            "timeout": doc["run_monitoring"]["start_timeout_seconds"],
            "catalog": {t: doc["targets"][t]["LAKEBUS_CATALOG_URI"] for t in ("compose", "kubernetes")}}


def literal_problems(root: Path, old: dict) -> list[str]:
    """``file:line: text`` for every place under ``root`` (a deploy/ tree) that still spells an old value:
    the region and the catalog URIs anywhere, the buckets where a bucket is named (``s3://b``, ``: b``, ``local/b``, ``arn:…:::b``,
    `` `b` ``), the pool limit as ``local[N]`` / a pool limit, the run-monitoring timeout. The values file
    itself is the source and is not scanned."""
    buckets = "|".join(re.escape(b) for b in (old["bucket"], old["logs"]))
    patterns = [
        re.compile(re.escape(old["region"])),
        re.compile(rf"s3a?://(?:{buckets})\b|arn:aws:s3:::(?:{buckets})\b|local/(?:{buckets})\b|`(?:{buckets})`"
                   rf"|(?:bucket|BUCKET)[\"']?\s*[:=]\s*[\"']?(?:{buckets})[\"']?\s*$"),
        re.compile(rf"local\[{old['cores']}\]|(?:default_limit|defaultLimit):\s*{old['cores']}\b"),
        re.compile(rf"(?:start_timeout_seconds|startTimeoutSeconds):\s*{old['timeout']}\b"),
        re.compile("|".join(re.escape(uri) for uri in old["catalog"].values())),
    ]
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != "values.yaml"):
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if any(p.search(line) for p in patterns):
                found.append(f"{path.relative_to(root).as_posix()}:{number}: {line.strip()}")
    return found


def _values_with(path: Path, new: dict) -> Path:
    doc = yaml.safe_load(VALUES.read_text())
    doc["settings"]["LAKEBUS_BUCKET"], doc["settings"]["LAKEBUS_S3_REGION"] = new["bucket"], new["region"]
    doc["spark_connect"]["cores"] = new["cores"]
    doc["compute_logs"]["bucket"] = new["logs"]
    doc["run_monitoring"]["start_timeout_seconds"] = new["timeout"]
    for target, uri in new["catalog"].items():
        doc["targets"][target]["LAKEBUS_CATALOG_URI"] = doc["targets"][target]["LAKEBUS_CONNECT_CATALOG_URI"] = uri
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def moved(tmp_path_factory) -> Path:
    """A copy of deploy/ rendered from values with another bucket, region, pool limit, logs bucket and timeout."""
    root = tmp_path_factory.mktemp("deploy") / "deploy"
    shutil.copytree(DEPLOY, root)
    values = _values_with(root / "values.yaml", NEW)
    deploy_render.write(deploy_render.render(values), root)
    return root


def test_the_committed_files_are_what_the_values_render():
    assert deploy_render.stale(deploy_render.render()) == [], "run `lakebus deploy render` and commit the result"


def test_render_check_exits_1_naming_a_stale_file(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEBUS_")}
    ok = subprocess.run([sys.executable, "-m", "lakebus_dagster.cli", "deploy", "render", "--check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    conf = tmp_path / "deploy" / "spark" / "spark-connect.conf"
    conf.write_text(conf.read_text() + "spark.sql.catalog.lake.client.region=somewhere-else\n")
    stale = subprocess.run([sys.executable, "-m", "lakebus_dagster.cli", "deploy", "render", "--check", "--out", str(tmp_path / "deploy")], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120)
    assert stale.returncode == 1 and stale.stdout.count("\n") == 1 and "spark-connect.conf is not what" in stale.stdout, stale


def _k8s_env(container: dict, config_map: dict) -> dict[str, str]:
    """A container's environment as Kubernetes resolves it (values, and configMapKeyRef into ``config_map``)."""
    env = {}
    for item in container["env"]:
        ref = (item.get("valueFrom") or {}).get("configMapKeyRef")
        if ref:
            assert ref["name"] == config_map["metadata"]["name"], item
            env[item["name"]] = config_map["data"][ref["key"]]
        elif "value" in item:
            env[item["name"]] = str(item["value"])
    return env


def _docs(path: Path) -> dict[str, dict]:
    return {d["kind"]: d for d in yaml.safe_load_all(path.read_text()) if d}


def _properties(text: str) -> dict[str, str]:
    return dict(ln.split("=", 1) for ln in (ln.strip() for ln in text.splitlines()) if ln and not ln.startswith("#"))


def test_another_bucket_region_and_pool_limit_reach_every_compose_artifact(moved: Path):
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.fail("docker-compose (Debian package docker-compose) is not installed; run `make test-tools`")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("LAKEBUS_", "DAGSTER_"))}
    result = subprocess.run([binary, "-f", str(moved / "compose.yaml"), "config"], env={**clean, **COMPOSE_SECRETS},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    code = services["dagster-code"]["environment"]
    assert (code["LAKEBUS_BUCKET"], code["LAKEBUS_WAREHOUSE"], code["LAKEBUS_S3_REGION"]) == (
        NEW["bucket"], f"s3://{NEW['bucket']}/", NEW["region"])
    catalog = services["iceberg-rest"]["environment"]
    assert (catalog["GRAVITINO_WAREHOUSE"], catalog["GRAVITINO_S3_REGION"]) == (f"s3://{NEW['bucket']}/", NEW["region"])
    assert services["minio"]["environment"]["MINIO_REGION"] == NEW["region"]
    for name in ("connect", "spark-connect", "dagster-code", "dagster-webserver", "dagster-daemon"):
        assert services[name]["environment"]["AWS_REGION"] == NEW["region"], name
    assert f"local/{NEW['logs']}" in " ".join(services["minio-init"]["command"])
    assert code["LAKEBUS_CATALOG_URI"] == code["LAKEBUS_CONNECT_CATALOG_URI"] == NEW["catalog"]["compose"]
    spark = _properties((moved / "spark" / "spark-connect.conf").read_text())
    assert spark["spark.sql.catalog.lake.uri"] == NEW["catalog"]["compose"]
    assert spark["spark.sql.catalog.lake.warehouse"] == f"s3://{NEW['bucket']}/"
    assert spark["spark.sql.catalog.lake.client.region"] == NEW["region"]
    assert spark["spark.master"] == f"local[{NEW['cores']}]"
    instance = yaml.safe_load((moved / "dagster.yaml").read_text())
    assert instance["concurrency"]["pools"]["default_limit"] == NEW["cores"]
    assert instance["run_monitoring"]["start_timeout_seconds"] == NEW["timeout"]
    assert (instance["compute_logs"]["config"]["bucket"], instance["compute_logs"]["config"]["region"]) == (NEW["logs"], NEW["region"])


def test_another_bucket_region_and_pool_limit_reach_every_kubernetes_artifact(moved: Path):
    k8s = moved / "k8s"
    config_map = _docs(k8s / "lakebus-config.yaml")["ConfigMap"]
    data = config_map["data"]
    assert (data["LAKEBUS_BUCKET"], data["LAKEBUS_WAREHOUSE"], data["LAKEBUS_S3_REGION"], data["AWS_REGION"]) == (
        NEW["bucket"], f"s3://{NEW['bucket']}/", NEW["region"], NEW["region"])
    (catalog,) = _docs(k8s / "iceberg-rest.yaml")["Deployment"]["spec"]["template"]["spec"]["containers"]
    env = _k8s_env(catalog, config_map)
    assert (env["GRAVITINO_WAREHOUSE"], env["GRAVITINO_S3_REGION"]) == (f"s3://{NEW['bucket']}/", NEW["region"])
    assert env["GRAVITINO_S3_ENDPOINT"] == data["LAKEBUS_S3_ENDPOINT"]
    spark = _docs(k8s / "spark-connect.yaml")
    conf = _properties(spark["ConfigMap"]["data"]["spark-connect.conf"])
    assert (conf["spark.sql.catalog.lake.warehouse"], conf["spark.sql.catalog.lake.client.region"], conf["spark.master"]) == (
        f"s3://{NEW['bucket']}/", NEW["region"], f"local[{NEW['cores']}]")
    assert conf["spark.sql.catalog.lake.uri"] == data["LAKEBUS_CATALOG_URI"] == NEW["catalog"]["kubernetes"]
    (server,) = spark["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert _k8s_env(server, config_map)["AWS_REGION"] == NEW["region"]
    connect = _docs(k8s / "strimzi" / "kafka-connect.yaml")["KafkaConnect"]
    assert _k8s_env(connect["spec"]["template"]["connectContainer"], config_map)["AWS_REGION"] == NEW["region"]
    values = yaml.safe_load((k8s / "dagster-values.yaml").read_text())
    assert values["concurrency"]["pools"]["defaultLimit"] == NEW["cores"]
    assert values["dagsterDaemon"]["runMonitoring"]["startTimeoutSeconds"] == NEW["timeout"]
    logs = values["computeLogManager"]["config"]["s3ComputeLogManager"]
    assert (logs["bucket"], logs["region"]) == (NEW["logs"], NEW["region"])


def test_no_old_value_is_left_anywhere_under_deploy(moved: Path):
    assert literal_problems(moved, _old_values()) == []


def test_the_literal_scan_sees_a_value_put_back(moved: Path, tmp_path: Path):
    """Each kind of literal, put back into a copy of the moved tree, is found (a scan that finds nothing proves nothing)."""
    old = _old_values()
    root = tmp_path / "deploy"
    shutil.copytree(moved, root)
    catalog = root / "k8s" / "iceberg-rest.yaml"
    catalog.write_text(catalog.read_text().replace(
        "- name: GRAVITINO_S3_REGION\n              valueFrom: {configMapKeyRef: {name: lakebus-config, key: LAKEBUS_S3_REGION}}",
        f"- {{name: GRAVITINO_S3_REGION, value: {old['region']}}}"))
    (root / "templates" / "spark" / "spark-connect.conf").write_text(f"spark.sql.catalog.lake.warehouse=s3://{old['bucket']}/\n")
    readme = root / "README.md"
    readme.write_text(readme.read_text() + f"\nthe bucket `{old['bucket']}`; spark.master=local[{old['cores']}]\n")
    found = literal_problems(root, old)
    assert [f.split(":", 1)[0] for f in found] == ["README.md", "k8s/iceberg-rest.yaml", "templates/spark/spark-connect.conf"], found


def test_the_committed_tree_spells_each_value_only_where_the_render_put_it():
    """With the shipped values, the old-value scan of deploy/ finds the rendered files only (every
    hand-written file and template names no bucket, region or limit of its own)."""
    rendered = set(deploy_render.templates())
    places = {f.split(":", 1)[0] for f in literal_problems(DEPLOY, _old_values())}
    assert places <= rendered, sorted(places - rendered)


def test_compose_checks_connect_like_the_local_probe():
    """compose's Connect healthcheck waits for every plugin class the local stack's probe waits for."""
    from lakebus_dagster.stack.kafka_services import CONNECT_PLUGIN_CLASSES

    test = " ".join(yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]["connect"]["healthcheck"]["test"])
    assert "connectorsOnly=false" in test
    assert [c.rsplit(".", 1)[1] for c in CONNECT_PLUGIN_CLASSES if c.rsplit(".", 1)[1] not in test] == []


def test_the_rendered_instance_is_valid_for_dagster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """deploy/dagster.yaml with only its storage swapped for a local one: Dagster accepts the queue, the pool
    limit and run monitoring together (it refuses queue limits in run_coordinator next to pools), and builds
    the S3 compute log manager against the endpoint from the environment."""
    import dagster as dg

    config = yaml.safe_load((DEPLOY / "dagster.yaml").read_text())
    config.pop("storage")
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.setenv("DAGSTER_COMPUTE_LOGS_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        concurrency = instance.get_concurrency_config()
        assert concurrency.pool_config.default_pool_limit == load_values(VALUES).spark_cores
        assert type(instance.compute_log_manager).__name__ == "S3ComputeLogManager"
        assert instance.run_monitoring_start_timeout_seconds == config["run_monitoring"]["start_timeout_seconds"]


def test_values_are_checked_as_the_code_checks_settings(tmp_path: Path):
    doc = yaml.safe_load(VALUES.read_text())
    bad = tmp_path / "values.yaml"
    bad.write_text(yaml.safe_dump({**doc, "settings": {**doc["settings"], "LAKEBUS_S3_SECRET_ACCESS_KEY": "x"}}))
    with pytest.raises(ValuesError, match="is a secret and is refused"):
        load_values(bad)
    bad.write_text(yaml.safe_dump({**doc, "settings": {**doc["settings"], "LAKEBUS_BUCKET": "Not_A_Bucket"}}))
    with pytest.raises(SettingsError, match="LAKEBUS_BUCKET") as error:
        load_values(bad)
    assert "\n" not in str(error.value)
    bad.write_text(yaml.safe_dump({**doc, "spark_connect": {"cores": 0}}))
    with pytest.raises(ValuesError, match="spark_connect.cores=0"):
        load_values(bad)
    # Kafka over TLS on Kubernetes: Strimzi's cluster CA is no public one, so the pods need its file's path
    k8s = doc["targets"]["kubernetes"]
    for ca in ({}, {"LAKEBUS_KAFKA_SSL_CA_LOCATION": "kafka-ca/ca.crt"}):
        target = {**{k: v for k, v in k8s.items() if k != "LAKEBUS_KAFKA_SSL_CA_LOCATION"}, **ca}
        bad.write_text(yaml.safe_dump({**doc, "targets": {**doc["targets"], "kubernetes": target}}))
        with pytest.raises(ValuesError, match="LAKEBUS_KAFKA_SSL_CA_LOCATION=.*absolute path"):
            load_values(bad)


def test_the_addresses_name_the_ports_the_services_listen_on():
    """Ports: the values file's addresses are the one place a client's port is written; the servers'
    own files (the images' configuration, the Services) listen where those addresses point."""
    values = load_values(VALUES)
    compose, k8s = values.compose, values.kubernetes
    for variable in ("LAKEBUS_KAFKA_BOOTSTRAP", "LAKEBUS_CONNECT_URL", "LAKEBUS_CATALOG_URI", "LAKEBUS_S3_ENDPOINT", "LAKEBUS_SPARK_REMOTE"):
        assert compose.port(variable) == k8s.port(variable), f"{variable}: compose and Kubernetes reach different ports"
    entrypoint = (DEPLOY / "catalog" / "entrypoint.sh").read_text()
    assert f'echo "${{p}}httpPort = {compose.port("LAKEBUS_CATALOG_URI")}"' in entrypoint
    assert compose.env["LAKEBUS_CATALOG_URI"].endswith("/iceberg") and k8s.env["LAKEBUS_CATALOG_URI"].endswith("/iceberg")
    worker = _properties((DEPLOY / "connect" / "connect-distributed.properties").read_text())
    assert worker["listeners"].endswith(f":{compose.port('LAKEBUS_CONNECT_URL')}")
    assert worker["bootstrap.servers"] == compose.env["LAKEBUS_KAFKA_BOOTSTRAP"]
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    assert f"PLAINTEXT://:{compose.port('LAKEBUS_KAFKA_BOOTSTRAP')}" in services["kafka"]["environment"]["KAFKA_LISTENERS"]
    assert services["minio"]["command"][:2] == ["server", "/data"] and compose.port("LAKEBUS_S3_ENDPOINT") == 9000, "MinIO's default API port"
    kafka = _docs(DEPLOY / "k8s" / "strimzi" / "kafka.yaml")["Kafka"]
    assert [lst["port"] for lst in kafka["spec"]["kafka"]["listeners"] if lst["tls"]] == [k8s.port("LAKEBUS_KAFKA_BOOTSTRAP")]
    catalog = _docs(DEPLOY / "k8s" / "iceberg-rest.yaml")
    (container,) = catalog["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert [p["containerPort"] for p in container["ports"]] == [k8s.port("LAKEBUS_CATALOG_URI")]
    assert [p["port"] for p in catalog["Service"]["spec"]["ports"]] == [k8s.port("LAKEBUS_CATALOG_URI")]
    spark = _docs(DEPLOY / "k8s" / "spark-connect.yaml")["Service"]
    assert {p["name"]: p["port"] for p in spark["spec"]["ports"]}["grpc"] == k8s.port("LAKEBUS_SPARK_REMOTE")
