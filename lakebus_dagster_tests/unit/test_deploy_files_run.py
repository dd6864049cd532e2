"""The deploy files are the files the tests run (issue 31.2): the local stack's Connect worker
properties, Spark Connect configuration and Dagster instance are deploy/'s files with only the
declared keys changed (``lakebus_dagster/stack/deploy_files.py``, deploy/README.md's table).

Each expected difference below is written out key by key: the overlay cannot grow (nor a key of a
deploy file be dropped) without one of these tests failing. A broken key put into a deploy file
reaches the process's file (and Dagster refuses a broken instance); that the Connect worker and the
Spark Connect server then refuse to start, naming the file, was seen on the real stack (the report
of issue 31.2 says how).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from lakebus_dagster.stack import dagster_ui, deploy_files, kafka_services, spark_services
from lakebus_dagster.stack.deploy_files import INSTANCE, SPARK_CONNECT, WORKER, flatten, read_properties
from lakebus_dagster.stack.errors import StackError
from lakebus_dagster.stack.local_settings import load_stack_settings

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "deploy" / "README.md"
#: ports other than the files' own, so every substituted port shows
PORTS = {"LAKEBUS_KAFKA_PORT": "21092", "LAKEBUS_CONNECT_PORT": "22083", "LAKEBUS_REST_CATALOG_PORT": "22181",
         "LAKEBUS_S3_PORT": "22000", "LAKEBUS_SPARK_CONNECT_PORT": "21002", "LAKEBUS_SPARK_WEBUI_PORT": "22090"}

WORKER_ADDRESSES = {"bootstrap.servers", "listeners", "rest.advertised.host.name", "rest.advertised.port", "plugin.path",
                    "config.providers.file.param.allowed.paths"}
REPLICATION = {"config.storage.replication.factor", "offset.storage.replication.factor", "status.storage.replication.factor"}
SASL = {f"{p}{k}" for p in ("", "producer.", "consumer.", "admin.")
        for k in ("security.protocol", "sasl.mechanism", "sasl.jaas.config", "ssl.truststore.type", "ssl.truststore.location")}
REST_TLS = {"listeners.https.ssl.keystore.type", "listeners.https.ssl.keystore.location", "listeners.https.ssl.keystore.password"}
SPARK_LOCAL = {"spark.master", "spark.driver.memory", "spark.connect.grpc.binding.address", "spark.connect.grpc.binding.port",
               "spark.ui.port", "spark.jars", "spark.cores.max", "spark.executor.memory", "spark.executor.extraJavaOptions",
               "spark.sql.catalog.lake.uri", "spark.sql.catalog.lake.s3.endpoint"}
CATALOG_AUTH = {"spark.sql.catalog.lake.credential", "spark.sql.catalog.lake.scope", "spark.sql.catalog.lake.oauth2-server-uri"}
INSTANCE_OVERLAY = {"storage", "compute_logs", "concurrency.pools.default_limit"}


@pytest.fixture
def stack(clean_env, tmp_path):
    """``stack(**env)``: the local stack's settings with ``env`` on top of the ports above."""
    clean_env.setenv("LAKEBUS_S3_ACCESS_KEY_ID", "ak")
    clean_env.setenv("LAKEBUS_S3_SECRET_ACCESS_KEY", "sk")
    (tmp_path / "jars" / "spark").mkdir(parents=True)
    (tmp_path / "jars" / "spark" / "iceberg.jar").touch()

    def load(**env: str):
        for key, value in {**PORTS, **env}.items():
            clean_env.setenv(key, value)
        return load_stack_settings()
    return load


def _node(spec, settings, tmp_path: Path):
    return spec.nodes(settings, tmp_path / "jars", "java", ("ak", "sk"))[0]


def _differ(base: dict, local: dict) -> set[str]:
    return {key for key in base.keys() | local.keys() if base.get(key) != local.get(key)}


def test_the_declared_keys_are_these_and_deploy_readme_lists_them():
    """The overlay, literally (a key added to deploy_files.py fails here), and deploy/README.md's table says the same."""
    assert set(WORKER.substituted) == WORKER_ADDRESSES
    assert set(WORKER.overlaid) == REPLICATION | SASL | REST_TLS | {"connect.protocol", "scheduled.rebalance.max.delay.ms",
                                                                  "exactly.once.source.support", "rest.extension.classes"}
    assert set(SPARK_CONNECT.substituted) == {"spark.connect.grpc.binding.address", "spark.connect.grpc.binding.port", "spark.ui.port",
                                              "spark.jars", "spark.sql.catalog.lake.uri", "spark.sql.catalog.lake.s3.endpoint",
                                              "spark.sql.catalog.lake.credential", "spark.sql.catalog.lake.token"}
    assert set(SPARK_CONNECT.overlaid) == {"spark.master", "spark.driver.memory", "spark.cores.max", "spark.executor.memory",
                                           "spark.executor.extraJavaOptions", "spark.sql.catalog.lake.warehouse",
                                           "spark.sql.catalog.lake.client.region", "spark.sql.catalog.lake.scope",
                                           "spark.sql.catalog.lake.oauth2-server-uri"}
    assert set(INSTANCE.overlaid) == INSTANCE_OVERLAY and not INSTANCE.substituted
    section = README.read_text().split("## What the local stack runs of deploy/", 1)[1].split("\n## ", 1)[0]
    table: dict[str, dict[str, set[str]]] = {}
    for row in (line for line in section.splitlines() if line.startswith("| `")):
        file, keys, kind = (cell.strip() for cell in row.strip("|").split("|")[:3])
        table.setdefault(file.strip("`"), {}).setdefault(kind, set()).update(re.findall(r"`([^`]+)`", keys))
    for spec in (WORKER, SPARK_CONNECT, INSTANCE):
        listed = table.pop(spec.name.removeprefix("deploy/"))
        assert listed.get("substituted", set()) == set(spec.substituted), spec.name
        assert listed.get("overlaid", set()) == set(spec.overlaid), spec.name
    assert table == {}


def test_the_default_stacks_worker_runs_the_compose_worker_file_with_only_its_addresses_substituted(stack, tmp_path):
    settings = stack()
    base, local = read_properties(WORKER.path), kafka_services.connect_worker_properties(_node(kafka_services.CONNECT_WORKER, settings, tmp_path))
    assert _differ(base, local) == WORKER_ADDRESSES
    assert local["bootstrap.servers"] == "127.0.0.1:21092" and local["listeners"] == "http://127.0.0.1:22083"
    assert local["plugin.path"] == f"{tmp_path / 'jars' / 'connect-plugins'},{settings.state_dir / 'connect-plugins'}"
    # what the worker starts with: the file written, its header naming the source and the changed keys
    kafka_services._prepare_worker(_node(kafka_services.CONNECT_WORKER, settings, tmp_path))
    written = kafka_services._worker_props(_node(kafka_services.CONNECT_WORKER, settings, tmp_path))
    assert read_properties(written) == local
    assert written.read_text().startswith("# deploy/connect/connect-distributed.properties, as the local stack runs it")


@pytest.mark.parametrize("env, overlay", [
    ({"LAKEBUS_PROFILE": "cluster"}, REPLICATION),
    ({"LAKEBUS_PROFILE": "secured"}, SASL | REST_TLS | {"rest.extension.classes"}),
    ({"LAKEBUS_POSTGRES": "on", "LAKEBUS_POSTGRES_PORT": "31432"}, {"exactly.once.source.support"}),
    ({"LAKEBUS_CONNECT_PROTOCOL": "eager"}, {"connect.protocol"}),
], ids=["cluster", "secured", "cdc", "eager"])
def test_each_profile_adds_only_its_declared_overlay_to_the_worker_file(stack, tmp_path, env, overlay):
    settings = stack(**env)
    local = kafka_services.connect_worker_properties(_node(kafka_services.CONNECT_WORKER, settings, tmp_path))
    assert _differ(read_properties(WORKER.path), local) == WORKER_ADDRESSES | overlay


def test_the_spark_connect_server_runs_deploys_conf_with_only_the_declared_keys(stack, tmp_path):
    settings = stack()
    base = read_properties(SPARK_CONNECT.path)
    local = spark_services.spark_connect_conf(_node(spark_services.SPARK_CONNECT, settings, tmp_path))
    assert _differ(base, local) == SPARK_LOCAL
    assert local["spark.sql.catalog.lake.uri"] == "http://127.0.0.1:22181" and local["spark.connect.grpc.binding.port"] == "21002"
    # the warehouse and region are values.yaml's unless the local settings name others
    other = spark_services.spark_connect_conf(_node(spark_services.SPARK_CONNECT, stack(LAKEBUS_BUCKET="other-bucket"), tmp_path))
    assert _differ(base, other) == SPARK_LOCAL | {"spark.sql.catalog.lake.warehouse"}


def test_the_secured_spark_connect_server_adds_the_catalogs_auth_only(stack, tmp_path):
    settings = stack(LAKEBUS_PROFILE="secured", LAKEBUS_CATALOG_CREDENTIAL="lakebus:not-a-real-secret")
    local = spark_services.spark_connect_conf(_node(spark_services.SPARK_CONNECT, settings, tmp_path))
    assert _differ(read_properties(SPARK_CONNECT.path), local) == SPARK_LOCAL | CATALOG_AUTH


def test_the_local_instance_is_deploys_with_only_its_storage_run_logs_and_pool_limit_overlaid(tmp_path):
    import dagster as dg

    base, local = flatten(yaml.safe_load(INSTANCE.path.read_text())), flatten(dagster_ui.instance_config(tmp_path))
    overlaid = {key for key in _differ(base, local)}
    assert {key for key in overlaid if not any(key == o or key.startswith(o + ".") for o in INSTANCE_OVERLAY)} == set()
    assert {o for o in INSTANCE_OVERLAY if any(key == o or key.startswith(o + ".") for key in overlaid)} == INSTANCE_OVERLAY
    dagster_ui.write_instance_config(tmp_path)
    dagster_ui.check_instance(tmp_path)
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.get_concurrency_config().pool_config.default_pool_limit == spark_services.SPARK_CONNECT_CORES
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        assert instance.run_monitoring_enabled and instance.run_retries_enabled
    # a test's own instance is written as given
    dagster_ui.write_instance_config(tmp_path, "telemetry:\n  enabled: false\n")
    assert (tmp_path / "dagster.yaml").read_text() == "telemetry:\n  enabled: false\n"


def test_a_broken_key_in_a_deploy_file_reaches_the_local_process(stack, tmp_path, monkeypatch):
    """A wrong converter class in compose's worker file is what the local worker gets (which then
    refuses to start: seen on the real stack); a wrong Spark property likewise."""
    broken = tmp_path / "connect-distributed.properties"
    broken.write_text(WORKER.path.read_text().replace("json.JsonConverter", "json.NoSuchConverter"))
    monkeypatch.setattr(kafka_services, "WORKER", dataclasses.replace(WORKER, path=broken))
    settings = stack()
    local = kafka_services.connect_worker_properties(_node(kafka_services.CONNECT_WORKER, settings, tmp_path))
    assert local["value.converter"] == "org.apache.kafka.connect.json.NoSuchConverter"
    conf = tmp_path / "spark-connect.conf"
    conf.write_text(SPARK_CONNECT.path.read_text().replace("spark.scheduler.mode=FAIR", "spark.scheduler.mode=FAIRER"))
    monkeypatch.setattr(deploy_files, "SPARK_CONNECT", dataclasses.replace(SPARK_CONNECT, path=conf))
    assert spark_services.spark_connect_conf(_node(spark_services.SPARK_CONNECT, settings, tmp_path))["spark.scheduler.mode"] == "FAIRER"


def test_a_broken_instance_file_fails_dagster_naming_the_key(tmp_path, monkeypatch):
    import dagster as dg

    broken = tmp_path / "deploy-dagster.yaml"
    broken.write_text(INSTANCE.path.read_text().replace("class: QueuedRunCoordinator", "class: NoSuchRunCoordinator"))
    monkeypatch.setattr(dagster_ui, "INSTANCE", dataclasses.replace(INSTANCE, path=broken))
    home = tmp_path / "home"
    home.mkdir()
    dagster_ui.write_instance_config(home)
    # `ui up` checks the instance before it starts dagster dev (whose webserver would come up anyway)
    with pytest.raises(StackError, match=rf"{re.escape(str(broken))} .*Dagster refuses it: .*NoSuchRunCoordinator"):
        dagster_ui.check_instance(home)
    # a key of the wrong type: refused when the instance is loaded at all
    broken.write_text(INSTANCE.path.read_text().replace("max_retries: 0", "max_retries: none"))
    dagster_ui.write_instance_config(home)
    with pytest.raises(Exception, match="max_retries"):
        dg.DagsterInstance.from_config(str(home))


def test_an_undeclared_change_or_an_unreadable_line_is_refused_naming_the_file(tmp_path):
    with pytest.raises(StackError, match=r"deploy/connect/connect-distributed.properties: .*group\.id"):
        WORKER.properties({"group.id": "another"})
    with pytest.raises(StackError, match=r"deploy/dagster.yaml: .*run_launcher"):
        INSTANCE.instance({"run_launcher": {}})
    bad = tmp_path / "worker.properties"
    bad.write_text("group.id=lakebus-connect\nkey.converter org.apache.kafka.connect.storage.StringConverter\n")
    with pytest.raises(StackError, match=rf"{re.escape(str(bad))}:2: not a key=value line"):
        read_properties(bad)
    bad.write_text("group.id=a\ngroup.id=b\n")
    with pytest.raises(StackError, match="group.id set twice"):
        read_properties(bad)
