"""deploy/'s Dagster UI is guarded, as far as files can show it (no container engine or cluster here):

* viewers get a read-only webserver (``dagster-webserver --read-only``): compose's
  ``dagster-webserver-read-only``, the Helm chart's second webserver (``enableReadOnly``);
* the operators' webserver, which can launch every job, is reachable only through oauth2-proxy
  (official image, pinned tag): in compose it publishes no port and sits only on internal networks,
  one shared with the proxy alone, the other with its own storage and code server; on Kubernetes a
  NetworkPolicy selects its pods (and only its pods) and admits the proxy's pods alone;
* the proxy's client and cookie secrets are references (compose ``${X:?…}``, ``secretKeyRef``), never values.

The compose file is read as ``docker-compose config`` resolves it (test_deploy.py's helper); each
check is a ``*_problems`` function, and a test proves it sees the read-only flag, the proxy or the
NetworkPolicy removed.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from lakebus_dagster.deployment.values import load_values
from lakebus_dagster_tests.unit.test_deploy import COMPOSE_SECRETS, _compose

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
#: the operators' webserver pods as the Dagster chart labels them (the read-only one's: ...-read-only)
OPERATORS_POD = {"component": "dagster-webserver"}
PROXY_IMAGE = re.compile(r"^oauth2-proxy/oauth2-proxy:v\d+\.\d+\.\d+$")
#: who may share a network with the operators' webserver in compose, per network
COMPOSE_NEIGHBOURS = {"ui-operators": {"oauth2-proxy"}, "dagster-backend": {"postgres", "minio", "dagster-code"}}


def _docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.fixture(scope="module")
def resolved_compose() -> dict:
    result = _compose("config", env=COMPOSE_SECRETS)
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def compose_ui_problems(doc: dict) -> list[str]:
    """What is wrong with the guarded UI in a resolved compose file."""
    services, networks = doc["services"], doc.get("networks") or {}
    problems = []
    viewer = services.get("dagster-webserver-read-only")
    if viewer is None or "--read-only" not in (viewer.get("command") or []):
        problems.append("no webserver runs --read-only for viewers")
    elif not viewer.get("ports"):
        problems.append("the read-only webserver publishes no port")
    operators = services.get("dagster-webserver", {})
    if "--read-only" in (operators.get("command") or []):
        problems.append("the operators' webserver is read-only")
    if operators.get("ports"):
        problems.append(f"the operators' webserver publishes {operators['ports']}: it must be reachable through the proxy only")
    joined = set(operators.get("networks") or {"default": None})
    if joined != set(COMPOSE_NEIGHBOURS):
        problems.append(f"the operators' webserver is on {sorted(joined)}, not only {sorted(COMPOSE_NEIGHBOURS)}")
    for name in sorted(joined & set(COMPOSE_NEIGHBOURS)):
        if not (networks.get(name) or {}).get("internal"):
            problems.append(f"network {name} is not internal")
        members = {s for s, spec in services.items() if name in (spec.get("networks") or {}) and s != "dagster-webserver"}
        if members - COMPOSE_NEIGHBOURS[name]:
            problems.append(f"network {name} also admits {sorted(members - COMPOSE_NEIGHBOURS[name])}")
    proxy = services.get("oauth2-proxy")
    if proxy is None:
        return [*problems, "no oauth2-proxy in front of the operators' webserver"]
    if not PROXY_IMAGE.match(str(proxy.get("image"))):
        problems.append(f"oauth2-proxy image {proxy.get('image')!r} is not the official one at a pinned vX.Y.Z tag")
    if "ui-operators" not in (proxy.get("networks") or {}):
        problems.append("oauth2-proxy is not on the operators' network")
    if not proxy.get("ports"):
        problems.append("oauth2-proxy publishes no port")
    command = operators.get("command") or []
    port = command[command.index("-p") + 1] if "-p" in command else "?"
    if proxy.get("environment", {}).get("OAUTH2_PROXY_UPSTREAMS") != f"http://dagster-webserver:{port}/":
        problems.append("oauth2-proxy's upstream is not the operators' webserver")
    return problems


def kubernetes_ui_problems(helm_values: dict, ui_docs: list[dict], other_policies: list[dict]) -> list[str]:
    """What is wrong with the guarded UI in the Helm values and k8s/dagster-ui.yaml (``other_policies``:
    every other NetworkPolicy under deploy/k8s)."""
    problems = []
    webserver = helm_values.get("dagsterWebserver", {})
    if webserver.get("enableReadOnly") is not True:
        problems.append("the Helm values run no read-only webserver (dagsterWebserver.enableReadOnly)")
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in ui_docs}
    deployment = by_kind.get(("Deployment", "dagster-oauth2-proxy"))
    if deployment is None:
        return [*problems, "no oauth2-proxy Deployment"]
    pod = deployment["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    if not PROXY_IMAGE.match(container["image"]):
        problems.append(f"oauth2-proxy image {container['image']!r} is not the official one at a pinned vX.Y.Z tag")
    env = {e["name"]: e for e in container["env"]}
    for name in ("OAUTH2_PROXY_CLIENT_ID", "OAUTH2_PROXY_CLIENT_SECRET", "OAUTH2_PROXY_COOKIE_SECRET"):
        if "secretKeyRef" not in env.get(name, {}).get("valueFrom", {}):
            problems.append(f"{name} is not a secretKeyRef")
    port = webserver.get("service", {}).get("port")
    upstream = env.get("OAUTH2_PROXY_UPSTREAMS", {}).get("value", "")
    if not upstream.endswith(f":{port}/") or "read-only" in upstream:
        problems.append(f"oauth2-proxy's upstream {upstream!r} is not the operators' webserver on port {port}")
    policies = [d for d in ui_docs if d["kind"] == "NetworkPolicy"]
    guarding = [p for p in policies if p["spec"]["podSelector"].get("matchLabels") == OPERATORS_POD]
    if len(guarding) != 1:
        return [*problems, f"{len(guarding)} NetworkPolicies select the operators' webserver pods {OPERATORS_POD}, not one"]
    (policy,) = guarding
    if policy["spec"].get("policyTypes") != ["Ingress"]:
        problems.append("the operators' NetworkPolicy does not restrict ingress")
    peers = [peer for rule in policy["spec"].get("ingress", []) for peer in rule.get("from", [])]
    proxy_pods = pod["metadata"]["labels"]
    if not peers or any(peer.get("podSelector", {}).get("matchLabels", {}).items() > proxy_pods.items() or set(peer) != {"podSelector"}
                        or not peer["podSelector"].get("matchLabels") for peer in peers):
        problems.append(f"the operators' NetworkPolicy admits {peers}, not only the proxy's pods {proxy_pods}")
    ports = [p["port"] for rule in policy["spec"].get("ingress", []) for p in rule.get("ports", [])]
    if ports != [port]:
        problems.append(f"the operators' NetworkPolicy opens {ports}, not the webserver's {port}")
    # NetworkPolicies add up: another one selecting the operators' pods (or all pods) would open them again
    for other in other_policies:
        labels = other["spec"]["podSelector"].get("matchLabels") or {}
        if labels.items() <= {**OPERATORS_POD, **webserver.get("labels", {})}.items():
            problems.append(f"NetworkPolicy {other['metadata']['name']} also selects the operators' webserver")
    return problems


def _kubernetes() -> tuple[dict, list[dict], list[dict]]:
    helm = yaml.safe_load((K8S / "dagster-values.yaml").read_text())
    ui = _docs(K8S / "dagster-ui.yaml")
    others = [d for p in sorted(K8S.rglob("*.yaml")) if p.name != "dagster-ui.yaml" for d in _docs(p) if d.get("kind") == "NetworkPolicy"]
    return helm, ui, others


def test_compose_serves_viewers_read_only_and_operators_only_through_the_proxy(resolved_compose):
    assert compose_ui_problems(resolved_compose) == []


def test_kubernetes_runs_a_read_only_webserver_and_admits_only_the_proxy_to_the_operators(tmp_path):
    helm, ui, others = _kubernetes()
    assert kubernetes_ui_problems(helm, ui, others) == []
    # the proxy's image is values.yaml's (one source) and its secrets are in the example Secret
    image = load_values(DEPLOY / "values.yaml").names["images"]["oauth2_proxy"]
    assert [c["image"] for d in ui if d["kind"] == "Deployment" for c in d["spec"]["template"]["spec"]["containers"]] == [image]


def test_the_ui_checks_see_the_read_only_flag_the_proxy_or_the_network_policy_removed(resolved_compose):
    def compose_without(edit) -> list[str]:
        doc = copy.deepcopy(resolved_compose)
        edit(doc["services"])
        return compose_ui_problems(doc)

    assert any("--read-only" in p for p in compose_without(lambda s: s["dagster-webserver-read-only"]["command"].remove("--read-only")))
    assert any("no oauth2-proxy" in p for p in compose_without(lambda s: s.pop("oauth2-proxy")))
    assert any("publishes" in p for p in compose_without(lambda s: s["dagster-webserver"].update(ports=["127.0.0.1:3001:3000/tcp"])))
    assert any("is on" in p for p in compose_without(lambda s: s["dagster-webserver"]["networks"].update(default=None)))
    assert any("also admits" in p for p in compose_without(lambda s: s["kafka"].update(networks={"ui-operators": None})))
    assert any("pinned" in p for p in compose_without(lambda s: s["oauth2-proxy"].update(image="oauth2-proxy/oauth2-proxy:latest")))

    helm, ui, others = _kubernetes()
    no_read_only = copy.deepcopy(helm)
    no_read_only["dagsterWebserver"].pop("enableReadOnly")
    assert any("read-only" in p for p in kubernetes_ui_problems(no_read_only, ui, others))
    assert any("no oauth2-proxy" in p for p in kubernetes_ui_problems(helm, [d for d in ui if d["kind"] != "Deployment"], others))
    assert any("not one" in p for p in kubernetes_ui_problems(helm, [d for d in ui if d["kind"] != "NetworkPolicy"], others))
    widened = copy.deepcopy(ui)
    next(d for d in widened if d["kind"] == "NetworkPolicy")["spec"]["ingress"][0]["from"].append({"namespaceSelector": {}})
    assert any("not only the proxy" in p for p in kubernetes_ui_problems(helm, widened, others))
    everything = {"kind": "NetworkPolicy", "metadata": {"name": "allow-all"}, "spec": {"podSelector": {}}}
    assert any("allow-all" in p for p in kubernetes_ui_problems(helm, ui, [*others, everything]))
    literal = copy.deepcopy(ui)
    container = next(d for d in literal if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]
    next(e for e in container["env"] if e["name"] == "OAUTH2_PROXY_CLIENT_SECRET").update(value="hunter2", valueFrom={})
    assert any("OAUTH2_PROXY_CLIENT_SECRET" in p for p in kubernetes_ui_problems(helm, literal, others))


def test_the_proxys_secrets_are_references_in_compose():
    text = (DEPLOY / "compose.yaml").read_text()
    for name in ("OAUTH2_PROXY_CLIENT_ID", "OAUTH2_PROXY_CLIENT_SECRET", "OAUTH2_PROXY_COOKIE_SECRET"):
        assert re.search(rf"^      {name}: \$\{{{name}:\?set {name}\}}$", text, re.MULTILINE), name
