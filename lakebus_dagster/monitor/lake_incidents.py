"""Lake incidents — a failed DWS run, a failing DWS check, a stale ODS table — and the state that
keeps them across ticks of ``lake_incident_sensor``. Pure logic over plain data, no Dagster.

The sensor reads *outcomes* (a finished run, a check evaluation) newer than its watermarks and
applies them here in order. A failed outcome opens (or keeps open) the incident its key names; a
successful one of the same *family* closes every open incident of that family it covers: the same
partition or range label, or, partition by partition, every partition the failure concerned (a
failed range closes once later runs covered each of its partitions, whether one range run or one
run per partition did it). For runs the success must also have built the tables the failure was
about: ``assets`` ``None`` means "every table of its job" (a scheduled DWS job run), a set names
the DWS tables (an automation run's selection, or the steps that failed).

The open incidents, their alerts and recovery notices stay in the connector side's
:class:`~lakebus_dagster.monitor.incidents.IncidentBook` (one alert on open, silence while open,
one recovery); :class:`LakeState` wraps it with what only the lake side needs, as plain JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from lakebus_dagster.monitor.alert_text import make_alert
from lakebus_dagster.monitor.incidents import Incident, IncidentBook


@dataclass(frozen=True)
class LakeOutcome:
    """One finished thing the sensor read: a DWS run, a DWS check or freshness check evaluation."""

    #: what a success must be of to close a failure: ``dws`` (every DWS run), ``check:<asset>:<check>``, ``fresh:<asset>``
    family: str
    #: the incident key a failure opens
    key: str
    #: the partition, the range ``start...end``, or ``""`` (unpartitioned)
    label: str
    partitions: frozenset[str]
    ok: bool
    #: the incident's title (failures)
    summary: str = ""
    #: the alert's lines: what failed (a failure), what closed it (a success)
    detail: tuple[str, ...] = ()
    #: runs: the DWS tables a failure concerns / a success built; None: every table of its job
    assets: frozenset[str] | None = None


@dataclass
class OpenScope:
    """What an open lake incident still waits for."""

    family: str
    label: str
    #: partitions no later success has covered yet
    remaining: list[str]
    assets: list[str] | None = None


@dataclass
class LakeState:
    """The lake sensor's cursor: the incident book, each open incident's scope, and the watermarks
    of the outcomes already applied (a run's end time, a check event's storage id)."""

    book: IncidentBook = field(default_factory=IncidentBook)
    scopes: dict[str, OpenScope] = field(default_factory=dict)
    runs_after: float | None = None
    checks_after: int = 0

    def to_cursor(self) -> str:
        return json.dumps({"book": json.loads(self.book.to_cursor()), "scopes": {k: asdict(v) for k, v in self.scopes.items()},
                           "runs_after": self.runs_after, "checks_after": self.checks_after}, sort_keys=True)

    @classmethod
    def from_cursor(cls, cursor: str | None) -> LakeState:
        if not cursor:
            return cls()
        data = json.loads(cursor)
        return cls(IncidentBook.from_cursor(json.dumps(data.get("book", {}))),
                   {k: OpenScope(**v) for k, v in data.get("scopes", {}).items()},
                   data.get("runs_after"), int(data.get("checks_after", 0)))


@dataclass
class Applied:
    """What one tick's outcomes did: the newest title of each incident seen failing, the lines of
    the first failure of each (its alert), and what closed each incident that closed."""

    summaries: dict[str, str] = field(default_factory=dict)
    failed: dict[str, tuple[str, ...]] = field(default_factory=dict)
    closed: dict[str, tuple[str, ...]] = field(default_factory=dict)


def _builds(success: LakeOutcome, scope: OpenScope) -> bool:
    """Did ``success`` build what ``scope``'s failure was about (runs: its tables)?"""
    if success.assets is None:
        return True
    return scope.assets is not None and set(scope.assets) <= success.assets


def _open(state: LakeState, failure: LakeOutcome, applied: Applied) -> None:
    scope = state.scopes.get(failure.key)
    if scope is None:
        state.scopes[failure.key] = OpenScope(failure.family, failure.label, sorted(failure.partitions),
                                              sorted(failure.assets) if failure.assets is not None else None)
    else:  # a retry failing again: still the one incident, waiting for the union of what failed
        scope.remaining = sorted(set(scope.remaining) | failure.partitions)
        scope.assets = None if scope.assets is None or failure.assets is None else sorted(set(scope.assets) | failure.assets)
    applied.summaries[failure.key] = failure.summary
    applied.failed.setdefault(failure.key, failure.detail)
    applied.closed.pop(failure.key, None)


def _close(state: LakeState, success: LakeOutcome, applied: Applied) -> None:
    for key, scope in list(state.scopes.items()):
        if scope.family != success.family or not _builds(success, scope):
            continue
        remaining = set() if scope.label == success.label else set(scope.remaining) - success.partitions
        if remaining:
            scope.remaining = sorted(remaining)
        else:
            del state.scopes[key]
            applied.closed[key] = success.detail


def apply_outcomes(state: LakeState, outcomes: Iterable[LakeOutcome]) -> Applied:
    """Apply ``outcomes`` (oldest first) to ``state``'s open scopes; the incidents open afterwards
    are ``state.scopes``' keys (the caller hands them to the book, which decides what alerts)."""
    applied = Applied()
    for outcome in outcomes:
        (_close if outcome.ok else _open)(state, outcome, applied)
    return applied


def _still_open(key: str, summary: str) -> Incident:
    return Incident(key, None, summary)


def lake_alerts(state: LakeState, outcomes: Iterable[LakeOutcome], now: float) -> list[dict]:
    """Apply the outcomes to ``state`` (the sensor's cursor); the alerts of the incidents that opened and closed."""
    applied = apply_outcomes(state, outcomes)
    current = [_still_open(key, applied.summaries.get(key) or (state.book.open[key].summary if key in state.book.open else key))
               for key in state.scopes]
    opened, resolved = state.book.update(current, now, 0.0)
    alerts = [make_alert("incident", inc.summary, applied.failed.get(inc.key, ()), inc.key) for inc in opened]
    for key, inc in resolved:
        lines = [*applied.closed.get(key, ("the failure is no longer open",)), f"open for {now - inc.opened_at:.0f}s"]
        alerts.append(make_alert("recovery", f"resolved: {inc.summary}", lines, key))
    return alerts
