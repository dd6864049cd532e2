"""The confirmation rule of destructive and repair jobs, and the tag that puts a job's runs in the audit.

A destructive job (deleting a connector, moving offsets, deleting lake rows, re-queueing or replaying
records, re-reading captured tables) runs only when its config names the object it acts on a second
time, in ``confirm``: a run launched with the Launchpad's defaults, or for the wrong connector or
table, is refused before anything is read or changed. Schedules and sensors that launch such a job
put the confirmation in their run config themselves.

Every job tagged :data:`AUDITED` (the guarded ones, provisioning, connector maintenance) is recorded by
the ``operator_audit_sensor`` once it ends (:mod:`lakebus_dagster.defs.audit`).
"""

from __future__ import annotations

from typing import Any

import dagster as dg
from pydantic import Field

#: run tag of the jobs whose runs the audit records (the job's tags are every run's tags)
AUDIT_TAG = "lakebus/audit"
#: the tags of an audited job (merge them into the job's own)
AUDITED = {AUDIT_TAG: "operator-action"}


def confirm_field(what: str) -> Any:
    """The ``confirm`` config field of a guarded job; ``what`` names the object to type, e.g. "the connector's name"."""
    return Field(default="", description=f"type {what} to confirm; the run is refused otherwise")


def require_confirmation(job: str, confirm: str, expected: str, what: str) -> None:
    """Refuse (a :class:`dagster.Failure`, not retried) unless ``confirm`` equals ``expected``.

    The message names the job, the field and the value to type (a name, never a secret); the
    value given is not repeated."""
    if confirm == expected:
        return
    given = "is empty" if not confirm else "does not match"
    raise dg.Failure(
        f"{job}: refused, nothing was changed: config.confirm {given}; set config.confirm to {what} "
        f"({expected!r}) to confirm",
        metadata={"job": job, "field": "confirm", "expected": expected},
        allow_retries=False,
    )


def confirm_config(op: str, expected: str, **config: Any) -> dict[str, Any]:
    """Run config of a one-op guarded job with its confirmation (what a schedule or sensor requests)."""
    return {"ops": {op: {"config": {**config, "confirm": expected}}}}
