"""Run metadata of the sample-events job, rendered for the Dagster UI.

Pure functions of a :class:`~lakebus_dagster.events.generate.RunSummary` and a few payloads, so
they are tested without Kafka or Dagster. Tables are Markdown because the UI renders it and the
same text reads fine in logs and in the run's raw event JSON.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from lakebus_dagster.events.generate import RunSummary
from lakebus_dagster.markdown import markdown_table


def per_day_counts(summary: RunSummary) -> dict[str, Counter[str]]:
    """``{log_date: Counter(event -> count)}``, days in order."""
    days: dict[str, Counter[str]] = {}
    for (event, day, _hour), count in sorted(summary.aggregates.per_event_hour.items(), key=lambda kv: kv[0][1]):
        days.setdefault(day, Counter())[event] += count
    return days


def per_day_table(summary: RunSummary) -> str:
    """One row per ``log_date``, one column per event, plus a total column and a total row."""
    events = sorted(summary.aggregates.per_event)
    days = per_day_counts(summary)
    columns = ["log_date", *events, "total"]
    rows: list[list[Any]] = [[day, *(c[e] for e in events), sum(c.values())] for day, c in days.items()]
    rows.append(["**total**", *(summary.aggregates.per_event[e] for e in events), summary.aggregates.total])
    return markdown_table([dict(zip(columns, row)) for row in rows], columns)


def payload_preview(payloads: Sequence[Mapping[str, Any]]) -> str:
    """The payloads as one table; columns are the union of their fields in first-seen order.

    Values are shown as JSON (``null``, ``"text"``, ``10.0``) so the preview says exactly what
    the envelope carries; a field an event does not have is left blank.
    """
    columns: dict[str, None] = {}
    for payload in payloads:
        columns.update(dict.fromkeys(payload))
    rows = [{c: json.dumps(p[c], ensure_ascii=False) if c in p else "" for c in columns} for p in payloads]
    return markdown_table(rows, list(columns))


def run_metadata(
    summary: RunSummary, *, topic: str, preview: Sequence[Mapping[str, Any]]
) -> dict[str, dg.RawMetadataValue]:
    """What the op attaches to its output: counts, delivery, speed and a look at the data."""
    return {
        "topic": topic,
        "per_event_counts": dg.MetadataValue.json(dict(sorted(summary.aggregates.per_event.items()))),
        "per_day_counts": dg.MetadataValue.md(per_day_table(summary)),
        "sent": summary.sent,
        "delivered": summary.delivered,
        "failed": summary.failed,
        "elapsed_s": round(summary.elapsed_s, 3),
        "rate_events_per_s": round(summary.rate, 1),
        "preview": dg.MetadataValue.md(payload_preview(preview)),
    }
