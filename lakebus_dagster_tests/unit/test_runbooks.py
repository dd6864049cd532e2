"""Every alert the code can send has a runbook under docs/runbooks/, and the runbooks say things that are true.

The alert kinds and incident keys are derived from the code (``ast``, nothing imported to run):
``make_alert("<kind>", ...)`` calls and ``{"kind": "<kind>", ...}`` literals anywhere in
``lakebus_dagster/``, and the keys of ``Incident(...)`` (and of ``kafka_unreadable(...)``, which builds
one), with f-string parts and names resolved to a template (``connector:{}:task:{}:FAILED``). Each must
map to an existing file through :mod:`lakebus_dagster.monitor.runbooks`, and every mapping must still
match something the code sends. The runbooks' ``lakebus`` command lines must parse, the jobs they launch
must exist and their ``--config`` must be valid run config for that job.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from functools import cache
from pathlib import Path

import pytest
import yaml

from lakebus_dagster.monitor import runbooks

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "lakebus_dagster"
RUNBOOK_DIR = ROOT / runbooks.RUNBOOK_DIR
#: calls whose argument at this index is an incident key (``LakeOutcome``: a lake incident, monitor/lake_incidents.py)
KEY_ARGUMENT = {"Incident": 0, "kafka_unreadable": 2, "LakeOutcome": 1}
SECTIONS = ("## Symptom", "## What to run", "## Confirm recovery")


def all_runbooks() -> set[str]:
    """Every runbook path runbooks.py names (the index included)."""
    return {runbooks.INDEX, *runbooks.BY_KIND.values(), *runbooks.BY_INCIDENT.values(), *runbooks.BY_SITUATION.values()}


def _name(func: ast.expr) -> str | None:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _assignments(scope: ast.AST) -> dict[str, ast.expr]:
    """``name = <expr>`` in a module or function body (nested functions included; last one wins)."""
    found = {}
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
    return found


def _render(node: ast.expr, names: dict[str, ast.expr], depth: int = 0) -> str | None:
    """A key expression as a template: constants kept, formatted values ``{}`` unless a name resolves."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id in names and depth < 5:
        return _render(names[node.id], names, depth + 1)
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
            else:
                inner = _render(part.value, names, depth + 1) if isinstance(part.value, ast.Name) else None
                out.append(inner if inner is not None else "{}")
        return "".join(out)
    return None


@cache
def code_alerts() -> tuple[frozenset[str], frozenset[str]]:
    """(alert kinds, incident key templates) the package can send, with where each was found."""
    constants: dict[str, ast.expr] = {}
    trees = {path: ast.parse(path.read_text()) for path in PACKAGE.rglob("*.py")}
    for tree in trees.values():  # module constants such as UNREACHABLE_KEY, by name
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                    constants[node.targets[0].id] = node.value
    kinds, keys = set(), set()
    for path, tree in trees.items():
        for function in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
            params = {a.arg for a in function.args.args + function.args.kwonlyargs}
            names = {**constants, **_assignments(function)}
            for node in ast.walk(function):
                if isinstance(node, ast.Call) and _name(node.func) == "make_alert" and node.args:
                    if isinstance(node.args[0], ast.Constant):
                        kinds.add(node.args[0].value)
                if isinstance(node, ast.Dict):
                    for k, v in zip(node.keys, node.values):
                        if isinstance(k, ast.Constant) and k.value == "kind" and isinstance(v, ast.Constant):
                            if "title" in {getattr(x, "value", None) for x in node.keys}:  # an alert, not another record
                                kinds.add(v.value)
                if isinstance(node, ast.Call) and _name(node.func) in KEY_ARGUMENT:
                    index = KEY_ARGUMENT[_name(node.func)]
                    arg = node.args[index] if len(node.args) > index else None
                    if arg is None or (isinstance(arg, ast.Name) and arg.id in params):
                        continue  # a key handed through (its callers are walked too)
                    template = _render(arg, names)
                    assert template, f"{path.relative_to(ROOT)}:{node.lineno}: incident key not understood: {ast.unparse(arg)}"
                    keys.add(template)
    if "incident" in kinds or keys:
        kinds.add("incident")
    return frozenset(kinds), frozenset(keys)


def test_the_code_scan_sees_the_alerts_it_should():
    """The scan itself is not vacuous: these are alerts the sensors are known to send."""
    kinds, keys = code_alerts()
    assert {"incident", "recovery", "escalation", "dlq", "quarantined", "offset_ledger", "topic", "schema"} <= kinds
    assert {"connect:unreachable", "connect:starting", "connector:{}:missing", "connector:{}:task:{}:FAILED",
            "connector:{}:task:{}:UNASSIGNED", "connector:{}:stalled", "dws:{}:{}", "check:{}:{}:{}", "fresh:{}"} <= keys


def test_every_alert_kind_has_a_runbook():
    kinds, _ = code_alerts()
    missing = sorted(k for k in kinds - {"incident"} if runbooks.runbook_for(k) == runbooks.INDEX)
    assert missing == [], "add these alert kinds to lakebus_dagster/monitor/runbooks.py BY_KIND"


def test_every_incident_key_has_a_runbook():
    _, keys = code_alerts()
    missing = sorted(t for t in keys if runbooks.incident_runbook(t.replace("{}", "x")) is None)
    assert missing == [], "add these incident keys to lakebus_dagster/monitor/runbooks.py BY_INCIDENT"


def test_every_mapping_still_matches_what_the_code_sends():
    kinds, keys = code_alerts()
    assert sorted(set(runbooks.BY_KIND) - kinds) == []
    samples = [t.replace("{}", "x") for t in keys]
    stale = [t for t in runbooks.BY_INCIDENT if not any(runbooks._pattern(t).match(s) for s in samples)]
    assert stale == [], "these incident keys are no longer sent by the code"


def test_every_runbook_exists_and_is_in_the_index():
    absent = sorted(p for p in all_runbooks() if not (ROOT / p).is_file())
    assert absent == []
    index = (ROOT / runbooks.INDEX).read_text()
    on_disk = {p.name for p in RUNBOOK_DIR.glob("*.md")} - {"README.md"}
    assert sorted(n for n in on_disk if f"({n})" not in index) == [], "list every runbook in docs/runbooks/README.md"
    assert sorted(on_disk - {Path(p).name for p in all_runbooks()}) == [], "map every runbook in runbooks.py"


@pytest.mark.parametrize("path", sorted(all_runbooks() - {runbooks.INDEX}))
def test_each_runbook_has_symptom_commands_and_recovery(path):
    text = (ROOT / path).read_text()
    assert [s for s in SECTIONS if s not in text] == []


def test_lookup():
    assert runbooks.runbook_for("incident", "connector:events-iceberg-sink:task:1:FAILED").endswith("connector-failed.md")
    assert runbooks.runbook_for("incident", "connector:events-iceberg-sink:FAILED").endswith("connector-failed.md")
    assert runbooks.runbook_for("incident", "connector:events-iceberg-sink-x:stalled").endswith("sink-stalled.md")
    assert runbooks.runbook_for("incident", "declared-state:lakebus-connector-states:unreadable").endswith("kafka-unreadable.md")
    assert runbooks.runbook_for("dlq", "dlq:dlq-events").endswith("dlq-new-reason.md")
    # lake incidents: an hourly partition and a range carry ':' in the key's last part
    assert runbooks.runbook_for("incident", "dws:dws_hourly_job:2025-11-25-09:00").endswith("dws-run-failed.md")
    assert runbooks.runbook_for("incident", "dws:__ASSET_JOB:2025-11-25-00:00...2025-11-25-23:00").endswith("dws-run-failed.md")
    assert runbooks.runbook_for("incident", "check:dws/dws_user_day:no_duplicate_keys:2025-11-25").endswith("dws-check-failed.md")
    assert runbooks.runbook_for("incident", "fresh:ods/dwd_biz_bet").endswith("stale-ods.md")
    assert runbooks.runbook_for("incident", "connector:a:b:task:1:FAILED") == runbooks.INDEX  # one segment stays one
    assert runbooks.runbook_for("incident", "no:such:key") == runbooks.INDEX
    assert runbooks.runbook_for("no-such-kind") == runbooks.INDEX


# -- what the runbooks tell you to run -------------------------------------------------------------------
def _command_lines() -> list[tuple[str, str]]:
    """(runbook, line) for every ``lakebus …`` line (``.venv/bin/lakebus`` too) of a bash block."""
    out = []
    for path in sorted(RUNBOOK_DIR.glob("*.md")):
        for block in re.findall(r"```bash\n(.*?)```", path.read_text(), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = re.sub(r"^\S*=\S* ", "", line.split("  #")[0].strip())  # VAR=value prefixes
                line = line.removeprefix(".venv/bin/")
                if line.startswith("lakebus "):
                    out.append((path.name, line))
    return out


def test_runbook_commands_parse_and_launch_real_jobs_with_valid_config(monkeypatch):
    # the resources' EnvVar secrets must resolve for Dagster to validate a job's whole config; on a
    # fresh machine the unit stage runs before the stack has generated them
    for name in ("LAKEBUS_S3_ACCESS_KEY_ID", "LAKEBUS_S3_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "unit-test-placeholder")
    import dagster as dg

    from lakebus_dagster.cli.main import build_parser
    from lakebus_dagster.definitions import defs

    repo = defs.get_repository_def()
    jobs = {j.name for j in repo.get_all_jobs()}
    lines = _command_lines()
    assert len(lines) >= 30
    problems = []
    for name, line in lines:
        argv = shlex.split(line)[1:]
        argv = argv[: argv.index("&&")] if "&&" in argv else argv
        try:
            args = build_parser(argv).parse_args(argv)
        except SystemExit:
            problems.append(f"{name}: does not parse: {line}")
            continue
        if argv[0] != "launch":
            continue
        if args.job not in jobs:
            problems.append(f"{name}: no job {args.job!r}: {line}")
            continue
        if args.config:
            config = args.config if isinstance(args.config, dict) else json.loads(args.config)
            try:
                dg.validate_run_config(repo.get_job(args.job), config)
            except dg.DagsterInvalidConfigError as exc:
                problems.append(f"{name}: invalid config for {args.job}: {line} ({str(exc)[:200]})")
    assert problems == []


def test_every_alert_text_ends_with_its_runbook():
    """make_alert (which every sensor and job builds its alerts with) ends the text with the runbook of
    the alert's kind and key; the runbook file exists."""
    from lakebus_dagster.defs.alerts import make_alert
    from lakebus_dagster.monitor.runbooks import BY_KIND, runbook_for

    cases = [("incident", "connect:unreachable"), ("incident", "connector:lakebus-sink:stalled"),
             ("incident", "connector:lakebus-sink:task:0:FAILED"), *((kind, None) for kind in BY_KIND)]
    for kind, key in cases:
        for text in ("something happened", ""):
            alert = make_alert(kind, "title", text, key=key)
            path = runbook_for(kind, key)
            assert alert["text"].splitlines()[-1] == f"runbook: {path}", (kind, key)
            assert (ROOT / path).is_file(), path
            assert path != runbook_for("no-such-kind") or kind not in BY_KIND


# --- where it runs: every runbook that acts through `lakebus stack` also gives compose and kubectl ------

DEPLOY = ROOT / "deploy"
COMPOSE_CMD = re.compile(r"docker compose -p lakebus -f deploy/compose\.yaml ((?:[^`\n|])+)")
KUBECTL_CMD = re.compile(r"kubectl -n (\S+) ([^`\n|]+)")
#: ``lakebus stack restart <local service>`` -> the compose service that does its job
LOCAL_TO_COMPOSE = {"kafka": "kafka", "connect": "connect", "rest-catalog": "iceberg-rest", "s3": "minio",
                    "spark-connect": "spark-connect"}
OPTIONS_WITH_VALUE = {"--tail", "-n", "-l", "--selector"}


def compose_services() -> set[str]:
    return set(yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"])


def kubernetes_names() -> set[str]:
    """``metadata.name`` of every deploy/k8s resource, plus the names the operators derive from them:
    Strimzi's StrimziPodSets (``<connect>-connect``, ``<cluster>-<pool>``) and broker pods, and the Dagster
    Helm chart's for the release deploy/k8s/dagster-values.yaml installs."""
    names: set[str] = set()
    for path in sorted((DEPLOY / "k8s").rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict) or "metadata" not in doc:
                continue
            name = doc["metadata"]["name"]
            names.add(name)
            if doc.get("kind") == "KafkaConnect":
                names.add(f"{name}-connect")
            if doc.get("kind") == "KafkaNodePool":
                pool = f"{doc['metadata']['labels']['strimzi.io/cluster']}-{name}"
                names |= {pool, *(f"{pool}-{i}" for i in range(doc["spec"]["replicas"]))}
    release = re.search(r"helm upgrade --install (\S+) dagster/dagster", (DEPLOY / "k8s" / "dagster-values.yaml").read_text())
    names |= {f"{release.group(1)}-daemon", f"{release.group(1)}-dagster-webserver"}
    return names


def where_it_runs_problems(name: str, text: str) -> list[str]:
    problems = []
    if "lakebus stack" in text:
        if not COMPOSE_CMD.search(text):
            problems.append(f"{name}: says `lakebus stack` but gives no compose command")
        if not KUBECTL_CMD.search(text):
            problems.append(f"{name}: says `lakebus stack` but gives no kubectl command")
    restarted = {m.group(1) for m in re.finditer(r"lakebus stack restart ([a-z0-9-]+)", text)}
    compose_restarts = {s for m in COMPOSE_CMD.finditer(text) if m.group(1).startswith("restart ")
                        for s in m.group(1).split()[1:]}
    for local in sorted(restarted):
        wanted = LOCAL_TO_COMPOSE.get(re.sub(r"-[23]$", "", local), local)
        if wanted not in compose_restarts:
            problems.append(f"{name}: restarts {local} locally but has no `docker compose ... restart {wanted}`")
    services = compose_services()
    for m in COMPOSE_CMD.finditer(text):
        tokens = m.group(1).split()
        args, skip = [], False
        for tok in tokens[1:]:
            if skip:
                skip = False
            elif tok in OPTIONS_WITH_VALUE:
                skip = True
            elif not tok.startswith("-"):
                args.append(tok)
        if tokens[0] in {"ps", "logs", "restart", "stop", "start", "up"}:
            problems += [f"{name}: compose has no service {s!r}" for s in args if s not in services]
    known = kubernetes_names()
    for m in KUBECTL_CMD.finditer(text):
        if m.group(1) != "lakebus":
            problems.append(f"{name}: kubectl namespace {m.group(1)!r} is not deploy/k8s's `lakebus`")
        for ref in re.findall(r"\b(?:deployment|deploy|svc|service|strimzipodset|pod|kafka|kafkaconnect)[/ ]([a-z0-9][a-z0-9-]*)", m.group(2)):
            if ref not in known and ref not in {"strimzi"}:
                problems.append(f"{name}: kubectl names {ref!r}, which deploy/k8s does not define")
        for cluster in re.findall(r"strimzi\.io/cluster=([a-z0-9-]+)", m.group(2)):
            if cluster not in known:
                problems.append(f"{name}: no Strimzi cluster {cluster!r} in deploy/k8s")
    return problems


def test_every_runbook_gives_local_compose_and_kubernetes_commands():
    problems = []
    for path in sorted(RUNBOOK_DIR.glob("*.md")):
        problems += where_it_runs_problems(path.name, path.read_text())
    assert problems == []


def test_where_it_runs_check_sees_missing_and_invented_names():
    assert where_it_runs_problems("x.md", "lakebus stack restart connect") == [
        "x.md: says `lakebus stack` but gives no compose command",
        "x.md: says `lakebus stack` but gives no kubectl command",
        "x.md: restarts connect locally but has no `docker compose ... restart connect`",
    ]
    invented = ("`lakebus stack restart rest-catalog` `docker compose -p lakebus -f deploy/compose.yaml restart catalog`"
                " `kubectl -n lakebus rollout restart deployment/catalog`")
    assert where_it_runs_problems("y.md", invented) == [
        "y.md: restarts rest-catalog locally but has no `docker compose ... restart iceberg-rest`",
        "y.md: compose has no service 'catalog'",
        "y.md: kubectl names 'catalog', which deploy/k8s does not define",
    ]
    assert {"iceberg-rest", "spark-connect", "lakebus-connect", "lakebus-dual-role-2", "dagster-daemon"} <= kubernetes_names()
