"""The user docs stay short, true and connected; each rule below is one test that can fail:

* README.md is a first screen (at most 150 lines) that says how to run lakebus, what it guarantees and
  where to go next;
* no project history in the user docs (README.md, docs/, deploy/README.md) nor in BENCHMARKS.md: no "stop N",
  "issue N", "seed N", "round N", no "this session" — upstream references such as apache/iceberg#17637 stay;
  in BENCHMARKS.md a code span (a benchmark variant such as ``stop12``, a command line) is code, not prose;
* every number with a unit in README.md (s, ms, min, minutes, h, hours, MiB, GiB, MB, GB, ×, %) is the
  text of a link to where it was measured: a BENCHMARKS.md section, docs/testing.md's measured run or a
  test under lakebus_dagster_tests/;
* every relative link points at a file that exists, and every ``#anchor`` of a link between markdown
  files at a heading (GitHub's slug) or an ``<a id>`` of the target;
* the user docs stay within a word budget (docs/claims.md, generated from README.md's sentences, is not counted);
* lakebus.example.yaml shows the monitoring policy's shipped defaults, as it says it does;
* CONTRIBUTING.md's layout names every package under ``lakebus_dagster/``.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
BENCHMARKS = ROOT / "BENCHMARKS.md"
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")
#: what a user reads: the README, every page under docs/ and the deploy guide (BENCHMARKS.md is the record
#: of the measurements; CONTRIBUTING.md and the generated lakebus_dagster/MODULES.md are for contributors)
USER_DOCS = [README, ROOT / "deploy" / "README.md", *sorted(DOCS.rglob("*.md"))]
#: words of USER_DOCS together, at most: the goal of 27,000 (the docs are below it; a page that grows
#: must take its words from another)
WORD_BUDGET = 27_000
#: generated from README.md's sentences (lakebus_dagster_tests/claims.py): counting it would count the README twice
GENERATED_DOCS = [DOCS / "claims.md"]
HISTORY = re.compile(
    r"\b(?:stop|issue|seed|round|prompt)s?[ -]?#?\d+"  # stop 15, issue 29.2, seeds 002-004, stop-14, prompt10
    r"|\b(?:this|previous|earlier) (?:session|round)\b",  # "this session" (another session, a Spark one, is no history)
    re.I,
)
UNIT = r"(?:ms|s|min|minutes?|h|hours?|MiB|GiB|MB|GB|×|%)"
NUMBER_WITH_UNIT = re.compile(rf"(?<![\w.#/-])\d[\d,.]*(?:-\d[\d,.]*)?\s?{UNIT}(?![A-Za-z0-9])")
MEASURED_LINK = re.compile(r"\[([^\]]*)\]\(((?:BENCHMARKS\.md|docs/testing\.md)#[^)\s]+|lakebus_dagster_tests/[^)\s]+\.py)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def prose(text: str) -> str:
    """``text`` without its fenced code blocks (commands and their output are not prose)."""
    return FENCE.sub("", text)


def test_readme_is_a_first_screen():
    text = README.read_text()
    assert len(text.splitlines()) <= 150, "move detail into docs/"
    for needle in ("make demo", "make test", "lakebus stack status", "lakebus stack down", "lakebus ui down",
                   "make stack-down", "LAKEBUS_ALERT_SINK", "lakebus/alerts", ".venv/bin", "## The `lakebus` command",
                   "## What it guarantees", "offset_ledger_job", "dlq-events", "docs/runbooks/", "deploy/README.md",
                   "## Where to go next"):
        assert needle in text, needle
    for port in ("9000", "19092", "19093", "8181", "8083", "7077", "18080", "7078", "18081", "15002", "18082", "3000"):
        assert re.search(rf"\b{port}\b", text), port


def history_in(text: str) -> list[str]:
    return [m.group(0) for m in HISTORY.finditer(text)]


def test_no_project_history_in_user_docs():
    found = {str(p.relative_to(ROOT)): history_in(p.read_text()) for p in USER_DOCS}
    assert {path: words for path, words in found.items() if words} == {}, "say what is, not when it came"


CODE_SPAN = re.compile(r"`[^`\n]*`")


def test_no_project_history_in_the_benchmarks():
    """BENCHMARKS.md keeps every measurement with its date and machine, and says nothing of when it was
    asked for; the benchmarks' variant names (``stop12``, ``prompt10``) are code and may appear as code."""
    assert history_in(CODE_SPAN.sub("", BENCHMARKS.read_text())) == [], "say what was measured, not when it came"
    assert history_in(CODE_SPAN.sub("", "arm `stop12` at seed 7; `… prompt10:10`")) == ["seed 7"]


def test_the_history_rule():
    assert history_in("as measured at stop 15; issue 29.2's test; seeds 002–004; Failover at stop-14; arm prompt10") == [
        "stop 15", "issue 29", "seeds 002", "stop-14", "prompt10"]
    assert history_in("Not measured this session.") == ["this session"]
    assert history_in("the sink's consumer session 18 s; apache/iceberg#17637; stop the connector; 2 rounds") == []


def unlinked_numbers(text: str) -> list[str]:
    """Every number with a unit in ``text``'s prose that is not inside the text of a link to a measurement."""
    out = []
    for line in prose(text).splitlines():
        linked = " ".join(m.group(1) for m in MEASURED_LINK.finditer(line))
        bare = MEASURED_LINK.sub("", line)
        out += [m.group(0) for m in NUMBER_WITH_UNIT.finditer(bare)]
        assert all(n in linked for n in NUMBER_WITH_UNIT.findall(linked))
    return out


def test_every_number_with_a_unit_in_the_readme_links_to_where_it_was_measured():
    assert unlinked_numbers(README.read_text()) == [], (
        "make each the text of a link to its BENCHMARKS.md section, docs/testing.md#measured or its test")


def test_the_number_rule():
    assert unlinked_numbers("takes 3 min 15 s; 6.9× faster; RSS +1.4 %; ~0.6-0.7 GiB; 28.1s") == [
        "3 min", "15 s", "6.9×", "1.4 %", "0.6-0.7 GiB", "28.1s"]
    assert unlinked_numbers("takes [3 min 15 s](BENCHMARKS.md#make-demo), [within 3 minutes](lakebus_dagster_tests/integration/t.py)") == []
    assert unlinked_numbers("port 19092, 20,000 events, 20 kills, 2025-11-25, a 2-core machine") == []
    assert unlinked_numbers("```bash\nsleep 5 s\n```\n") == []
    assert unlinked_numbers("[3 min](docs/operations.md#failover)") == ["3 min"]  # a guide is not a measurement


def test_every_relative_link_resolves():
    broken = []
    for path in USER_DOCS:
        for target, _ in LINK.findall(path.read_text()):
            if re.match(r"^[a-z]+:", target):
                continue
            if not (path.parent / target).resolve().exists():
                broken.append(f"{path.relative_to(ROOT)} -> {target}")
    assert broken == []


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor of a markdown page: its headings' slugs (GitHub numbers repeats -1, -2, ...) and ``<a id>``s."""
    out, seen = set(), {}
    for match in re.finditer(r"^#{1,6} +(.+?) *#*$", prose(text), re.M):
        base = slug(match.group(1))
        n = seen.get(base, 0)
        out.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    out |= set(re.findall(r"<a (?:id|name)=\"([^\"]+)\"", text))
    return out


def broken_anchors(files: list[Path], root: Path = ROOT) -> list[str]:
    broken = []
    for path in files:
        text = path.read_text()
        for target, fragment in re.findall(r"\]\(([^)#\s]*)(#[^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target) or not (target == "" or target.endswith(".md")):
                continue
            page = path if target == "" else (path.parent / target).resolve()
            if page.is_file() and fragment[1:] not in anchors(page.read_text()):
                broken.append(f"{path.relative_to(root)} -> {target}{fragment}")
    return broken


def test_every_anchor_link_resolves():
    assert broken_anchors([*USER_DOCS, BENCHMARKS, ROOT / "CONTRIBUTING.md", ROOT / "lakebus_dagster" / "MODULES.md"]) == []


def test_the_anchor_rule(tmp_path):
    (tmp_path / "a.md").write_text('# Title\n\n## Failover: a worker dies (`x`)\n\n## Notes\n\n## Notes\n\n<a id="day-thirty"></a>\n\n'
                                   "```\n# not a heading\n```\n")
    (tmp_path / "b.md").write_text("[ok](a.md#failover-a-worker-dies-x) [ok](a.md#notes-1) [ok](a.md#day-thirty) [ok](#here)\n"
                                   "[bad](a.md#failover) [bad](a.md#not-a-heading) [bad](#nowhere)\n\n## Here\n")
    assert broken_anchors([tmp_path / "b.md"], tmp_path) == [
        "b.md -> a.md#failover", "b.md -> a.md#not-a-heading", "b.md -> #nowhere"]


def test_the_user_docs_keep_to_their_word_budget():
    words = sum(len(p.read_text().split()) for p in USER_DOCS if p not in GENERATED_DOCS)
    assert words <= WORD_BUDGET, f"the user docs have {words} words, the budget is {WORD_BUDGET}: link, do not restate"


def test_the_example_config_shows_the_shipped_monitoring_defaults():
    from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource

    example = yaml.safe_load((ROOT / "lakebus.example.yaml").read_text())["monitoring"]
    defaults = {name: field.default for name, field in MonitoringPolicyResource.model_fields.items()}
    assert {k: v for k, v in example.items() if defaults.get(k) != v} == {}, "lakebus.example.yaml says these are the shipped defaults"
    assert sorted(set(defaults) - set(example)) == []


def test_the_layout_names_every_package():
    text = (ROOT / "CONTRIBUTING.md").read_text()
    layout = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    packages = sorted(p.name for p in (ROOT / "lakebus_dagster").iterdir() if (p / "__init__.py").is_file())
    defs = sorted(p.name for p in (ROOT / "lakebus_dagster" / "defs").iterdir() if (p / "__init__.py").is_file())
    assert [p for p in packages if f"  {p}/" not in layout] == []
    assert [p for p in defs if f"{p}/" not in layout] == []
