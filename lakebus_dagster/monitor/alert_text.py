"""The one alert builder: plain JSON, each text ending with the runbook that answers it.

It lives in the core because the decision core (:mod:`.status_tick`) writes the alerts a tick owes
into the incident book; delivering them is the Dagster side's
(:mod:`lakebus_dagster.defs.alerts`, which every domain imports it from).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lakebus_dagster.monitor.runbooks import runbook_for


def make_alert(kind: str, title: str, text: str | Sequence[str] = "", key: str | None = None) -> dict[str, Any]:
    """``text`` is a string or its lines; the text always ends with ``runbook: <path>``
    (docs/runbooks/, by kind and key). Plain JSON: an alert may wait in a sensor cursor until it is
    delivered."""
    body = text if isinstance(text, str) else "\n".join(text)
    link = f"runbook: {runbook_for(kind, key)}"
    return {"kind": kind, "title": title, "text": f"{body}\n{link}" if body else link, "key": key}
