"""deploy/README.md's "Secrets" table matches the manifests line by line (issue 31): each row's compose
variable is a secret compose interpolates, each row's Kubernetes Secret and key is in the example Secret
manifests, and the other way round; every ``secretKeyRef`` of the manifests, every ``envSecrets`` /
``postgresqlSecretName`` of the Helm values names a Secret (and key) the example holds; every
object-store user lakebus declares (and the root pair) has its rows, variable next to Secret and key.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from lakebus_dagster import envvars

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
README = DEPLOY / "README.md"
EXAMPLE = DEPLOY / "k8s" / "secrets.example.yaml"
COMPOSE = DEPLOY / "compose.yaml"
TEMPLATES = DEPLOY / "templates"
HEADER = "| secret | used by | compose variable | Kubernetes Secret | key |"
CODE = re.compile(r"`([^`]+)`")
INTERPOLATED = re.compile(r"\$\{([A-Z][A-Z0-9_]*)(:?[-?][^}]*)?\}")


def readme_rows(text: str) -> list[tuple[str | None, tuple[str, str] | None]]:
    """(compose variable or None, (Secret, key) or None) per row of the table under :data:`HEADER`."""
    lines = text.splitlines()
    start = lines.index(HEADER) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == 5, line
        compose = CODE.findall(cells[2])
        secret, key = CODE.findall(cells[3])[:1], CODE.findall(cells[4])
        rows.append((compose[0] if compose else None, (secret[0], key[0]) if secret and key else None))
    return rows


def example_keys() -> set[tuple[str, str]]:
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    assert all(d["kind"] == "Secret" and d["metadata"]["namespace"] == "lakebus" for d in docs)
    return {(d["metadata"]["name"], key) for d in docs for key in {**d.get("stringData", {}), **d.get("data", {})}}


def compose_secrets(text: str) -> set[str]:
    """Variables compose interpolates that are secrets: required ones (``${X:?…}``) and lakebus's secret settings."""
    found = set()
    for name, modifier in INTERPOLATED.findall(text):
        if (modifier or "").lstrip(":").startswith("?") or (name in envvars.BY_NAME and envvars.BY_NAME[name].secret):
            found.add(name)
    return found


def _walk(node, visit) -> None:
    visit(node)
    if isinstance(node, dict):
        for value in node.values():
            _walk(value, visit)
    elif isinstance(node, list):
        for value in node:
            _walk(value, visit)


def manifest_references() -> tuple[set[tuple[str, str]], set[str]]:
    """(Secret, key) of every ``secretKeyRef`` under deploy/k8s, and every Secret the Helm values load whole."""
    refs: set[tuple[str, str]] = set()
    whole: set[str] = set()

    def visit(node) -> None:
        if isinstance(node, dict):
            if "secretKeyRef" in node:
                refs.add((node["secretKeyRef"]["name"], node["secretKeyRef"]["key"]))
            for entry in node.get("envSecrets") or []:
                whole.add(entry["name"])
            if "postgresqlSecretName" in node:
                refs.add((node["postgresqlSecretName"], "postgresql-password"))

    for path in sorted((DEPLOY / "k8s").rglob("*.yaml")):
        if path != EXAMPLE:
            for doc in yaml.safe_load_all(path.read_text()):
                _walk(doc, visit)
    return refs, whole


def problems(readme: str, compose: str) -> list[str]:
    rows = readme_rows(readme)
    out = []
    table_compose = [c for c, _ in rows if c]
    table_k8s = [k for _, k in rows if k]
    for name in sorted(set(table_compose) - compose_secrets(compose)):
        out.append(f"README lists compose variable {name}, which compose does not take as a secret")
    for name in sorted(compose_secrets(compose) - set(table_compose)):
        out.append(f"compose takes secret {name}, which the README's table does not list")
    for secret, key in sorted(set(table_k8s) - example_keys()):
        out.append(f"README lists Secret {secret} key {key}, which k8s/secrets.example.yaml lacks")
    for secret, key in sorted(example_keys() - set(table_k8s)):
        out.append(f"k8s/secrets.example.yaml has Secret {secret} key {key}, which the README's table does not list")
    for row in sorted({r for r in table_compose if table_compose.count(r) > 1} | {r for r in table_k8s if table_k8s.count(r) > 1}, key=str):
        out.append(f"README lists {row} twice")
    return out


def test_readme_secrets_table_matches_the_example_secrets_and_compose_row_by_row():
    assert problems(README.read_text(), COMPOSE.read_text()) == []


def test_every_secret_the_manifests_read_is_in_the_example():
    refs, whole = manifest_references()
    keys = example_keys()
    assert sorted(refs - keys) == [], "a secretKeyRef names a Secret/key k8s/secrets.example.yaml (and the README) lack"
    assert sorted(whole - {secret for secret, _ in keys}) == [], "envSecrets names a Secret the example lacks"
    assert {secret for secret, _ in keys} <= {s for s, _ in refs} | whole, "the example holds a Secret nothing reads"


def test_the_example_secrets_hold_placeholders_only():
    for doc in (d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d):
        assert "data" not in doc, "stringData with placeholders only (base64 data hides what it holds)"
        assert set(doc["stringData"].values()) <= {"change-me", ""}, doc["metadata"]["name"]


def test_the_check_sees_a_secret_missing_on_either_side():
    readme, compose = README.read_text(), COMPOSE.read_text()
    row = next(line for line in readme.splitlines() if "`DAGSTER_COMPUTE_LOGS_SECRET_ACCESS_KEY`" in line)
    found = problems(readme.replace(row + "\n", ""), compose)
    assert "compose takes secret DAGSTER_COMPUTE_LOGS_SECRET_ACCESS_KEY, which the README's table does not list" in found
    assert any("Secret dagster-compute-logs key AWS_SECRET_ACCESS_KEY, which the README's table does not list" in p for p in found)
    extra = row.replace("DAGSTER_COMPUTE_LOGS_SECRET_ACCESS_KEY", "LAKEBUS_EXTRA_TOKEN").replace("`AWS_SECRET_ACCESS_KEY`", "`TOKEN`")
    found = problems(readme.replace(row, row + "\n" + extra), compose)
    assert "README lists compose variable LAKEBUS_EXTRA_TOKEN, which compose does not take as a secret" in found
    assert "README lists Secret dagster-compute-logs key TOKEN, which k8s/secrets.example.yaml lacks" in found


def object_store_row_problems(rows: list[tuple[str | None, tuple[str, str] | None]]) -> list[str]:
    """Every object-store user (lakebus_dagster/deployment/access.py) and the root pair has its rows: the
    compose variable next to its own Secret and key, as the init (compose's minio-init, the Job) reads them."""
    from lakebus_dagster.deployment.access import OBJECT_STORE_USERS, ROOT_SECRET, ROOT_VARS

    wanted = [(var, (user.secret, key)) for user in OBJECT_STORE_USERS for var, key in zip(user.compose_vars, user.secret_keys)]
    wanted += [(var, (ROOT_SECRET, var)) for var in ROOT_VARS]
    return [f"README has no row {var} -> {secret}/{key}" for var, (secret, key) in wanted if (var, (secret, key)) not in rows]


def test_every_object_store_user_and_the_root_pair_has_its_rows():
    rows = readme_rows(README.read_text())
    assert object_store_row_problems(rows) == []
    swapped = [(c, ("lakebus-s3-spark", k[1]) if k and k[0] == "lakebus-s3-catalog" else k) for c, k in rows]
    assert object_store_row_problems(swapped) == ["README has no row CATALOG_S3_ACCESS_KEY_ID -> lakebus-s3-catalog/AWS_ACCESS_KEY_ID",
                                                  "README has no row CATALOG_S3_SECRET_ACCESS_KEY -> lakebus-s3-catalog/AWS_SECRET_ACCESS_KEY"]
