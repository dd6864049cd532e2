"""Every definition of the code location has a row in docs/testing.md's "Every definition and its proof"
table, every row names something the code location defines, and every test a row names exists
(the test files are parsed with ``ast``, not imported).

Rows may name generated definitions by pattern: ``{event}`` expands to every event of the registry,
``{dws}`` to every DWS table spec — the expansion must equal what the code location defines.
"""

from __future__ import annotations

import ast
import itertools
import re
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest

from lakebus_dagster.definitions import build_definitions, settings
from lakebus_dagster.events.registry import default_registry
from lakebus_dagster.lake.dws import DWS_TABLES

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "docs" / "testing.md"  # the proof table's home (the README links to it)
TESTS = ROOT / "lakebus_dagster_tests"
SECTION = "## Every definition and its proof"
KINDS = ("job", "sensor", "schedule", "asset", "asset check")
ROW = re.compile(r"^\| (job|sensor|schedule|asset|asset check) \| `([^`]+)` \| (.+) \|$")
TEST_REF = re.compile(r"`([\w/]+\.py)::(\w+)`")
#: what a pattern placeholder stands for (the sources the generated definitions come from)
PLACEHOLDERS = {"event": lambda: default_registry.events(), "dws": lambda: [spec.name for spec in DWS_TABLES]}


def defined() -> dict[str, set[str]]:
    """Every definition of the code location by kind, named as the README names it — with every optional
    part switched on (change capture's schedule is registered only with LAKEBUS_POSTGRES=on)."""
    capture_on = replace(settings, capture=replace(settings.capture, enabled=True))
    repo = build_definitions(capture_on).get_repository_def()
    graph = repo.asset_graph
    return {
        "job": {j.name for j in repo.get_all_jobs() if not j.name.startswith("__")},  # not Dagster's implicit asset job
        "sensor": {s.name for s in repo.sensor_defs},
        "schedule": {s.name for s in repo.schedule_defs},
        "asset": {k.to_user_string() for k in graph.get_all_asset_keys()},
        "asset check": {f"{k.asset_key.to_user_string()}:{k.name}" for k in graph.asset_check_keys},
    }


def expand(pattern: str) -> set[str]:
    names = re.findall(r"\{(\w+)\}", pattern)
    unknown = set(names) - set(PLACEHOLDERS)
    assert not unknown, f"{pattern!r}: unknown placeholder(s) {sorted(unknown)}; known: {sorted(PLACEHOLDERS)}"
    if not names:
        return {pattern}
    out = set()
    for values in itertools.product(*(list(PLACEHOLDERS[n]()) for n in names)):
        name = pattern
        for placeholder, value in zip(names, values):
            name = name.replace("{" + placeholder + "}", value, 1)
        out.add(name)
    return out


@cache
def table_rows() -> list[tuple[str, str, tuple[tuple[str, str], ...]]]:
    """``(kind, name pattern, ((test file, test function), ...))`` for every row of the section's table."""
    text = README.read_text()
    assert SECTION in text, f"{README.name} has no {SECTION!r} section"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("| ") or line.startswith(("| kind ", "|---")):
            continue
        match = ROW.match(line)
        assert match, f"README row not understood (| kind | `name` | `path::test`<br>... |): {line!r}"
        kind, name, cell = match.groups()
        tests = tuple(TEST_REF.findall(cell))
        assert tests, f"README row {kind} {name!r} names no test"
        rows.append((kind, name, tests))
    return rows


@cache
def functions_in(path: str) -> frozenset[str]:
    file = TESTS / path
    assert file.is_file(), f"{path} does not exist under lakebus_dagster_tests/"
    tree = ast.parse(file.read_text())
    return frozenset(n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test_"))


def test_every_definition_has_a_row():
    listed: dict[str, set[str]] = {kind: set() for kind in KINDS}
    for kind, pattern, _ in table_rows():
        listed[kind] |= expand(pattern)
    missing = {kind: sorted(names - listed[kind]) for kind, names in defined().items() if names - listed[kind]}
    assert not missing, f"definitions without a row in docs/testing.md's {SECTION!r} table: {missing}"


def test_every_row_names_a_definition():
    live = defined()
    stale = [(kind, pattern, sorted(expand(pattern) - live[kind])) for kind, pattern, _ in table_rows()
             if expand(pattern) - live[kind]]
    assert not stale, f"README rows naming what the code location does not define: {stale}"


def test_every_named_test_exists():
    absent = [f"{path}::{name}" for _, _, tests in table_rows() for path, name in tests if name not in functions_in(path)]
    assert not absent, f"README names tests that do not exist: {absent}"


def test_the_table_is_not_vacuous():
    """The checks above would pass on an empty code location; this one pins what they walked over."""
    live = defined()
    assert len(table_rows()) >= 30
    assert {"provision_lakebus", "dws_hourly_job", "replay_dlq"} <= live["job"]
    assert {"ods/dwd_biz_bet", "dws/dws_user_day", "lakebus/alerts"} <= live["asset"]
    assert "dws/dws_biz_bet_hour:reconciles_with_ods" in live["asset check"]


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("| job | `x` | no test here |", "names no test"),
        ("| widget | `x` | `unit/test_a.py::test_b` |", "not understood"),
    ],
)
def test_bad_rows_are_refused(monkeypatch, tmp_path, line, problem):
    readme = tmp_path / "README.md"
    readme.write_text(f"{SECTION}\n\n| kind | name | tests |\n|---|---|---|\n{line}\n")
    monkeypatch.setitem(globals(), "README", readme)
    table_rows.cache_clear()
    try:
        with pytest.raises(AssertionError, match=problem):
            table_rows()
    finally:
        table_rows.cache_clear()


def test_patterns_expand_and_unknown_placeholders_are_refused():
    assert expand("ods/dwd_biz_{event}") == {f"ods/dwd_biz_{e}" for e in default_registry.events()}
    assert expand("dws/{dws}:no_null_keys") == {f"dws/{s.name}:no_null_keys" for s in DWS_TABLES}
    with pytest.raises(AssertionError, match="unknown placeholder"):
        expand("dws/{table}")
