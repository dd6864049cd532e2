"""docs/testing.md's measured table: its test counts are the suite's (collected here), and it is
rendered from JUnit reports as written out below."""

from __future__ import annotations

from lakebus_dagster_tests.measured import DOC, collected_counts, documented_counts, junit_results, render


def test_the_documented_counts_are_the_suites():
    documented, collected = documented_counts(DOC.read_text()), collected_counts()
    assert documented == collected, (
        f"docs/testing.md says {documented}, the suite has {collected}: record a reference run "
        "(make test, then `python -m lakebus_dagster_tests.measured`), or set the tests column to the suite's, and commit docs/testing.md")


def test_junit_reports_render_as_the_table(tmp_path):
    (tmp_path / "junit-unit.xml").write_text(
        '<testsuites><testsuite name="pytest" tests="12" failures="1" errors="1" skipped="2" time="61.4"/></testsuites>')
    (tmp_path / "junit-lake.xml").write_text('<testsuite name="pytest" tests="3" failures="0" errors="0" skipped="0" time="900.6"/>')
    table = render(junit_results(tmp_path), "2026-11-27")
    assert table.splitlines() == [
        "Last `make test` on 2026-11-27:", "",
        "| stage | tests | failed | skipped | seconds |", "|---|---|---|---|---|",
        "| unit | 12 | 2 | 2 | 61 |", "| integration | — | — | — | — |", "| daemon | — | — | — | — |",
        "| lake | 3 | 0 | 0 | 901 |", "| cluster | — | — | — | — |", "| secured | — | — | — | — |", "| cdc | — | — | — | — |",
    ]
