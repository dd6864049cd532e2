"""docs/claims.md, generated: every claim README.md makes and what holds it.

    python -m lakebus_dagster_tests.claims            rewrite docs/claims.md from README.md
    python -m lakebus_dagster_tests.claims --check    exit 1 when docs/claims.md is stale or a claim has no holder

The rule, as ``claims()`` applies it:

* **Sentences.** README.md's prose is cut into blocks: paragraphs and list items. Fenced code, headings
  and tables are not prose (a table lists ports and pages, it asserts nothing). A block is cut into
  sentences after a ``.``, ``!`` or ``?`` (with one closing ``**``, ``*`` or ``)`` after it, if any) followed
  by white space and a letter, a backtick, ``*``, ``[`` or ``(`` — not after "e.g.", "i.e.", "cf.", "vs." or
  "etc.".
* **Claims.** A sentence is a claim when it has a number with a unit (test_docs's ``NUMBER_WITH_UNIT``:
  s, ms, min, h, MiB, GiB, MB, GB, ×, % …) or a guarantee: one of the words or phrases of ``GUARANTEE``
  (case-insensitive, whole words) — "once", "twice", "exactly", "never", "duplicate(s/d)", "lost", "loss",
  "lose(s)", "within", "at most", "at least", "every", "nothing", "bounded". Markdown link targets do not
  count, link texts do.
* **Holders.** A holder is a markdown link in the claim (test_docs's ``MEASURED_LINK``) to a section of
  BENCHMARKS.md or docs/testing.md (``#anchor`` required) or to a test file under lakebus_dagster_tests/.
  A list item's bold title (``- **Every acknowledged event lands once.** …``) is the summary of its item:
  it is held by every holder of the item's other sentences.
* **A holder holds** when its file exists, its anchor is a heading's slug or an ``<a id>`` of that file
  (test_docs's ``anchors``), and a test file defines at least one ``def test_``.

``lakebus_dagster_tests/unit/test_claims.py`` fails when docs/claims.md is not this module's output, when
a claim has no holder and when a holder does not hold.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from lakebus_dagster_tests.unit.test_docs import MEASURED_LINK, NUMBER_WITH_UNIT, anchors, prose

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOC = ROOT / "docs" / "claims.md"
GUARANTEE = re.compile(
    r"\b(?:once|twice|exactly|never|duplicate[sd]?|lost|loss|loses?|within|at most|at least|every|nothing|bounded)\b", re.I)
_SENTENCE_END = re.compile(r"[.!?](?:\*\*|\*|\))?(?=\s+[A-Za-z`*\[(])")
_ABBREVIATION = re.compile(r"(?:\b(?:e\.g|i\.e|cf|vs|etc)\.)$", re.I)
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_BULLET = re.compile(r"^\s*[-*] +")
_TITLE = re.compile(r"^\*\*[^*]+[.:]\*\*")


@dataclass(frozen=True)
class Claim:
    section: str  #: the README heading it is under
    text: str  #: the sentence, on one line
    holders: tuple[str, ...]  #: link targets, as written in README.md

    @property
    def why(self) -> str:
        """What makes the sentence a claim: its numbers with a unit, then its guarantee words."""
        words = _LINK_TARGET.sub("]", self.text)
        found = [m.group(0) for m in NUMBER_WITH_UNIT.finditer(words)] + [m.group(0).lower() for m in GUARANTEE.finditer(words)]
        return ", ".join(dict.fromkeys(found))


def blocks(text: str) -> list[tuple[str, str, bool]]:
    """(section, block on one line, is a list item) for each paragraph and list item of ``text``'s prose."""
    out: list[tuple[str, str, bool]] = []
    section, current, bullet = "", [], False

    def flush():
        nonlocal current
        if current:
            out.append((section, " ".join(current), bullet))
        current = []

    for line in prose(text).splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("|") or stripped.startswith("#"):
            flush()
            if stripped.startswith("#"):
                section = stripped.lstrip("#").strip()
            continue
        if _BULLET.match(line):
            flush()
            bullet = True
            current = [_BULLET.sub("", line).strip()]
        else:
            if not current:
                bullet = False
            current.append(stripped)
    flush()
    return out


def sentences(block: str) -> list[str]:
    """``block`` cut after each sentence's end (see the module's rule)."""
    out, start = [], 0
    for m in _SENTENCE_END.finditer(block):
        if _ABBREVIATION.search(block[:m.end()]):
            continue
        out.append(block[start:m.end()].strip())
        start = m.end()
    out.append(block[start:].strip())
    return [s for s in out if s]


def is_claim(sentence: str) -> bool:
    words = _LINK_TARGET.sub("]", sentence)
    return bool(NUMBER_WITH_UNIT.search(words) or GUARANTEE.search(words))


def holders_in(sentence: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(m.group(2) for m in MEASURED_LINK.finditer(sentence)))


def claims(text: str) -> list[Claim]:
    """Every claim of the markdown ``text`` with its holders, in order (the rule: the module's docstring)."""
    out = []
    for section, block, bullet in blocks(text):
        parts = sentences(block)
        for i, sentence in enumerate(parts):
            if not is_claim(sentence):
                continue
            held = holders_in(sentence)
            if bullet and i == 0 and _TITLE.match(sentence):
                held = tuple(dict.fromkeys([*held, *(h for s in parts[1:] for h in holders_in(s))]))
            out.append(Claim(section, sentence, held))
    return out


def holder_problem(target: str, root: Path = ROOT) -> str | None:
    """Why ``target`` (a link from README.md) does not hold a claim, or None when it does."""
    path, _, anchor = target.partition("#")
    file = root / path
    if not file.is_file():
        return f"{path} does not exist"
    text = file.read_text()
    if anchor and anchor not in anchors(text):
        return f"{path} has no heading or <a id> #{anchor}"
    if path.endswith(".py") and not re.search(r"^\s*(?:async )?def test_", text, re.M):
        return f"{path} defines no test"
    return None


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(found: list[Claim]) -> str:
    lines = [
        "# Claims",
        "",
        "<!-- generated by `python -m lakebus_dagster_tests.claims` from README.md; do not edit by hand -->",
        "Generated from README.md: rerun `python -m lakebus_dagster_tests.claims` after changing it. Every",
        "sentence of the README with a number and a unit or a guarantee word, and the test or measurement that",
        "holds it; `unit/test_claims.py` fails when a claim has no holder, a holder is gone or this page is stale.",
        "The rule is the docstring of `lakebus_dagster_tests/claims.py`.",
        "",
        "| README section | claim | because of | held by |",
        "|---|---|---|---|",
    ]
    for claim in found:
        held = "<br>".join(f"[{h}](../{h})" for h in claim.holders) or "**none**"
        lines.append(f"| {_cell(claim.section)} | {_cell(_LINK_TARGET.sub(']', claim.text).replace('[', '').replace(']', ''))} "
                     f"| {_cell(claim.why)} | {held} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    found = claims(README.read_text())
    text = render(found)
    problems = [f"no holder: {c.text}" for c in found if not c.holders]
    problems += [f"{h}: {p}" for c in found for h in c.holders if (p := holder_problem(h))]
    if "--check" in argv:
        if DOC.read_text() != text:
            problems.append(f"{DOC.relative_to(ROOT)} is stale: run python -m lakebus_dagster_tests.claims")
    else:
        DOC.write_text(text)
        print(f"wrote {DOC.relative_to(ROOT)}: {len(found)} claims")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
