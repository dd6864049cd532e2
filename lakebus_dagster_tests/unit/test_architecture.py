"""The architecture rules of issue 14, checked on the source tree and on generated definitions:
one configuration road, no dev-stack imports in the Dagster definitions, no per-spec dispatch,
small modules, and one declaration per DWS table and per event."""

from __future__ import annotations

import ast
import re
import inspect
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from lakebus_dagster.bus.desired import sink_connector_config
from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.defs.lakehouse import build_lakehouse
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import IcebergCatalogResource
from lakebus_dagster.events import Bet, EventRegistry, Recharge
from lakebus_dagster.events.models import EventBase
from lakebus_dagster.lake.dws import DWS_TABLES, EventRollup, LakehouseTables

PACKAGE = Path(__file__).resolve().parents[2] / "lakebus_dagster"
MAX_LINES = 300


def _modules(under: Path = PACKAGE) -> list[Path]:
    return sorted(p for p in under.rglob("*.py") if "__pycache__" not in p.parts)


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_only_the_environment_helper_reads_settings_under_defs():
    """``build_resources`` (defs/environment.py), and the bus layout resource, which reads the
    deployment's layout settings when a run reads the layout (defs/resources.py: run config naming one
    field must not reset the others)."""
    callers = [p.relative_to(PACKAGE).as_posix() for p in _modules(PACKAGE / "defs") if "load_settings" in p.read_text()]
    assert callers == ["defs/environment.py", "defs/resources.py"]


def test_no_definition_module_imports_the_dev_stack():
    offenders = {
        p.relative_to(PACKAGE).as_posix(): sorted(m for m in _imports(p) if m.startswith("lakebus_dagster.stack"))
        for p in _modules(PACKAGE / "defs")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


#: what the monitoring core may not import: Dagster, and every client of a system (it decides on what
#: lakebus_dagster.observe read; observe → decide → act)
_IO = ("dagster", "confluent_kafka", "pyiceberg", "psycopg2", "requests", "urllib3", "boto3", "pyspark",
       "lakebus_dagster.observe", "lakebus_dagster.kafka", "lakebus_dagster.connect.client", "lakebus_dagster.defs")


def test_the_monitoring_core_does_no_io():
    offenders = {
        p.relative_to(PACKAGE).as_posix(): sorted(m for m in _imports(p) if m.split(".")[0] in _IO or m.startswith(_IO))
        for p in _modules(PACKAGE / "monitor")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


#: the IncidentBook methods that change it, and the fields whose containers a rule changes
_BOOK_CHANGES = {"update", "append", "pop", "setdefault", "clear", "extend", "remove"}


def book_changes(source: str) -> list[str]:
    """Where ``source`` changes an incident book: ``<...>.book.<field> = ...``, ``book.<field>[k] = ...``,
    ``book.update(...)``, ``book.<field>.pop(...)`` and the like (a book read is fine)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Attribute) and "book" in ast.unparse(part.value).split(".")[-1:]:
                    found.append(f"line {node.lineno}: {ast.unparse(target)} =")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _BOOK_CHANGES:
            chain = ast.unparse(node.func.value).split(".")
            if "book" in chain:
                found.append(f"line {node.lineno}: {ast.unparse(node.func)}(...)")
    return found


def test_only_the_monitoring_core_changes_an_incident_book():
    """The status and lake sensors read, hand the book to the core (monitor/), and write the cursor the
    core returned; a rule that changes the book from defs/ is a decision outside the core."""
    offenders = {p.relative_to(PACKAGE).as_posix(): book_changes(p.read_text()) for p in _modules(PACKAGE / "defs")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_book_rule_sees_a_change():
    source = ("book.pending_alerts.append(a)\nstate.book.update(c, now, 0)\nbook.progress[k] = v\nx = book.open\n"
              "book.moves[name], move = watch(s)\nbook.open.get(k)\n")
    assert sorted(book_changes(source)) == ["line 1: book.pending_alerts.append(...)", "line 2: state.book.update(...)",
                                            "line 3: book.progress[k] =", "line 5: (book.moves[name], move) ="]


def test_no_per_spec_dispatch():
    dispatch = re.compile(r"\bspec is (?!None\b)[A-Za-z_]")  # `spec is BET_HOUR`, not `spec is None`
    assert [p.name for p in _modules() if dispatch.search(p.read_text())] == []


def test_no_private_dagster_import():
    """Dagster's ``dagster._…`` modules change without notice between minor releases (issue 22)."""
    offenders = {
        p.relative_to(PACKAGE).as_posix(): sorted(m for m in _imports(p) if m == "dagster._" or m.startswith("dagster._"))
        for p in _modules()
    }
    assert {k: v for k, v in offenders.items() if v} == {}


#: test and benchmark modules that import a private Dagster module where Dagster has no public API
#: for it, each with the reason (its import line says it too); any other private import fails
PRIVATE_DAGSTER_IN_TESTS: dict[str, str] = {
    "lakebus_dagster_tests/unit/test_cli.py": "no public API writes a sensor's stored state (what the daemon does)",
    "lakebus_dagster_tests/unit/test_monitoring.py": "no public API stores a run of a given status and tags "
    "(create_run_for_test: what the daemon does with a sensor's run request)",
    "lakebus_dagster_tests/integration/test_dagster_postgres.py": "no public reader of an instance's instigator states or ticks",
    "lakebus_dagster_tests/integration/test_ods_lag_and_freshness.py": "no public way to set the clock a freshness check judges by",
    "benchmarks/bench_soak.py": "no public iterator over a cron schedule's ticks",
}


def test_tests_and_benchmarks_use_dagster_public_api_or_say_why():
    root = PACKAGE.parent
    paths = [*_modules(root / "lakebus_dagster_tests"), *_modules(root / "benchmarks")]
    private = {
        p.relative_to(root).as_posix() for p in paths
        if any(m == "dagster._" or m.startswith("dagster._") for m in _imports(p))
    }
    assert sorted(private - set(PRIVATE_DAGSTER_IN_TESTS)) == [], "use Dagster's public API, or list it here with the reason"
    assert sorted(set(PRIVATE_DAGSTER_IN_TESTS) - private) == [], "no private import left there: remove it from the list"
    for name in PRIVATE_DAGSTER_IN_TESTS:
        lines = (root / name).read_text().splitlines()
        commented = [i for i, line in enumerate(lines) if re.match(r"\s*from dagster\._", line)
                     and "private" not in line and not any("private" in lines[j] for j in range(max(0, i - 3), i))]
        assert commented == [], f"{name}: say why next to each private import (line {[i + 1 for i in commented]})"


def test_long_modules_say_why():
    long = {p.relative_to(PACKAGE).as_posix(): len(p.read_text().splitlines()) for p in _modules()}
    unexplained = [
        name for name, n in long.items()
        if n > MAX_LINES and "longer than 300 lines" not in (ast.get_docstring(ast.parse((PACKAGE / name).read_text())) or "")
    ]
    assert unexplained == [], {n: long[n] for n in unexplained}


#: no module is longer than this, however its docstring explains it: split it by concern
HARD_MAX_LINES = 400
#: modules allowed over HARD_MAX_LINES, each with its reason (none today)
LONG_MODULES: dict[str, str] = {}


def test_no_module_is_longer_than_400_lines():
    lengths = {p.relative_to(PACKAGE).as_posix(): len(p.read_text().splitlines()) for p in _modules()}
    assert {name: n for name, n in lengths.items() if n > HARD_MAX_LINES and name not in LONG_MODULES} == {}
    assert [name for name in LONG_MODULES if lengths.get(name, 0) <= HARD_MAX_LINES] == [], "remove it from LONG_MODULES"


def test_an_overridden_catalog_resource_reaches_the_connector_and_the_bucket():
    catalog = IcebergCatalogResource(
        catalog_uri="http://catalog.prod:8181", warehouse="s3://lake-prod/wh/", s3_endpoint="https://minio.prod:9000",
        region="eu-west-1", access_key_id="unused", secret_access_key="unused",
    )
    cfg = sink_connector_config(BusLayout.default(), catalog)
    assert (cfg["iceberg.catalog.uri"], cfg["iceberg.catalog.warehouse"]) == ("http://catalog.prod:8181", "s3://lake-prod/wh/")
    assert (cfg["iceberg.catalog.s3.endpoint"], cfg["iceberg.catalog.client.region"]) == ("https://minio.prod:9000", "eu-west-1")
    assert "unused" not in cfg.values()  # keys stay ${env:...} placeholders
    assert catalog.warehouse_bucket == "lake-prod"


# -- one declaration per event and per DWS table ------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class Login(EventBase):
    user_id: int | None = None


LOGIN_HOUR = EventRollup(
    name="dws_biz_login_hour",
    event="login",
    count_column="login_count",
    amount_column=None,
    columns=(
        ("log_date", "date", "UTC day"),
        ("hour", "int", "UTC hour"),
        ("plat_id", "int", "platform"),
        ("login_count", "bigint", "number of logins"),
    ),
    keys=("log_date", "hour", "plat_id"),
    measures=("login_count",),
    grain="hour",
    description="Logins per hour and platform.",
)


def test_a_third_event_and_a_third_dws_table_are_one_declaration_each():
    registry = EventRegistry()
    registry.register("bet", Bet)
    registry.register("recharge", Recharge)
    registry.register("login", Login)  # the one declaration of the event

    # the event's route reaches the connector config
    layout = BusLayout.default(routes=registry.routes("demo"))
    # the sink's registry guard (issue 10) checks routed events against the registry it is given
    with_registry = {"registry": registry} if "registry" in inspect.signature(sink_connector_config).parameters else {}
    cfg = sink_connector_config(layout, IcebergCatalogResource(
        catalog_uri="http://c", warehouse="s3://w/", s3_endpoint="http://s", access_key_id="a", secret_access_key="b"
    ), **with_registry)
    assert cfg["iceberg.table.demo.dwd_biz_login.route-regex"] == "^login$"
    assert "demo.dwd_biz_login" in cfg["iceberg.tables"].split(",")

    # the DWS table is one more spec; its ODS table comes from the routes
    specs = (*DWS_TABLES, LOGIN_HOUR)
    tables = LakehouseTables.from_routes(layout.routes, specs)
    assert tables.dws(LOGIN_HOUR) == "demo_dws.dws_biz_login_hour"
    assert "FROM lake.demo.dwd_biz_login\n" in LOGIN_HOUR.aggregate_sql(tables.sources_of(LOGIN_HOUR), _hour())

    defs = dg.Definitions.merge(
        dg.Definitions(resources=build_resources()), build_lakehouse(events=registry.events(), specs=specs).definitions()
    )
    graph = defs.get_repository_def().asset_graph
    ods, dws = dg.AssetKey(["ods", "dwd_biz_login"]), dg.AssetKey(["dws", "dws_biz_login_hour"])
    assert graph.get(ods).is_observable
    assert {c.name for c in graph.get_check_keys_for_assets({ods})} == {"freshness_check"}
    assert graph.get(dws).parent_keys == {ods}
    assert {c.name for c in graph.get_check_keys_for_assets({dws})} == {"reconciles_with_ods", "no_null_keys", "no_duplicate_keys"}
    repo = defs.get_repository_def()
    assert dws in repo.get_job("dws_hourly_job").asset_layer.selected_asset_keys
    assert dws not in repo.get_job("dws_daily_job").asset_layer.selected_asset_keys
    assert ods in repo.get_job("observe_ods_job").asset_layer.selected_asset_keys


def _hour():
    from datetime import datetime

    from lakebus_dagster.lake.dws import Scope

    return Scope.hours(datetime(2025, 11, 25, 9))


# -- the package import graph (issue 22) ----------------------------------------------------------
#: Import edges between first-level subpackages that close a cycle today, each with its reason.
#: Issue 22 breaks them one by one: remove an entry when its cycle is gone (the test says so); a
#: cycle that no entry explains fails the test, so no new one can creep in.
KNOWN_CYCLE_EDGES: dict[tuple[str, str], str] = {}


def _imported_names(path: Path) -> set[str]:
    """Every module ``path`` imports, and ``module.name`` for each ``from module import name`` (a
    submodule imported that way, ``from lakebus_dagster.stack import manager``, is an edge too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def _subpackages() -> set[str]:
    return {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}


def _package_graph() -> dict[str, set[str]]:
    """subpackage -> the other subpackages its modules import (any import: top-level, lazy or typing-only)."""
    names = _subpackages()
    graph: dict[str, set[str]] = {name: set() for name in names}
    for name in names:
        for path in _modules(PACKAGE / name):
            for module in _imported_names(path):
                parts = module.split(".")
                if parts[0] == "lakebus_dagster" and len(parts) > 1 and parts[1] in names and parts[1] != name:
                    graph[name].add(parts[1])
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one package (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_subpackages_import_each_other_without_a_new_cycle():
    graph = _package_graph()
    assert {"cli", "stack", "events", "bus", "connect", "defs"} <= set(graph)
    pruned = {name: {t for t in targets if (name, t) not in KNOWN_CYCLE_EDGES} for name, targets in graph.items()}
    assert _cycles(pruned) == [], "a package cycle (issue 22): break it, do not add it to KNOWN_CYCLE_EDGES"
    for (source, target), why in KNOWN_CYCLE_EDGES.items():
        closes = target in graph[source] and any({source, target} <= set(c) for c in _cycles(graph))
        assert closes, f"{source} -> {target} no longer closes a cycle ({why}): remove it from KNOWN_CYCLE_EDGES"


def test_the_top_level_modules_and_the_subpackages_import_each_other_without_a_cycle():
    """Issue 22: config_file imported the definitions (the monitoring policy, ``lakebus config``'s
    report) and envvars imported config_file (the file's values) while each was imported back; the
    policy now lives in defs/monitoring/policy.py, the report in cli/config_report.py and the readers
    in setting_readers.py, above both."""
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    nodes = modules | _subpackages()
    graph: dict[str, set[str]] = {}
    for node in nodes:
        paths = [PACKAGE / f"{node}.py"] if node in modules else _modules(PACKAGE / node)
        imported = {m.split(".")[1] for p in paths for m in _imported_names(p) if m.startswith("lakebus_dagster.")}
        graph[node] = (imported & nodes) - {node}
    assert _cycles(graph) == []


def _defs_domain_graph(defs: Path = PACKAGE / "defs", *, shared: bool = False) -> dict[str, set[str]]:
    """``defs/`` domain (sub-package) -> the other domains its modules import (any import). The
    shared modules directly under ``defs/`` (resources, alerts, asset keys) are no domain, unless
    ``shared``: then each is a node too (a shared module importing a domain that imports it back is
    a cycle as well)."""
    domains = {p.name for p in defs.iterdir() if (p / "__init__.py").exists()}
    modules = {p.stem for p in defs.glob("*.py")} - {"__init__"} if shared else set()
    nodes = domains | modules
    graph: dict[str, set[str]] = {name: set() for name in nodes}
    for name in nodes:
        for path in [defs / f"{name}.py"] if name in modules else _modules(defs / name):
            for module in _imported_names(path):
                parts = module.split(".")
                if parts[:2] == ["lakebus_dagster", "defs"] and len(parts) > 2 and parts[2] in nodes and parts[2] != name:
                    graph[name].add(parts[2])
    return graph


def test_the_definition_domains_import_each_other_without_a_cycle():
    """The recovery jobs (DLQ replay, poison-record remediation, the re-queue) and the ledger run
    after each live in ``defs/recovery``: monitoring and the ledger request them, and import nothing
    back (monitoring and the ledger imported each other's jobs and sensors, and cdc closed a second
    circle between them)."""
    graph = _defs_domain_graph()
    assert {"monitoring", "ledger", "cdc", "recovery"} <= set(graph)
    assert _cycles(graph) == [], "a cycle between defs/ domains: move what both need below them"


def test_the_shared_definition_modules_and_the_domains_import_without_a_cycle():
    """``build_resources`` (every domain's resources) lives in ``defs/environment.py``, above the
    domains; ``defs/resources.py`` (the shared resources every domain imports) imports no domain."""
    assert _cycles(_defs_domain_graph(shared=True)) == [], "a cycle through a shared defs/ module"


def test_the_shared_cycle_check_sees_build_resources_in_resources_py(tmp_path: Path):
    (tmp_path / "cdc").mkdir()
    (tmp_path / "cdc" / "__init__.py").touch()
    (tmp_path / "cdc" / "jobs.py").write_text("from lakebus_dagster.defs.resources import KafkaResource\n")
    (tmp_path / "resources.py").write_text("def build_resources():\n    from lakebus_dagster.defs.cdc.resources import X\n")
    assert _cycles(_defs_domain_graph(tmp_path)) == []
    assert _cycles(_defs_domain_graph(tmp_path, shared=True)) == [["cdc", "resources"]]


def test_the_domain_cycle_check_sees_the_old_recovery_layout(tmp_path: Path):
    """The layout before ``defs/recovery``: healing requested the ledger job, the ledger's sensors
    watched monitoring's recovery jobs, and cdc's ledger check reused the ledger's helpers."""
    files = {
        "monitoring/healing.py": "from lakebus_dagster.defs.ledger.jobs import ledger_job\n",
        "monitoring/sensors.py": "from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource\n",
        "ledger/sensors.py": "from lakebus_dagster.defs.monitoring.jobs import replay_dlq\n",
        "cdc/ledger.py": "from lakebus_dagster.defs import ledger\n",
        "lakehouse/assets.py": "from lakebus_dagster.defs.resources import KafkaResource\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
        (tmp_path / name).with_name("__init__.py").touch()
    (tmp_path / "resources.py").write_text("")
    assert _cycles(_defs_domain_graph(tmp_path)) == [["cdc", "ledger", "monitoring"]]


def test_the_stack_modules_import_each_other_without_a_cycle():
    """Issue 22: manager.py and dagster_ui.py imported each other (the UI's status row, the UI's
    process markers); both now import the lower status_table.py and ui_process.py."""
    assert _cycles(_module_graph(PACKAGE / "stack")) == []


def _module_graph(package: Path) -> dict[str, set[str]]:
    """module -> the sibling modules it imports (``from pkg.mod import x`` and ``from pkg import mod``)."""
    prefix = ".".join(("lakebus_dagster", *package.relative_to(PACKAGE).parts)) + "."
    names = {p.stem for p in package.glob("*.py")}
    return {
        name: {m[len(prefix):].split(".")[0] for m in _imported_names(package / f"{name}.py") if m.startswith(prefix)} & names - {name}
        for name in names
    }


def test_nothing_below_the_cli_imports_it():
    """``cli/`` drives the stack, the events and the lake; they reach the argument types, the
    runner and the user errors through lakebus_dagster.argtypes / commandline / errors instead."""
    offenders = {
        p.relative_to(PACKAGE).as_posix(): sorted(m for m in _imports(p) if m.startswith("lakebus_dagster.cli"))
        for p in _modules() if "cli" not in p.relative_to(PACKAGE).parts[:1]
    }
    assert {k: v for k, v in offenders.items() if v} == {}
    assert not [p.name for p in _modules() if "benchmarks" in _imports(p) or any(m.startswith("benchmarks.") for m in _imports(p))]


def test_benchmarks_import_no_test_module():
    """Benchmarks share the tests' fixture modules (helpers, cleanup, failover_kit), never a test
    module: a test file stays free to change what it defines for its own assertions."""
    root = PACKAGE.parent
    offenders = {
        p.name: sorted(m for m in _imports(p) if m.rpartition(".")[2].startswith("test_"))
        for p in _modules(root / "benchmarks")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_command_line_plumbing_imports_only_the_error_base():
    for name in ("errors.py", "argtypes.py", "commandline.py"):
        lakebus = {m for m in _imports(PACKAGE / name) if m.startswith("lakebus_dagster")}
        assert lakebus <= {"lakebus_dagster.errors"}, (name, lakebus)


# -- asset keys from one module (issue 22) ----------------------------------------------------------
ASSET_KEYS_MODULE = "defs/asset_keys.py"
#: keywords through which Dagster turns a literal (``"a/b"``, ``["a", "b"]``) into an asset key
_KEY_KEYWORDS = {"key", "key_prefix", "asset_key"}


def _is_asset_key_call(node: ast.Call) -> bool:
    """``AssetKey(...)``, ``dg.AssetKey(...)`` and ``dg.AssetKey.from_user_string(...)`` alike."""
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in {"from_user_string", "from_coercible"}:
        func = func.value
    return (isinstance(func, ast.Name) and func.id == "AssetKey") or (isinstance(func, ast.Attribute) and func.attr == "AssetKey")


def _string_literals(nodes: list[ast.expr]) -> list[str]:
    return [n.value for arg in nodes for n in ast.walk(arg) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _literal_asset_keys(path: Path) -> list[str]:
    """``line: literal`` for every asset key ``path`` spells out in strings."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        if _is_asset_key_call(node):
            literals = _string_literals([*node.args, *(k.value for k in node.keywords)])
            if literals:
                found.append(f"{node.lineno}: AssetKey({', '.join(literals)})")
        for kw in node.keywords:  # key=["kafka", "x"] / key_prefix="ods" on an asset or spec
            if kw.arg in _KEY_KEYWORDS and isinstance(kw.value, (ast.Constant, ast.List, ast.Tuple)):
                literals = _string_literals([kw.value])
                if literals:
                    found.append(f"{node.lineno}: {kw.arg}={literals}")
    return found


def test_asset_keys_are_built_in_one_module():
    """Every asset key comes from :mod:`lakebus_dagster.defs.asset_keys`: a key spelled out elsewhere
    drifts from the one the UI, the history and the checks know (the offset ledger rebuilt the ODS keys
    with a literal ``"ods"`` and ``"demo"``). Build a new key there and import it."""
    offenders = {
        p.relative_to(PACKAGE).as_posix(): found
        for p in _modules() if p.relative_to(PACKAGE).as_posix() != ASSET_KEYS_MODULE and (found := _literal_asset_keys(p))
    }
    assert offenders == {}
    assert _literal_asset_keys(PACKAGE / ASSET_KEYS_MODULE), "the check no longer recognizes the keys it guards"


def test_the_literal_asset_key_check_sees_every_spelling(tmp_path: Path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import dagster as dg\nfrom dagster import AssetKey\n"
        "a = dg.AssetKey(['ods', 'x'])\nb = AssetKey('x')\nc = dg.AssetKey.from_user_string('a/b')\n"
        "d = dg.AssetKey([PREFIX, f'dwd_{e}'])\ne = dg.AssetSpec(key=['kafka', 'x'])\nf = dg.asset(key_prefix='ods')\n"
        "ok = dg.AssetKey([PREFIX, name])\nok2 = dg.AssetSpec(key=KEY)\n"
    )
    assert [line.split(":")[0] for line in _literal_asset_keys(sample)] == ["3", "4", "5", "6", "7", "8"]


# -- function length (issue 22) -------------------------------------------------------------------
#: a function is counted from its ``def`` line to its last line (signature, docstring, body; not its
#: decorators). 60 is above 99 % of lakebus's functions today (median 6, 95th percentile 34): a
#: longer one is several steps that read better as named helpers.
MAX_FUNCTION_LINES = 60
#: the functions longer than that when the rule came in, with their length then. An entry may not
#: grow (lower its number when you shorten it; remove it once it is within the limit — the test says
#: so); any other function over the limit fails. Keys are ``<module under lakebus_dagster>::<qualname>``.
LONG_FUNCTIONS: dict[str, int] = {
    # builds the generated encoder's source line by line, one branch per field kind
}
#: every package is checked (stack/ joined once its services became a table of specs, issue 22)
FUNCTION_LENGTH_EXCLUDED: tuple[str, ...] = ()


def _function_lengths(path: Path) -> dict[str, int]:
    """``qualname -> lines`` for every function and method in ``path``, nested ones included."""
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                lengths[name] = max(lengths.get(name, 0), child.end_lineno - child.lineno + 1)
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text()), "")
    return lengths


def test_no_function_is_longer_than_the_limit():
    lengths = {
        f"{p.relative_to(PACKAGE).as_posix()}::{name}": n
        for p in _modules() if p.relative_to(PACKAGE).parts[0] not in FUNCTION_LENGTH_EXCLUDED
        for name, n in _function_lengths(p).items()
    }
    too_long = {name: n for name, n in lengths.items() if n > max(MAX_FUNCTION_LINES, LONG_FUNCTIONS.get(name, 0))}
    assert too_long == {}, (
        f"longer than {MAX_FUNCTION_LINES} lines (or than its LONG_FUNCTIONS entry): split it into named steps (issue 22)"
    )
    stale = sorted(name for name in LONG_FUNCTIONS if lengths.get(name, 0) <= MAX_FUNCTION_LINES)
    assert stale == [], "gone or within the limit now: remove it from LONG_FUNCTIONS"


def test_docs_architecture_maps_every_module_from_its_docstring():
    """Every package module is in lakebus_dagster/MODULES.md, rendered from the modules' docstrings;
    a new module, a removed one or a changed first line without
    `python -m lakebus_dagster_tests.module_map` fails here."""
    from lakebus_dagster_tests import module_map

    assert module_map.missing_docstrings() == [], "give each module a docstring: its first line is its map entry"
    assert module_map.DOC.read_text() == module_map.document(), (
        "lakebus_dagster/MODULES.md is stale: run python -m lakebus_dagster_tests.module_map and commit it")


# -- no module-level clock for a test to replace -------------------------------------------------
def module_clocks(source: str) -> list[str]:
    """Module-level names bound to a clock function (``clock = time.time``): a test would patch them."""
    clocks = {"time.time", "time.monotonic", "datetime.now", "datetime.utcnow", "time"}
    return [ast.unparse(node) for node in ast.parse(source).body
            if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Attribute, ast.Name))
            and ast.unparse(node.value) in clocks]


def test_no_module_holds_a_clock_to_patch():
    """Time reaches a sensor or job through the ``clock`` resource (or a ``clock`` parameter), never
    through a module global a test replaces."""
    offenders = {p.relative_to(PACKAGE).as_posix(): module_clocks(p.read_text()) for p in _modules()}
    assert {k: v for k, v in offenders.items() if v} == {}
    assert module_clocks("import time\nclock = time.time\nx = 1\n") == ["clock = time.time"]


# -- no environment writes while the definitions are built ------------------------------------------
_ENV_WRITE = re.compile(r"os\.environ(\[[^\]]*\]\s*=(?!=)|\.(update|setdefault|pop|clear)\()|os\.(putenv|unsetenv)\(|del os\.environ")


def test_no_definition_module_writes_the_environment():
    """Secrets reach the resources as values (the local stack's file) or ``dg.EnvVar`` (the secret
    store): a module the code location imports, or the deployment values' reader, changes no
    environment variable of the process."""
    paths = [*_modules(PACKAGE / "defs"), PACKAGE / "definitions.py", PACKAGE / "deployment" / "values.py",
             PACKAGE / "secret_env.py", PACKAGE / "setting_readers.py", PACKAGE / "config_file.py"]
    assert [p.relative_to(PACKAGE).as_posix() for p in paths if _ENV_WRITE.search(p.read_text())] == []
    assert _ENV_WRITE.search('os.environ["X"] = "y"') and _ENV_WRITE.search("os.environ.update(found)")


def test_building_the_definitions_leaves_the_environment_as_it_was(tmp_path: Path, monkeypatch):
    import os

    from lakebus_dagster.definitions import build_definitions
    from lakebus_dagster.secret_env import S3_ACCESS_KEY_VAR, S3_SECRET_KEY_VAR
    from lakebus_dagster.settings import load_settings

    monkeypatch.setenv("LAKEBUS_STATE_DIR", str(tmp_path))
    for name in (S3_ACCESS_KEY_VAR, S3_SECRET_KEY_VAR):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "secrets.env").write_text(f"{S3_ACCESS_KEY_VAR}=local-key\n{S3_SECRET_KEY_VAR}=local-secret\n")
    before = dict(os.environ)
    settings = load_settings()
    resources = build_resources(settings)
    build_definitions(settings).get_repository_def()
    assert dict(os.environ) == before
    # the local stack's secrets still reach the resources, as values
    assert (resources["iceberg"].access_key_id, resources["object_store"].secret_access_key) == ("local-key", "local-secret")
    # a deployment's environment wins, read through EnvVar when the resource is used
    monkeypatch.setenv(S3_ACCESS_KEY_VAR, "from-the-secret-store")
    key = build_resources(settings)["iceberg"].access_key_id
    assert isinstance(key, dg.EnvVar) and key.env_var_name == S3_ACCESS_KEY_VAR


def test_the_deployment_values_are_read_without_the_process_environment(monkeypatch):
    import os

    from lakebus_dagster.deployment.values import settings_from

    monkeypatch.setenv("LAKEBUS_NAMESPACE", "from_this_process")
    before = dict(os.environ)
    assert settings_from({"LAKEBUS_NAMESPACE": "from_the_values"}).lake.namespace == "from_the_values"
    assert settings_from({}).lake.namespace != "from_this_process"
    assert dict(os.environ) == before
