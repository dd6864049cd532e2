"""deploy/ names the namespace, the images and the Postgres hosts from one declaration: values.yaml's
``names:``. The rendered files take them from it (``lakebus deploy render --check`` holds those); this
test reads every other file of deploy/ too — the manifests that are not rendered, the README, the
Dockerfiles, the rendered files as committed — and fails naming the file and the value that drifted:

* every Kubernetes namespace (``namespace: X``, ``kubectl -n X``, ``<service>.X.svc``) is ``names.namespace``;
* every reference to a declared image's repository carries the declared tag (``repo:tag`` in YAML, in
  the README's build lines and tables, in a Dockerfile's ``ARG``), the Helm values' repository and tag too;
* the Postgres hosts (compose's ``DAGSTER_PG_HOST``, the JDBC URIs of the catalog, the Helm values'
  ``postgresqlHost``) are ``names.postgres_hosts``'s, and compose names no Kubernetes DNS name at all
  (its ``LAKEBUS_POSTGRES_HOST`` default once did).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from lakebus_dagster.deployment.values import load_values

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
TEMPLATES = DEPLOY / "templates"
NAMESPACE_REFS = (re.compile(r"^\s*namespace: *\"?([A-Za-z0-9{}_.-]+)", re.MULTILINE),
                  re.compile(r"kubectl (?:[^\n`|]*?)(?:-n|--namespace)[ =]([A-Za-z0-9{}_.-]+)"),
                  re.compile(r"\.([a-z0-9-]+)\.svc\b"))
JDBC_HOST = re.compile(r"jdbc:postgresql://([A-Za-z0-9{}_.-]+):")


@pytest.fixture(scope="module")
def names() -> dict:
    return load_values(DEPLOY / "values.yaml").names


def deploy_texts() -> dict[str, str]:
    """Every text file under deploy/ but the templates and the values file (the declaration itself)."""
    out = {}
    for path in sorted(p for p in DEPLOY.rglob("*") if p.is_file() and TEMPLATES not in p.parents and p.name != "values.yaml"):
        try:
            out[path.relative_to(DEPLOY).as_posix()] = path.read_text()
        except UnicodeDecodeError:
            continue
    return out


def names_problems(texts: dict[str, str], names: dict) -> list[str]:
    problems = []
    namespace = names["namespace"]
    for where, text in texts.items():
        for pattern in NAMESPACE_REFS:
            for found in pattern.findall(text):
                if found != namespace:
                    problems.append(f"{where}: namespace {found!r}, not names.namespace {namespace!r}")
        for key, image in names["images"].items():
            repository, tag = image.rsplit(":", 1)
            for found in re.findall(rf"(?:^|[\s\"'`=(]){re.escape(repository)}:([A-Za-z0-9_.-]+)", text, re.MULTILINE):
                if found != tag:
                    problems.append(f"{where}: {repository}:{found}, not names.images.{key} {image!r}")
    hosts = names["postgres_hosts"]
    compose = texts.get("compose.yaml", "")
    for found in re.findall(r"DAGSTER_PG_HOST: *\"?([A-Za-z0-9_.-]+)", compose):
        if found != hosts["compose"]:
            problems.append(f"compose.yaml: DAGSTER_PG_HOST {found!r}, not names.postgres_hosts.compose {hosts['compose']!r}")
    for where, text in texts.items():
        wanted = hosts["compose"] if where == "compose.yaml" else hosts["catalog"]
        for found in JDBC_HOST.findall(text):
            if found not in (wanted, "host"):  # "host": the entrypoint's usage line
                problems.append(f"{where}: the catalog's JDBC host {found!r}, not {wanted!r}")
        for found in re.findall(r"postgresqlHost: *\"?([A-Za-z0-9{}_.-]+)", text):
            if found != hosts["dagster"]:
                problems.append(f"{where}: postgresqlHost {found!r}, not names.postgres_hosts.dagster {hosts['dagster']!r}")
    if ".svc" in compose:
        problems.append("compose.yaml names a Kubernetes DNS name (*.svc): compose's containers cannot resolve it")
    helm = texts.get("k8s/dagster-values.yaml")
    if helm is not None:
        (code,) = yaml.safe_load(helm)["dagster-user-deployments"]["deployments"]
        image = f"{code['image']['repository']}:{code['image']['tag']}"
        if image != names["images"]["dagster"]:
            problems.append(f"k8s/dagster-values.yaml: the code location's image {image!r}, not names.images.dagster")
    return problems


def test_every_file_of_deploy_names_the_declared_namespace_images_and_postgres_hosts(names):
    texts = deploy_texts()
    assert {"compose.yaml", "README.md", "k8s/iceberg-rest.yaml", "k8s/strimzi/kafka.yaml", "connect/Dockerfile"} <= set(texts)
    assert names_problems(texts, names) == []
    # not vacuous: each kind of reference is there to be checked
    joined = "\n".join(texts.values())
    assert joined.count(f"namespace: {names['namespace']}") >= 10 and f".{names['namespace']}.svc" in joined
    assert all(image in joined for image in names["images"].values())


def test_the_names_check_sees_a_file_drift(names):
    texts = deploy_texts()
    ns = names["namespace"]

    def drifted(where: str, old: str, new: str) -> list[str]:
        assert old in texts[where], (where, old)
        return names_problems({**texts, where: texts[where].replace(old, new, 1)}, names)

    assert any("namespace 'other'" in p for p in drifted("k8s/iceberg-rest.yaml", f"namespace: {ns}", "namespace: other"))
    assert any("namespace 'other'" in p for p in drifted("k8s/strimzi/kafka.yaml", f"namespace: {ns}", "namespace: other"))
    assert any("namespace 'other'" in p for p in drifted("README.md", f"kubectl -n {ns}", "kubectl -n other"))
    assert any("namespace 'other'" in p for p in drifted("k8s/lakebus-config.yaml", f".{ns}.svc", ".other.svc"))
    spark = names["images"]["spark_connect"]
    assert any("names.images.spark_connect" in p for p in drifted("README.md", spark, spark.rsplit(":", 1)[0] + ":9.9.9"))
    kafka = names["images"]["kafka"]
    assert any("names.images.kafka" in p for p in drifted("connect/Dockerfile", kafka, kafka.rsplit(":", 1)[0] + ":4.0.0"))
    assert any("names.images.dagster" in p for p in drifted("k8s/dagster-values.yaml", 'tag: "0.1.0"', 'tag: "0.2.0"'))
    assert any("JDBC host" in p for p in drifted("k8s/iceberg-rest.yaml", names["postgres_hosts"]["catalog"], "pg.example"))
    assert any("postgresqlHost" in p for p in drifted("k8s/dagster-values.yaml", names["postgres_hosts"]["dagster"], "pg.example"))
    assert any("DAGSTER_PG_HOST" in p for p in drifted("compose.yaml", "DAGSTER_PG_HOST: postgres", "DAGSTER_PG_HOST: pg"))
    assert any("Kubernetes DNS name" in p for p in drifted(
        "compose.yaml", "LAKEBUS_POSTGRES_HOST: ${LAKEBUS_POSTGRES_HOST:-}", f"LAKEBUS_POSTGRES_HOST: ${{LAKEBUS_POSTGRES_HOST:-shop.{ns}.svc}}"))


def test_the_namespace_is_declared_once_and_fills_the_addresses(tmp_path, names):
    """values.yaml names the namespace once; ``{namespace}`` in its addresses becomes it (another one
    reaches every address of the Kubernetes target)."""
    text = (DEPLOY / "values.yaml").read_text()
    assert len(re.findall(rf"\.{names['namespace']}\.svc", text)) == 0, "write {namespace}, not the namespace, in values.yaml"
    moved = tmp_path / "values.yaml"
    moved.write_text(text.replace(f"namespace: {names['namespace']}", "namespace: payments", 1))
    values = load_values(moved)
    assert values.names["namespace"] == "payments"
    assert values.kubernetes.env["LAKEBUS_KAFKA_BOOTSTRAP"].endswith(".payments.svc:9092")
    assert values.names["postgres_hosts"]["dagster"] == "dagster-postgresql.payments.svc"
    assert values.change_capture["host"].endswith(".payments.svc")
    # every rendered file follows: not one namespace, image or host of its own
    from lakebus_dagster.deployment.render import render

    rendered = render(moved)
    assert names_problems(rendered, values.names) == []
    assert sum(t.count("namespace: payments") for t in rendered.values()) >= 8
