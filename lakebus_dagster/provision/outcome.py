"""What a reconciler did to one object, in a form the Dagster UI can show."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from lakebus_dagster.markdown import markdown_table

OUTCOME_COLUMNS = ("kind", "name", "outcome", "details")


class Action(str, Enum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    #: the live object differs in a way provisioning reports but does not change
    DRIFT = "drift"


class ProvisioningError(RuntimeError):
    """The live state cannot be reconciled safely; the message names the object and why."""


@dataclass(frozen=True)
class Outcome:
    kind: str  # "bucket" | "namespace" | "topic" | "connector"
    name: str
    action: Action
    details: str = ""
    #: markdown of the differences (already redacted), when there are any
    diff_markdown: str = ""
    changes: tuple[str, ...] = field(default_factory=tuple)


def outcomes_markdown(outcomes: Iterable[Outcome]) -> str:
    """One row per outcome: kind, name as code, the action in bold, details (``|`` escaped)."""
    rows = [
        {"kind": o.kind, "name": f"`{o.name}`", "outcome": f"**{o.action.value}**", "details": o.details}
        for o in outcomes
    ]
    return markdown_table(rows, OUTCOME_COLUMNS)
