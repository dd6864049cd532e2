"""docs/testing.md's measured stage table, generated: tests, failures and seconds per stage from
``build/junit-<stage>.xml`` (``make test`` writes them and prints the table at its end, changing no
tracked file), and the number of tests each stage selects, collected without running anything (what
the unit test pins). A reference run's table is recorded on purpose, like a benchmark's result:

    python -m lakebus_dagster_tests.measured          rewrite docs/testing.md's table from build/junit-*.xml
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "testing.md"
BEGIN, END = "<!-- measured:begin (lakebus_dagster_tests/measured.py writes this table) -->", "<!-- measured:end -->"
#: the stages in make test's order and the markers each selects (stages.py runs exactly these)
STAGE_MARKERS = {
    "unit": None,
    "integration": "not daemon and not lake and not cluster and not secured and not cdc",
    "daemon": "daemon",
    "lake": "lake",
    "cluster": "cluster",
    "secured": "secured",
    "cdc": "cdc",
}
_SIDE = ("daemon", "lake", "cluster", "secured", "cdc")


@dataclass(frozen=True)
class StageResult:
    tests: int
    failed: int
    skipped: int
    seconds: float


def junit_results(build: Path) -> dict[str, StageResult]:
    """Per stage with a report in ``build``: its tests, failures + errors, skips and time."""
    out = {}
    for stage in STAGE_MARKERS:
        path = build / f"junit-{stage}.xml"
        if not path.exists():
            continue
        root = ET.parse(path).getroot()
        suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
        total = lambda attr: sum(float(s.get(attr, 0)) for s in suites)  # noqa: E731
        out[stage] = StageResult(int(total("tests")), int(total("failures") + total("errors")), int(total("skipped")), total("time"))
    return out


def stage_of(markers: set[str], path: str) -> str:
    """The stage a collected test runs in (the selections of stages.py, as sets)."""
    if "/unit/" in path:
        return "unit"
    for side in _SIDE:
        if side in markers:
            return side
    return "integration"


def collected_counts() -> dict[str, int]:
    """Tests per stage, collected (nothing runs): one ``pytest --collect-only`` of the whole suite."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "items.json"
        subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "lakebus_dagster_tests.collect_stages",
                        "lakebus_dagster_tests/unit", "lakebus_dagster_tests/integration"],
                       cwd=ROOT, env={**os.environ, "LAKEBUS_COLLECT_OUT": str(out)}, capture_output=True, check=True)
        items = json.loads(out.read_text())
    counts = dict.fromkeys(STAGE_MARKERS, 0)
    for path, markers in items:
        counts[stage_of(set(markers), path)] += 1
    return counts


def render(results: dict[str, StageResult], when: str) -> str:
    rows = ["| stage | tests | failed | skipped | seconds |", "|---|---|---|---|---|"]
    for stage in STAGE_MARKERS:
        r = results.get(stage)
        rows.append(f"| {stage} | {r.tests} | {r.failed} | {r.skipped} | {r.seconds:.0f} |" if r else f"| {stage} | — | — | — | — |")
    return f"Last `make test` on {when}:\n\n" + "\n".join(rows)


def documented_counts(text: str) -> dict[str, int]:
    """The tests column of the measured table in ``text``."""
    block = text[text.index(BEGIN):text.index(END)]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^\| (\w+) \| (\d+) \|", block, re.M)}


def write(results: dict[str, StageResult], when: str | None = None) -> None:
    text = DOC.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    DOC.write_text(text[:start] + "\n" + render(results, when or date.today().isoformat()) + "\n" + text[end:])


def failures(build: Path) -> list[str]:
    """Every failed or erroring test of the run's reports, as ``stage: test id: first line of its message``:
    a CI log keeps only its tail, and a side lane's failure is printed long before it."""
    out = []
    for stage in STAGE_MARKERS:
        path = build / f"junit-{stage}.xml"
        if not path.exists():
            continue
        for case in ET.parse(path).getroot().iter("testcase"):
            for problem in (*case.findall("failure"), *case.findall("error")):
                message = " ".join((problem.get("message") or problem.text or "").split())[:1200]
                out.append(f"{stage}: {case.get('classname')}::{case.get('name')}: {message}")
    return out


def show() -> None:
    """Print this run's table and its failures (``make test``'s last words); docs/testing.md is left as it is."""
    results = junit_results(ROOT / "build")
    for line in failures(ROOT / "build"):
        print(f"[failed] {line}", flush=True)
    if results:
        print(render(results, date.today().isoformat()), flush=True)
        print("[measured] to record this run as the reference: python -m lakebus_dagster_tests.measured", flush=True)


def main() -> int:
    results = junit_results(ROOT / "build")
    if not results:
        print("[measured] no build/junit-*.xml: nothing to write", flush=True)
        return 0
    write(results)
    print(f"[measured] docs/testing.md: {', '.join(f'{s} {r.tests}' for s, r in results.items())}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
