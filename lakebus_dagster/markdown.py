"""The one markdown-table writer of the package (run metadata, alerts, reports).

Dagster renders ``MetadataValue.md`` as GitHub-flavoured markdown; every table lakebus shows in the
UI goes through :func:`markdown_table`, so cells are escaped and formatted the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

EMPTY = "_no rows_"
NULL = "∅"


def markdown_cell(value: Any) -> str:
    """``None`` -> ``∅``, floats with thousands separators and 2 decimals, ``|`` escaped."""
    if value is None:
        return NULL
    if isinstance(value, float):
        return f"{value:,.2f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    """A GitHub-flavoured markdown table of ``rows`` (columns: ``columns`` or the first row's keys)."""
    if not rows:
        return EMPTY
    columns = list(columns or rows[0].keys())
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(markdown_cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)
