"""One audit record per finished run of an audited job: who launched it and from where, its config
with secret-looking values redacted, its outcome and its times — the metadata of one observation of
the ``lakebus/audit`` asset."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

import dagster as dg

from lakebus_dagster.defs.asset_keys import AUDIT_KEY

#: the tag Dagster (or the deployment's login proxy) puts on a run launched by a known user
USER_TAGS = ("dagster/user", "user")
#: where a run was launched from, when not by hand: Dagster's own run tags
ORIGIN_TAGS = (("dagster/schedule_name", "schedule"), ("dagster/sensor_name", "sensor"), ("dagster/backfill", "backfill"))
REDACTED = "<redacted>"
#: a config key whose value is a secret (any depth of the run config, resources included)
SECRET_KEY = re.compile(r"secret|passw|token|credential|api[_-]?key|access[_-]?key|private[_-]?key|auth|sasl\.jaas|jaas", re.I)
#: credentials inside a value: ``scheme://user:password@host``
URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^/@\s:]+:[^/@\s]+@", re.I)
#: what a run's end event is called in the record
OUTCOMES = {"PIPELINE_SUCCESS": "SUCCESS", "PIPELINE_FAILURE": "FAILURE", "PIPELINE_CANCELED": "CANCELED"}

audit_asset = dg.AssetSpec(
    AUDIT_KEY,
    description="Every run of an operator action (guarded, provisioning and connector maintenance jobs), one "
    "observation each once it ended: job, run, who launched it and from where, its config (secrets redacted), outcome "
    "and times. Recorded by operator_audit_sensor into Dagster's event log.",
    group_name="monitoring",
    kinds={"python"},
)


def redact(value: Any, key: str = "") -> Any:
    """``value`` with every secret-looking entry replaced: by its key (password, token, secret, ...) or,
    in a string, the credentials of a URL."""
    if key and SECRET_KEY.search(key) and value not in (None, "", [], {}):
        return REDACTED
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return URL_CREDENTIALS.sub(lambda m: f"{m['scheme']}{REDACTED}@", value)
    return value


def launched_by(tags: dict[str, str]) -> str:
    return next((tags[t] for t in USER_TAGS if tags.get(t)), "unknown")


def launched_from(tags: dict[str, str]) -> str:
    return next((f"{kind} {tags[t]}" for t, kind in ORIGIN_TAGS if tags.get(t)), "launchpad, CLI or API")


def _iso(ts: float | None) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds") if ts else "-"


def audit_observation(record: dg.RunRecord, event_type: str, message: str) -> dg.AssetObservation:
    """The observation of ``lakebus/audit`` recording one finished run."""
    run = record.dagster_run
    tags = dict(run.tags)
    return dg.AssetObservation(
        asset_key=AUDIT_KEY,
        description=f"{run.job_name}: {OUTCOMES.get(event_type, event_type)}",
        metadata={
            "job": run.job_name,
            "run": dg.MetadataValue.dagster_run(run.run_id),
            "outcome": OUTCOMES.get(event_type, event_type),
            "launched_by": launched_by(tags),
            "launched_from": launched_from(tags),
            "config": dg.MetadataValue.json(redact(dict(run.run_config or {}))),
            "created": _iso(record.create_timestamp.timestamp()),
            "started": _iso(record.start_time),
            "ended": _iso(record.end_time),
            "message": redact((message or "")[:500]),
        },
    )
