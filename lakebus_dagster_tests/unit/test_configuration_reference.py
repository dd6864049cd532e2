"""The configuration reference (docs/configuration.md) is complete and current, and the README's
`lakebus` examples parse.

Fails when the code reads a ``LAKEBUS_*`` variable that ``envvars.VARIABLES`` (and so the reference)
does not document, when the table documents a variable nothing reads, or when docs/configuration.md's
copy of the table differs from ``lakebus config --markdown`` less the developers' knobs, which CONTRIBUTING.md's
"For developers" list documents instead (every variable the code reads is documented in one of the two)."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

from lakebus_dagster import envvars

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "lakebus_dagster"
README = (ROOT / "README.md").read_text()
#: where the generated table lives (the README links to it)
REFERENCE = (ROOT / "docs" / "configuration.md").read_text()
BEGIN, END = "<!-- BEGIN lakebus config --markdown -->\n", "<!-- END lakebus config --markdown -->"
VARIABLE = re.compile(r"LAKEBUS_[A-Z0-9_]+")
CONTRIBUTING = (ROOT / "CONTRIBUTING.md").read_text()
#: variables only the benchmarks and tests set (comparisons a user has no reason to repeat): documented in
#: CONTRIBUTING.md's "For developers" list, not in the user table
DEVELOPER_ONLY = ("LAKEBUS_CONNECT_PROTOCOL", "LAKEBUS_CONNECT_REBALANCE_DELAY_MS")


def user_reference() -> str:
    """``lakebus config --markdown`` without the developers' rows."""
    return "".join(line for line in envvars.reference_markdown().splitlines(keepends=True)
                   if not any(line.startswith(f"| `{name}` ") for name in DEVELOPER_ONLY))


def variables_in_code() -> dict[str, set[str]]:
    """Every string literal that is a whole ``LAKEBUS_*`` name (an environment variable), by module."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name == "envvars.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and VARIABLE.fullmatch(node.value):
                found.setdefault(node.value, set()).add(path.relative_to(ROOT).as_posix())
    return found


def test_every_variable_the_code_reads_is_documented():
    undocumented = {name: sorted(where) for name, where in variables_in_code().items() if name not in envvars.BY_NAME}
    assert undocumented == {}, "add these to lakebus_dagster/envvars.py VARIABLES, then refresh docs/configuration.md's table"


def test_every_documented_variable_is_read_by_the_code():
    assert sorted(set(envvars.BY_NAME) - set(variables_in_code())) == []


def test_the_configuration_doc_embeds_the_generated_reference():
    assert BEGIN in REFERENCE and END in REFERENCE
    embedded = REFERENCE.split(BEGIN, 1)[1].split(END, 1)[0]
    assert embedded == user_reference(), (
        "refresh docs/configuration.md's table: lakebus config --markdown, less the rows of DEVELOPER_ONLY")


def test_the_developers_knobs_are_documented_for_developers():
    assert set(DEVELOPER_ONLY) <= set(envvars.BY_NAME)
    assert len(user_reference().splitlines()) == len(envvars.reference_markdown().splitlines()) - len(DEVELOPER_ONLY)
    section = CONTRIBUTING.split("## For developers", 1)[1].split("\n## ", 1)[0]
    assert [name for name in DEVELOPER_ONLY if f"`{name}`" not in section] == []
    assert [name for name in DEVELOPER_ONLY if name in REFERENCE] == [], "a developer's knob is not a user setting"


def test_every_variable_has_a_meaning_and_secrets_no_default():
    for var in envvars.VARIABLES:
        assert var.meaning.strip(), var.name
        assert not (var.secret and var.default), var.name


def test_the_readme_lakebus_examples_parse():
    """Every ``lakebus ...`` line of a bash block in the README is a valid command line."""
    import pytest

    from lakebus_dagster.cli.main import build_parser

    blocks = re.findall(r"```bash\n(.*?)```", README, re.S)
    lines = [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()]
    commands = [shlex.split(line)[1:] for line in lines if line.startswith("lakebus ")]
    assert len(commands) >= 8
    for argv in commands:
        argv = [a for a in argv if a not in ("&&",)]
        try:
            build_parser(argv).parse_args(argv)
        except SystemExit as exc:  # argparse exits on a bad line
            pytest.fail(f"README example does not parse: lakebus {' '.join(argv)} ({exc})")
