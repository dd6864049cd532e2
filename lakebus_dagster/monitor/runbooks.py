"""Which runbook answers which alert: alert kind (and, for incidents, the incident key) -> a file
under ``docs/runbooks/`` (a path relative to the repository root).

Pure data and one lookup, no Dagster. An alert text can end with ``runbook: <path>`` from
:func:`runbook_for`; ``lakebus_dagster_tests/unit/test_runbooks.py`` derives every alert kind and
incident key the code can send (from the code itself) and fails when one has no runbook here or a
runbook named here does not exist.
"""

from __future__ import annotations

import re

RUNBOOK_DIR = "docs/runbooks"
#: the index of every runbook (also what :func:`runbook_for` answers for a kind it does not know)
INDEX = f"{RUNBOOK_DIR}/README.md"

#: alert kinds other than ``incident``: one runbook each (the ``kind`` of ``make_alert`` / the alert dict)
BY_KIND: dict[str, str] = {
    "recovery": f"{RUNBOOK_DIR}/recovery.md",
    "escalation": f"{RUNBOOK_DIR}/escalation.md",
    "quarantined": f"{RUNBOOK_DIR}/poison-record.md",
    "dlq": f"{RUNBOOK_DIR}/dlq-new-reason.md",
    "offset_ledger": f"{RUNBOOK_DIR}/offset-ledger.md",
    "requeued": f"{RUNBOOK_DIR}/offset-ledger.md",
    "topic": f"{RUNBOOK_DIR}/topic-appeared-or-disappeared.md",
    "schema": f"{RUNBOOK_DIR}/schema-change.md",
}

#: ``incident`` alerts by incident key (:mod:`lakebus_dagster.monitor.incidents`, the status sensor;
#: :mod:`lakebus_dagster.monitor.lake_incidents`, the lake sensor); ``<...>`` stands for one segment
#: of the key (a connector, task id, topic name or asset key: no ``:`` in it), ``<name...>`` for
#: the rest of the key, ``:`` included (an hourly partition ``2025-11-25-09:00``,
#: a range ``2025-11-25-00:00...2025-11-25-23:00``)
BY_INCIDENT: dict[str, str] = {
    "connect:unreachable": f"{RUNBOOK_DIR}/connect-unreachable.md",
    "connect:starting": f"{RUNBOOK_DIR}/connect-starting.md",
    "connect:failing": f"{RUNBOOK_DIR}/connect-failing.md",
    "connector:<name>:missing": f"{RUNBOOK_DIR}/connector-missing.md",
    "connector:<name>:FAILED": f"{RUNBOOK_DIR}/connector-failed.md",
    "connector:<name>:task:<id>:FAILED": f"{RUNBOOK_DIR}/connector-failed.md",
    "connector:<name>:task:<id>:UNASSIGNED": f"{RUNBOOK_DIR}/task-unassigned.md",
    "connector:<name>:state": f"{RUNBOOK_DIR}/connector-unexpected-state.md",
    "connector:<name>:stalled": f"{RUNBOOK_DIR}/sink-stalled.md",
    "connector:<name>:progress-unknown": f"{RUNBOOK_DIR}/kafka-unreadable.md",
    "connector:<name>:slot:inactive": f"{RUNBOOK_DIR}/cdc-replication-slot.md",
    "connector:<name>:slot:lost": f"{RUNBOOK_DIR}/cdc-replication-slot.md",
    "connector:<name>:slot:unreadable": f"{RUNBOOK_DIR}/cdc-replication-slot.md",
    "declared-state:<topic>:unreadable": f"{RUNBOOK_DIR}/kafka-unreadable.md",
    "dws:<job>:<partition...>": f"{RUNBOOK_DIR}/dws-run-failed.md",
    "check:<asset>:<check>:<partition...>": f"{RUNBOOK_DIR}/dws-check-failed.md",
    "fresh:<asset>": f"{RUNBOOK_DIR}/stale-ods.md",
}

#: situations no single alert kind names (an operator's own diagnosis, or planned work)
BY_SITUATION: dict[str, str] = {
    "catalog down": f"{RUNBOOK_DIR}/catalog-down.md",
    "S3 down": f"{RUNBOOK_DIR}/s3-down.md",
    "broker down": f"{RUNBOOK_DIR}/broker-down.md",
    "schema change": f"{RUNBOOK_DIR}/schema-change.md",
    "replay / re-ingest from offsets": f"{RUNBOOK_DIR}/replay-reingest.md",
    "DWS backfill": f"{RUNBOOK_DIR}/dws-backfill.md",
    "Dagster daemon down": f"{RUNBOOK_DIR}/dagster-daemon-down.md",
    "Postgres down": f"{RUNBOOK_DIR}/postgres-down.md",
    "change capture: replication slot lost, inactive or holding WAL": f"{RUNBOOK_DIR}/cdc-replication-slot.md",
    "Spark Connect down": f"{RUNBOOK_DIR}/spark-connect-down.md",
    "change capture: stop capturing a table, drop its lake tables": f"{RUNBOOK_DIR}/cdc-drop-table.md",
}


def _pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"(<[^>]+>)", template)
    return re.compile("".join(
        (".+" if p.endswith("...>") else "[^:]+") if p.startswith("<") else re.escape(p) for p in parts
    ) + r"\Z")


_INCIDENT_PATTERNS = [(_pattern(t), path) for t, path in BY_INCIDENT.items()]


def incident_runbook(key: str) -> str | None:
    """The runbook of an incident key, ``None`` when no pattern matches it."""
    return next((path for pattern, path in _INCIDENT_PATTERNS if pattern.match(key)), None)


def runbook_for(kind: str, key: str | None = None) -> str:
    """The runbook of an alert: by incident key for ``incident`` alerts, by kind for the others;
    :data:`INDEX` for anything unknown (an alert is never held back for want of a link)."""
    if kind == "incident":
        return incident_runbook(key or "") or INDEX
    return BY_KIND.get(kind, INDEX)

