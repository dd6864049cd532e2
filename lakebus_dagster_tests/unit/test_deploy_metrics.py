"""deploy/'s metrics: Strimzi's brokers and workers export the local stack's JMX exporter rules (the
ConfigMap k8s/strimzi/metrics-config.yaml holds infra/jmx-exporter/kafka-connect.yaml as it is), ``lakebus
metrics`` runs as its own Deployment on the code location's image, and PodMonitors scrape both."""

from __future__ import annotations

from pathlib import Path

import yaml

from lakebus_dagster.settings import REPO_ROOT
from lakebus_dagster.stack import jmx_exporter

K8S = REPO_ROOT / "deploy" / "k8s"
VALUES = yaml.safe_load((REPO_ROOT / "deploy" / "values.yaml").read_text())


def _docs(path: Path) -> dict[str, dict]:
    return {d["kind"]: d for d in yaml.safe_load_all(path.read_text()) if d}


def _rules_config_map() -> dict:
    return _docs(K8S / "strimzi" / "metrics-config.yaml")["ConfigMap"]


def test_the_configmaps_rules_are_the_local_stacks():
    data = _rules_config_map()["data"]
    assert list(data) == ["kafka-connect.yaml"]
    assert data["kafka-connect.yaml"] == jmx_exporter.RULES_FILE.read_text(), \
        "run `lakebus deploy render` after editing infra/jmx-exporter/kafka-connect.yaml"


def test_the_rules_check_sees_a_changed_rule():
    rules = jmx_exporter.RULES_FILE.read_text()
    assert rules.replace("lowercaseOutputName: true", "lowercaseOutputName: false") != _rules_config_map()["data"]["kafka-connect.yaml"]


def test_brokers_and_workers_export_with_the_configmaps_rules():
    config_map = _rules_config_map()
    ref = {"name": config_map["metadata"]["name"], "key": "kafka-connect.yaml"}
    kafka = _docs(K8S / "strimzi" / "kafka.yaml")["Kafka"]["spec"]["kafka"]
    connect = _docs(K8S / "strimzi" / "kafka-connect.yaml")["KafkaConnect"]["spec"]
    for spec in (kafka, connect):
        assert spec["metricsConfig"] == {"type": "jmxPrometheusExporter", "valueFrom": {"configMapKeyRef": ref}}
    assert config_map["metadata"]["namespace"] == VALUES["names"]["namespace"]


def test_lakebus_metrics_runs_on_the_code_locations_image_and_is_scraped():
    docs = _docs(K8S / "lakebus-metrics.yaml")
    pod = docs["Deployment"]["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["image"] == VALUES["names"]["images"]["dagster"]
    assert container["command"][:2] == ["lakebus", "metrics"]
    port = int(container["command"][container["command"].index("--port") + 1])
    assert container["ports"] == [{"name": "metrics", "containerPort": port}]
    env = {e["name"]: e for e in container["env"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert f"{env['DAGSTER_HOME']['value']}/dagster.yaml" in mounts, "the Helm release's instance, where DAGSTER_HOME says"
    assert docs["Service"]["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert pod["metadata"]["labels"]["lakebus.io/access"] == "dagster", "the NetworkPolicies admit it to Connect and the catalog"

    monitors = {d["metadata"]["name"]: d for d in yaml.safe_load_all((K8S / "pod-monitors.yaml").read_text())}
    assert {d["apiVersion"] for d in monitors.values()} == {"monitoring.coreos.com/v1"}
    ours = monitors["lakebus-metrics"]["spec"]
    assert ours["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert [e["port"] for e in ours["podMetricsEndpoints"]] == ["metrics"]
    strimzi = monitors["lakebus-strimzi"]["spec"]
    assert strimzi["selector"]["matchExpressions"] == [{"key": "strimzi.io/kind", "operator": "In", "values": ["Kafka", "KafkaConnect"]}]
    assert [e["port"] for e in strimzi["podMetricsEndpoints"]] == ["tcp-prometheus"]
    for monitor in monitors.values():
        assert monitor["spec"]["namespaceSelector"]["matchNames"] == [VALUES["names"]["namespace"]]
