"""``lakebus jobs``: the code location's jobs and the first sentence of each description, read from
the code (``lakebus_dagster.definitions.defs``), so it works without the Dagster UI running."""

from __future__ import annotations

import argparse
import re
import warnings

DESCRIPTION = """\
The jobs of the lakebus code location, one line each: its name and what it does (the first
sentence of its description). Read from the code, so the Dagster UI need not be running; run one
with `lakebus launch NAME`.
"""

EXAMPLES = """\
  lakebus jobs                       # then: lakebus launch <name>
  lakebus jobs | grep connector
"""

#: a sentence ends at . ! or ? followed by the end, or by a space and a capital, a quote or a parenthesis
#: ("e.g. the sink" does not end one)
_SENTENCE = re.compile(r"^(.+?[.!?])(?=$|\s+[A-Z`'\"(])")


def first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    match = _SENTENCE.match(flat)
    return match.group(1) if match else flat


def job_lines() -> list[tuple[str, str]]:
    """``[(name, first sentence of its description)]`` of every job except Dagster's hidden ones."""
    with warnings.catch_warnings():  # Dagster's beta/preview warnings are for the code's authors
        warnings.simplefilter("ignore")
        from lakebus_dagster.definitions import defs

        jobs = defs.get_repository_def().get_all_jobs()
    return sorted((j.name, first_sentence(j.description or "")) for j in jobs if not j.name.startswith("__"))


def configure(p: argparse.ArgumentParser) -> None:
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    lines = job_lines()
    width = max(len(name) for name, _ in lines)
    for name, text in lines:
        print(f"{name:<{width}}  {text or '-'}".rstrip())
    return 0
