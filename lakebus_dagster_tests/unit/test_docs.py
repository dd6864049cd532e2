"""The README stays a first screen and the documentation stays connected and current:

* README.md is at most 250 lines and says what issue 21 asks of its first screen (the two commands,
  time, memory, ports, how to stop, where alerts go, where `lakebus` lives);
* every relative link in README.md, docs/ and deploy/README.md points at a file that exists;
* docs/architecture.md's layout names every package under ``lakebus_dagster/``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")


def test_readme_is_a_first_screen():
    text = README.read_text()
    assert len(text.splitlines()) <= 250, "move detail into docs/"
    for needle in ("make demo", "make test", "make demo` with warm pip/Maven caches takes", "2.9 GiB", "lakebus stack status", "lakebus stack down",
                   "lakebus ui down", "make stack-down", "LAKEBUS_ALERT_SINK", "lakebus/alerts", ".venv/bin",
                   "## The `lakebus` command"):
        assert needle in text, needle
    for port in ("9000", "19092", "19093", "8181", "8083", "7077", "18080", "7078", "18081", "15002", "18082", "3000"):
        assert re.search(rf"\b{port}\b", text), port


def test_every_relative_link_resolves():
    files = [README, ROOT / "deploy" / "README.md", *sorted(DOCS.rglob("*.md"))]
    broken = []
    for path in files:
        for target, _ in LINK.findall(path.read_text()):
            if re.match(r"^[a-z]+:", target):
                continue
            if not (path.parent / target).resolve().exists():
                broken.append(f"{path.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_the_layout_names_every_package():
    text = (DOCS / "architecture.md").read_text()
    layout = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    packages = sorted(p.name for p in (ROOT / "lakebus_dagster").iterdir() if (p / "__init__.py").is_file())
    defs = sorted(p.name for p in (ROOT / "lakebus_dagster" / "defs").iterdir() if (p / "__init__.py").is_file())
    assert [p for p in packages if f"  {p}/" not in layout] == []
    assert [p for p in defs if f"{p}/" not in layout] == []
