"""docs/claims.md is the claims table of README.md as ``lakebus_dagster_tests.claims`` generates it, every
claim has a holder and every holder holds: a test file that exists and defines a test, or a BENCHMARKS.md /
docs/testing.md section whose anchor exists. The rule itself (what a sentence is, what makes it a claim,
what holds it) is pinned on small texts below."""

from __future__ import annotations

from pathlib import Path

from lakebus_dagster_tests.claims import DOC, README, ROOT, claims, holder_problem, render, sentences


def test_the_committed_claims_table_is_the_generators_output():
    assert DOC.read_text() == render(claims(README.read_text())), (
        "README.md changed: run `python -m lakebus_dagster_tests.claims` and commit docs/claims.md")


def test_every_readme_claim_has_a_holder():
    assert [c.text for c in claims(README.read_text()) if not c.holders] == [], (
        "make part of each sentence the text of a link to the test or BENCHMARKS.md / docs/testing.md section "
        "that holds it, or say it without a number or a guarantee word")


def test_every_holder_holds():
    problems = {h: holder_problem(h) for c in claims(README.read_text()) for h in c.holders}
    assert {h: p for h, p in problems.items() if p} == {}


def test_sentences_end_at_a_stop_before_the_next_one_and_not_inside_abbreviations():
    assert sentences("**Lands once.** An event (`x`) lands, e.g. a bet. lakebus's task stops; fine. Python 3.11 runs.") == [
        "**Lands once.**", "An event (`x`) lands, e.g. a bet.", "lakebus's task stops; fine.", "Python 3.11 runs."]


def test_a_claim_is_a_sentence_with_a_number_and_a_unit_or_a_guarantee_word():
    text = ("# T\n\nIt takes [3 min](BENCHMARKS.md#make-demo). It takes 3 min. Port 19092, 20,000 events. Nothing is lost.\n"
            "It runs [every](lakebus_dagster_tests/unit/test_x.py) stage. A link [x](docs/at-most.md) is not a word of it.\n\n"
            "| table | every 3 s |\n|---|---|\n\n```\nsleep 5 s # code, once\n```\n")
    assert [(c.section, c.text, c.holders, c.why) for c in claims(text)] == [
        ("T", "It takes [3 min](BENCHMARKS.md#make-demo).", ("BENCHMARKS.md#make-demo",), "3 min"),
        ("T", "It takes 3 min.", (), "3 min"),
        ("T", "Nothing is lost.", (), "nothing, lost"),
        ("T", "It runs [every](lakebus_dagster_tests/unit/test_x.py) stage.", ("lakebus_dagster_tests/unit/test_x.py",), "every"),
    ]


def test_a_list_items_bold_title_is_held_by_its_items_holders_and_a_guide_holds_nothing():
    text = ("## G\n\n- **Every event lands once.** It is one row [in the test](lakebus_dagster_tests/unit/test_x.py).\n"
            "  Measured: [no duplicate](BENCHMARKS.md#failover).\n"
            "- **Day thirty is bounded**: see [the guide](docs/operations.md#bounds), never more.\n\n"
            "**Once, not a list item.** It is [once](BENCHMARKS.md#failover).\n")
    found = {c.text: c.holders for c in claims(text)}
    assert found["**Every event lands once.**"] == ("lakebus_dagster_tests/unit/test_x.py", "BENCHMARKS.md#failover")
    assert found["**Day thirty is bounded**: see [the guide](docs/operations.md#bounds), never more."] == ()
    assert found["It is [once](BENCHMARKS.md#failover)."] == ("BENCHMARKS.md#failover",)
    assert found["**Once, not a list item.**"] == ()  # a paragraph's bold opening is a sentence of its own


def test_a_holder_holds_when_its_file_exists_its_anchor_resolves_and_a_test_file_has_a_test(tmp_path: Path):
    (tmp_path / "BENCHMARKS.md").write_text('# B\n\n## Failover: 20 kills\n\n<a id="day-thirty"></a>\n')
    tests = tmp_path / "lakebus_dagster_tests" / "unit"
    tests.mkdir(parents=True)
    (tests / "test_real.py").write_text("def test_it():\n    assert True\n")
    (tests / "test_empty.py").write_text('"""No test here: def test_ in a docstring is no test."""\n')
    assert [holder_problem(h, tmp_path) for h in (
        "BENCHMARKS.md#failover-20-kills", "BENCHMARKS.md#day-thirty", "lakebus_dagster_tests/unit/test_real.py",
        "BENCHMARKS.md#failover", "lakebus_dagster_tests/unit/test_gone.py", "lakebus_dagster_tests/unit/test_empty.py",
    )] == [
        None, None, None,
        "BENCHMARKS.md has no heading or <a id> #failover",
        "lakebus_dagster_tests/unit/test_gone.py does not exist",
        "lakebus_dagster_tests/unit/test_empty.py defines no test",
    ]


def test_the_table_names_each_claims_holders_as_links_from_docs():
    assert ROOT / "docs" / "claims.md" == DOC
    table = render(claims("# T\n\nIt takes [3 min](BENCHMARKS.md#make-demo). Nothing is lost.\n"))
    assert "python -m lakebus_dagster_tests.claims" in table.splitlines()[2]
    assert table.splitlines()[-2:] == [
        "| T | It takes 3 min. | 3 min | [BENCHMARKS.md#make-demo](../BENCHMARKS.md#make-demo) |",
        "| T | Nothing is lost. | nothing, lost | **none** |",
    ]
