"""Connector incidents and the book that keeps them across sensor ticks.

An incident is keyed by *what* is wrong (``connector:<name>:task:<id>:FAILED``), not by when it
was seen, so the same failure seen on ten ticks is one incident: it alerts when it opens, stays
silent while open, and sends one recovery notice when it clears. The book is plain JSON so it can
live in a sensor cursor and survive a daemon restart.

One connector has one incident at a time: a condition appearing while another incident of the
connector is open (or clearing) is a *part* of it — no alert; its recovery waits for every part.
(Iceberg 1.12 on a refused commit: the task FAILS, the restart brings it back, it stalls on the
same refusal — one episode for whoever is paged, not a failure "resolved" beside a new stall.)
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from lakebus_dagster.connect import ConnectError, ConnectorNotFound, ConnectorOverview, ConnectStarting, ConnectUnavailable
from lakebus_dagster.monitor.traces import failing_record, trace_headline

#: one key per cause of "the sensor could not read Connect": a different cause is a different
#: incident (its own alert and recovery notice), the same cause seen again is not
UNREACHABLE_KEY = "connect:unreachable"
STARTING_KEY = "connect:starting"
FAILING_KEY = "connect:failing"
#: what creates (or re-creates) the declared connectors
PROVISION_COMMAND = "lakebus launch provision_lakebus"

@dataclass(frozen=True)
class Incident:
    key: str
    connector: str | None
    summary: str
    #: a failed task (or connector) that a restart may fix
    restartable: bool = False
    #: the record the failed task names in its trace (``str(RecordRef)``), if any
    record: str | None = None
    #: what a restart restarts: "failed" instances only (a failed task), or "all" of them (a RUNNING
    #: sink that lost its commit coordinator: nothing is FAILED, every task must start over)
    restart_scope: str = "failed"


@dataclass
class OpenIncident:
    summary: str
    connector: str | None
    opened_at: float
    restartable: bool = False
    restart_attempts: int = 0
    last_restart_at: float | None = None
    escalated: bool = False
    #: when the condition was last seen gone; None while it is present
    cleared_at: float | None = None
    #: the record the task named when the last restart was requested (a restart that fails again
    #: on the same record means a poison record: quarantine instead of restarting forever)
    restarted_on_record: str | None = None
    #: records already sent to quarantine for this incident (each at most once)
    quarantined: list[str] = field(default_factory=list)
    #: the newest record named by the failing task's trace
    record: str | None = None
    #: see :attr:`Incident.restart_scope`
    restart_scope: str = "failed"
    #: the key of the connector's incident this one is a part of (opened while that one was open):
    #: it alerts nothing of its own, and that incident resolves only after it
    part_of: str | None = None

    @property
    def active(self) -> bool:
        return self.cleared_at is None


@dataclass
class IncidentBook:
    open: dict[str, OpenIncident] = field(default_factory=dict)
    #: task key -> first time it was seen UNASSIGNED (incident only after a threshold)
    unassigned_since: dict[str, float] = field(default_factory=dict)
    #: connector -> first time it was seen missing (incident only after a threshold)
    missing_since: dict[str, float] = field(default_factory=dict)
    #: alerts that could not be delivered yet (retried next tick, never dropped)
    pending_alerts: list[dict] = field(default_factory=list)
    #: connector -> sink progress seen by the stall watch (see :mod:`lakebus_dagster.monitor.stall`)
    progress: dict[str, dict] = field(default_factory=dict)
    #: incident key -> first time a read from Kafka behind it failed (incident only after a threshold)
    kafka_unreadable_since: dict[str, float] = field(default_factory=dict)
    #: connector -> work owed past the watermark, seen by the lost-coordinator rule
    #: (:func:`lakebus_dagster.monitor.stall.watch_uncommitted`)
    uncommitted: dict[str, dict] = field(default_factory=dict)
    #: connector -> its task placement and whether it moved since the last ledger run
    #: (:func:`lakebus_dagster.monitor.moves.watch_placement`)
    moves: dict[str, dict] = field(default_factory=dict)
    #: connector -> since when records wait with no new commit (:mod:`lakebus_dagster.monitor.starved`)
    starved: dict[str, dict] = field(default_factory=dict)
    #: replication slot -> what the slot watch tracks (:mod:`lakebus_dagster.monitor.slot_watch`)
    slots: dict[str, dict] = field(default_factory=dict)
    #: connector -> epoch ms before which overlapping commit cycles are not counted again (its last
    #: restart for two coordinators: :func:`lakebus_dagster.monitor.stall_rules.dual_coordinator_incident`)
    dual_counted_from_ms: dict[str, int] = field(default_factory=dict)
    #: connector -> since when its coordinators' group has had two or more members (the dual rule)
    dual_members_since: dict[str, float] = field(default_factory=dict)
    #: connector -> the quiet bus whose answers a finished cycle must read before nothing is owed
    #: (:func:`lakebus_dagster.monitor.stall.watch_drained`)
    drained: dict[str, dict] = field(default_factory=dict)

    def to_cursor(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_cursor(cls, cursor: str | None) -> IncidentBook:
        """The book a cursor holds; a field an older cursor lacks starts empty."""
        data = json.loads(cursor) if cursor else {}
        plain = {name: type(getattr(cls(), name))(data[name]) for name in cls.__dataclass_fields__ if name in data and name != "open"}
        return cls(open={k: OpenIncident(**v) for k, v in data.get("open", {}).items()}, **plain)

    def update(
        self, current: Iterable[Incident], now: float, stable_s: float
    ) -> tuple[list[Incident], list[tuple[str, OpenIncident]]]:
        """Record this tick's incidents; return (newly opened, resolved).

        An incident resolves only after its condition has been absent for ``stable_s``: a task that
        a restart brings back for a few seconds and that then fails again on the same record is
        the *same* incident (no second alert, no premature recovery notice, and its restart
        count keeps growing so the backoff and the attempt cap still apply).

        An open incident seen again as restartable becomes restartable (keeping its restart count):
        a stall first seen by the coordinator watch and then found to be a lost coordinator is one
        incident that a restart may now fix.

        A new condition of a connector with an open incident is a part of it (:attr:`OpenIncident.part_of`):
        not in the opened list, in the resolved one (the ledger after a stall; no recovery notice).
        """
        current = {i.key: i for i in current}
        opened = []
        for key, inc in current.items():
            entry = self.open.get(key)
            if entry is None:
                parent = self._open_incident_of(inc.connector)
                self.open[key] = OpenIncident(inc.summary, inc.connector, now, inc.restartable, record=inc.record,
                                              restart_scope=inc.restart_scope, part_of=parent)
                if parent is None:
                    opened.append(inc)
            else:  # keep the newest summary (e.g. a changed trace) without re-alerting
                entry.summary, entry.cleared_at, entry.record = inc.summary, None, inc.record
                if inc.restartable and not entry.restartable:
                    entry.restartable, entry.restart_scope = True, inc.restart_scope
        resolved = []
        # parts first: an incident whose last part resolves this tick may resolve with it
        for key, entry in sorted(self.open.items(), key=lambda item: item[1].part_of is None):
            if key in current:
                continue
            if entry.cleared_at is None:
                entry.cleared_at = now
            has_parts = any(other.part_of == key for other in self.open.values())
            if now - entry.cleared_at >= stable_s and not has_parts:
                resolved.append((key, self.open.pop(key)))
        return opened, resolved

    def _open_incident_of(self, connector: str | None) -> str | None:
        """The key of ``connector``'s open incident (the first one opened), if it has one."""
        if connector is None:
            return None
        own = [(entry.opened_at, key) for key, entry in self.open.items() if entry.connector == connector and entry.part_of is None]
        return min(own)[1] if own else None


def missing_incident(name: str, book: IncidentBook, now: float, threshold_s: float,
                     connect_urls: Sequence[str] = ()) -> Incident | None:
    """A declared connector Connect does not have — absent from its list, or answered with 404
    while Connect serves — once it has been missing for ``threshold_s``.

    A grace period: right after the first start nothing is provisioned yet (make demo starts the
    daemon, then provisions), which is not an incident. Both ways of seeing it share one key, so a
    connector deleted by hand is one incident however the ticks happen to notice it.
    """
    since = book.missing_since.setdefault(name, now)
    if now - since < threshold_s:
        return None
    where = f" on Kafka Connect ({', '.join(connect_urls)})" if connect_urls else ""
    return Incident(f"connector:{name}:missing", name,
                    f"connector {name} is declared but not deployed{where} for {now - since:.0f}s: run `{PROVISION_COMMAND}`")


def connect_incident(exc: ConnectError, connect_urls: Sequence[str], book: IncidentBook, now: float,
                     missing_threshold_s: float) -> Incident | None:
    """The incident behind a Connect call that failed, named by its cause: no worker answers
    (unreachable), a worker answers before its REST API is up (starting), the connector is gone
    (missing; ``None`` within its grace period), or Connect answers with an error (failing)."""
    if isinstance(exc, ConnectorNotFound) and exc.connector:
        return missing_incident(exc.connector, book, now, missing_threshold_s, connect_urls)
    urls = ", ".join(connect_urls)
    if isinstance(exc, ConnectUnavailable):
        return Incident(UNREACHABLE_KEY, None, f"Kafka Connect is unreachable: none of its workers answers ({urls}); records "
                        "wait in Kafka. Start the workers (local stack: `lakebus stack status`, `lakebus stack restart "
                        f"connect`) or point LAKEBUS_CONNECT_URL at them. Last errors: {exc}")
    if isinstance(exc, ConnectStarting):
        return Incident(STARTING_KEY, None, f"Kafka Connect at {exc.url} is still starting: it answers {exc.method} "
                        f"{exc.path} with HTTP {exc.status} before its REST API is up (workers: {urls}). It clears by itself "
                        "within a minute or two; if not, read the worker's log (`lakebus stack logs connect -n 200`) and "
                        "check that LAKEBUS_CONNECT_URL names Kafka Connect REST URLs")
    return Incident(FAILING_KEY, None, f"Kafka Connect ({urls}) answers with an error: {exc}; read the workers' logs "
                    "(`lakebus stack logs connect -n 200`), then `lakebus launch connector_status_report`")


def detect_incidents(
    overview: Mapping[str, ConnectorOverview],
    declared: Mapping[str, str],
    book: IncidentBook,
    now: float,
    unassigned_threshold_s: float,
    missing_threshold_s: float = 0.0,
    connect_urls: Sequence[str] = (),
    being_healed: Collection[str] = (),
) -> list[Incident]:
    """Incidents in one ``GET /connectors?expand=status&expand=info`` answer.

    ``declared`` maps each connector lakebus manages to its expected state (RUNNING, or PAUSED /
    STOPPED when an operator parked it on purpose through a maintenance job). ``connect_urls``
    (the workers asked) only go into the texts. ``being_healed``: connectors a healing run of the
    sensor is working on right now — the quarantine stops the connector to move its offsets, so its
    STOPPED state is that run's, not a new incident (seen alerting in CI when a tick fell inside it).
    """
    incidents: list[Incident] = []
    seen_unassigned: set[str] = set()
    for name, expected in sorted(declared.items()):
        entry = overview.get(name)
        if entry is None or entry.status is None:
            if (missing := missing_incident(name, book, now, missing_threshold_s, connect_urls)) is not None:
                incidents.append(missing)
            continue
        book.missing_since.pop(name, None)
        status = entry.status
        if status.state == "FAILED":
            incidents.append(Incident(f"connector:{name}:FAILED", name, f"connector {name} FAILED: {trace_headline(status.trace)}", True))
        elif status.state not in {expected, "RESTARTING", "UNASSIGNED"} and name not in being_healed:
            incidents.append(Incident(f"connector:{name}:state", name, f"connector {name} is {status.state}, expected {expected}"))
        for task in status.tasks:
            key = f"connector:{name}:task:{task.id}"
            if task.state == "FAILED":
                record = failing_record(task.trace)
                incidents.append(Incident(f"{key}:FAILED", name, f"{name} task {task.id} FAILED on {task.worker_id}: {trace_headline(task.trace)}",
                                          True, str(record) if record else None))
            elif task.state == "UNASSIGNED":
                seen_unassigned.add(key)
                since = book.unassigned_since.setdefault(key, now)
                if now - since >= unassigned_threshold_s:
                    incidents.append(Incident(f"{key}:UNASSIGNED", name, f"{name} task {task.id} UNASSIGNED for {now - since:.0f}s"))
    for key in list(book.unassigned_since):
        if key not in seen_unassigned:
            del book.unassigned_since[key]
    return incidents
