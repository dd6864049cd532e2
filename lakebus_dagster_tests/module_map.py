"""lakebus_dagster/MODULES.md, generated: every module of the package with the first line of its
docstring, grouped by package. A unit test renders it again and compares, so a module added without a
docstring or without regenerating the map fails. The map is a contributor's reference, kept out of the
user docs (CONTRIBUTING.md and docs/architecture.md link to it).

    python -m lakebus_dagster_tests.module_map        rewrite lakebus_dagster/MODULES.md
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "lakebus_dagster"
DOC = PACKAGE / "MODULES.md"
HEADER = (
    "# Every module of `lakebus_dagster`\n\n"
    "Generated from each module's docstring by `python -m lakebus_dagster_tests.module_map`; do not edit by hand\n"
    "(a unit test fails when this file is not what the command writes). How the pieces fit: [docs/architecture.md](../docs/architecture.md).\n\n"
)
#: a summary longer than this is cut at a word boundary (the map is for scanning, the module has the rest)
WIDTH = 150


def summary(path: Path) -> str | None:
    """The first line of the module's docstring, or None when it has none."""
    doc = ast.get_docstring(ast.parse(path.read_text()))
    if not doc:
        return None
    first = " ".join(doc.strip().split("\n\n")[0].split())
    if len(first) > WIDTH:
        first = first[:WIDTH].rsplit(" ", 1)[0] + " …"
    return first.replace("|", "\\|")


def modules() -> list[Path]:
    """Every module of the package except the package roots' empty ``__init__.py``."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__init__.py" and not path.read_text().strip():
            continue
        out.append(path)
    return out


def render() -> str:
    """The map: one table per package directory, one row per module."""
    rows: dict[str, list[str]] = {}
    for path in modules():
        rel = path.relative_to(PACKAGE)
        folder = str(rel.parent) if str(rel.parent) != "." else ""
        text = summary(path)
        rows.setdefault(folder, []).append(f"| `{rel.name}` | {text if text is not None else '**no docstring**'} |")
    parts = []
    for folder in sorted(rows, key=lambda f: (f.count("/"), f)):
        parts += [f"**`lakebus_dagster/{folder + '/' if folder else ''}`**", "", "| module | what it holds |", "|---|---|",
                  *rows[folder], ""]
    return "\n".join(parts).rstrip("\n")


def missing_docstrings() -> list[str]:
    return [str(p.relative_to(ROOT)) for p in modules() if summary(p) is None]


def document() -> str:
    """The whole of MODULES.md."""
    return HEADER + render() + "\n"


def write() -> None:
    DOC.write_text(document())


if __name__ == "__main__":
    write()
    print(f"[modules] {DOC.relative_to(ROOT)}: {len(modules())} modules")
