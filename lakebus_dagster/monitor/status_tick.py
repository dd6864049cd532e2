"""The status sensor's decision core: one tick's observation, the previous incident book, the policy
and the bus in; the new book (with the alerts it owes), the healing intents and what to log out.

Why a pure function: every rule of the sensor (a failed or unassigned task, a missing connector,
Connect down, a stalled, starved or coordinator-less sink, two coordinators, a move, the replication
slot, restarts with backoff, quarantine, the ledger after a stall or a move) judges durations and
history. Given plain data, a test replays a recorded sequence of observations through it, tick by
tick, with no service and no patched module; the sensor keeps only the reads
(:mod:`lakebus_dagster.defs.monitoring.observation`) and the acts (run requests, alert delivery).
The previous book is never changed: :func:`decide` works on a copy.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.connect import ConnectError, ConnectorNotFound, ConnectorOverview
from lakebus_dagster.monitor.alert_text import make_alert
from lakebus_dagster.monitor.healing_rules import Intent, heal, ledger_after_move, ledger_after_stall
from lakebus_dagster.monitor.incidents import Incident, IncidentBook, connect_incident, detect_incidents
from lakebus_dagster.monitor.policy import StatusPolicy
from lakebus_dagster.monitor.slot_watch import observe_now, slot_incidents, track, unreadable_incident
from lakebus_dagster.monitor.stall import SinkProgress, stall_after_seconds, uncommitted_after_seconds
from lakebus_dagster.monitor.stall_rules import (dual_coordinator_incident, dual_members_window_seconds, owed_after_drain,
                                                 running_as_declared, stall_incident, starved_incident, uncommitted_incident)
from lakebus_dagster.monitor.starved import STARVED_STALL_WINDOWS


@dataclass(frozen=True)
class SlotObservation:
    """Change capture's replication slot as read this tick: ``reading`` (None: no such slot) or the
    read's ``problem``."""

    slot: str
    source: str
    reading: Mapping | None = None
    problem: str | None = None


@dataclass(frozen=True)
class StatusObservation:
    """What one tick read, as plain data.

    ``connect_urls`` are the workers asked, as messages show them (credentials removed). ``overview`` is Connect's ``GET /connectors?expand=status&expand=info`` (None: Connect could not
    be read); ``connect_error`` the Connect call that failed (the listing, or the sink's progress
    while it runs). ``progress`` is the sink's, read only while it is declared RUNNING; else
    ``progress_problem`` (Kafka, a topic or the catalog did not answer) or ``progress_missing`` (the
    sink was deleted since the listing). ``finished_restarts`` names each restart run that has ended
    (:func:`~lakebus_dagster.monitor.healing_rules.restart_attempt`)."""

    now: float
    declared: Mapping[str, str]
    connect_urls: tuple[str, ...] = ()
    declared_unreadable: str | None = None
    being_healed: frozenset[str] = frozenset()
    overview: Mapping[str, ConnectorOverview] | None = None
    connect_error: ConnectError | None = None
    progress: SinkProgress | None = None
    progress_problem: str | None = None
    progress_missing: ConnectorNotFound | None = None
    finished_restarts: frozenset[str] = frozenset()
    slot: SlotObservation | None = None


@dataclass
class StatusDecision:
    """The tick's outcome: the new book (its ``pending_alerts`` hold what to deliver), the healing
    intents, the slot reading worth recording (None: nothing this tick), and what to log."""

    book: IncidentBook
    intents: list[Intent] = field(default_factory=list)
    slot_seen: dict | None = None
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def decide(obs: StatusObservation, previous: IncidentBook, policy: StatusPolicy, bus: BusLayout) -> StatusDecision:
    """Judge one tick (see the module docstring)."""
    decision = StatusDecision(book=copy.deepcopy(previous))
    book, now = decision.book, obs.now
    if obs.connect_error is None and obs.overview is not None:
        incidents = detect_incidents(obs.overview, obs.declared, book, now, policy.unassigned_threshold_s,
                                     policy.missing_threshold_s, obs.connect_urls, being_healed=obs.being_healed)
        incidents += kafka_unreadable(decision, policy, f"declared-state:{bus.state_topic.name}:unreadable", None,
                                      f"cannot read the declared states on {bus.state_topic.name}", obs.declared_unreadable, now)
        incidents += progress_incidents(decision, policy, bus, obs)
    else:
        # Connect failing is an incident like any other (alerted once), named by its cause
        found = connect_incident(obs.connect_error, obs.connect_urls, book, now, policy.missing_threshold_s) \
            if obs.connect_error is not None else None
        incidents = [found] if found is not None else []
    incidents += _slot_incidents(decision, policy, obs.slot, now)

    opened, cleared = book.update(incidents, now, policy.recovery_stable_s)
    for inc in opened:
        book.pending_alerts.append(make_alert("incident", inc.summary, f"incident {inc.key}", inc.key))
    for key, inc in cleared:
        if inc.part_of is None:  # a part of an incident resolves silently; the incident's own recovery says it all
            book.pending_alerts.append(make_alert("recovery", f"resolved: {inc.summary}", f"open for {now - inc.opened_at:.0f}s", key))

    after_stall = ledger_after_stall(bus, cleared, policy)
    after_move = ledger_after_move(book, bus, obs.overview, after_stall, policy, now)
    healing, notes = heal(book, policy, now, obs.being_healed, obs.finished_restarts)
    decision.intents = [*healing, *after_stall, *after_move]
    decision.notes += notes
    return decision


def after_delivery(book: IncidentBook, still_pending: list[dict]) -> IncidentBook:
    """The book once its alerts were delivered: the ones the sink refused stay pending (retried next
    tick, never dropped)."""
    return replace(book, pending_alerts=list(still_pending))


def kafka_unreadable(decision: StatusDecision, policy: StatusPolicy, key: str, connector: str | None, what: str,
                     problem: str | None, now: float) -> list[Incident]:
    """A failed read from Kafka is an incident only once it has failed for the policy's
    ``kafka_unreadable_threshold_s``.

    Seen on the cluster profile: a request queued for a broker that was just killed fails
    (``_DESTROY_BROKER``) until another replica leads, a few seconds later — a blip, not an incident.
    """
    book = decision.book
    if problem is None:
        book.kafka_unreadable_since.pop(key, None)
        return []
    since = book.kafka_unreadable_since.setdefault(key, now)
    decision.warnings.append(f"{what} ({now - since:.0f}s): {problem}")
    if now - since < policy.kafka_unreadable_threshold_s:
        return []
    return [Incident(key, connector, f"{what} for {now - since:.0f}s: {problem}")]


def sink_watched(bus: BusLayout, declared: Mapping[str, str], sink: ConnectorOverview | None) -> bool:
    """Is the sink's progress measured this tick? While it exists and is declared RUNNING."""
    return sink is not None and sink.status is not None and declared.get(bus.connector_name) == "RUNNING"


def progress_incidents(decision: StatusDecision, policy: StatusPolicy, bus: BusLayout, obs: StatusObservation) -> list[Incident]:
    """The sink's progress while it is declared RUNNING: starved (nothing committed for minutes, whatever
    its tasks do), and, while every task runs, stalled or lost (uncommitted) commits; or progress
    unmeasurable for too long — a sink can be RUNNING in Connect's eyes and write nothing. A rule's
    records are forgotten when it no longer judges, so a resumed sink starts its clocks afresh."""
    book, now, name = decision.book, obs.now, bus.connector_name
    sink = obs.overview.get(name) if obs.overview is not None else None
    progress_key = f"connector:{name}:progress-unknown"
    watched = sink_watched(bus, obs.declared, sink)
    running = watched and running_as_declared(bus, dict(obs.declared), sink)
    if not running:
        book.progress.pop(name, None)
        book.uncommitted.pop(name, None)
    if not watched:
        for states in (book.starved, book.drained):
            states.pop(name, None)
        book.kafka_unreadable_since.pop(progress_key, None)
        return []
    incidents: list[Incident] = []
    if obs.progress_missing is not None:  # deleted since the listing: missing, not "Connect down"
        if (missing := connect_incident(obs.progress_missing, obs.connect_urls, book, now, policy.missing_threshold_s)) is not None:
            incidents.append(missing)
    incidents += kafka_unreadable(decision, policy, progress_key, name,
                                  f"cannot measure {name}'s progress on {bus.bus_topic.name}", obs.progress_problem, now)
    if obs.progress is None:
        return incidents
    return incidents + _judge_progress(book, policy, bus, sink, owed_after_drain(bus, book, obs.progress), now, running)


def _judge_progress(book: IncidentBook, policy: StatusPolicy, bus: BusLayout, sink: ConnectorOverview, seen: SinkProgress,
                    now: float, running: bool) -> list[Incident]:
    incidents: list[Incident] = []
    stall_after_s = stall_after_seconds(bus.tuning.commit_interval_ms, bus.tuning.commit_timeout_ms,
                                        policy.stall_commit_intervals)
    tasks = ", ".join(sorted(f"{t.id} {t.state} on {t.worker_id}" for t in sink.status.tasks)) or "none"
    if (starved := starved_incident(bus, book, seen, now, STARVED_STALL_WINDOWS * stall_after_s, tasks)) is not None:
        incidents.append(starved)  # first: a stall rule's (restartable) incident of the same key wins
    if not running:
        return incidents
    # where Connect placed the tasks, and who is in the tasks' and the coordinators' consumer groups: a
    # dead coordinator leaves the latter ~10 s after the kill, the survivor's task 0 is elected when
    # the former settles, up to a consumer session after Connect placed it
    assignment = ",".join(sorted(f"{t.id}@{t.worker_id}" for t in sink.status.tasks)) + f"|{seen.sink_members or ''}"
    if (stalled := stall_incident(bus, book, seen, now, stall_after_s, assignment)) is not None:
        incidents.append(stalled)
    uncommitted_after_s = uncommitted_after_seconds(bus.tuning.commit_interval_ms, policy.uncommitted_commit_intervals)
    if (lost := uncommitted_incident(bus, book, seen, now, uncommitted_after_s, stall_after_s, assignment)) is not None:
        incidents.append(lost)
    dual_window_s = 2 * (bus.tuning.commit_interval_ms + bus.tuning.commit_timeout_ms) / 1000
    members_window_s = dual_members_window_seconds(bus.tuning.commit_interval_ms, bus.tuning.control_session_timeout_ms)
    if policy.heal_dual_coordinators and (dual := dual_coordinator_incident(bus, book, seen, now, dual_window_s,
                                                                            members_window_s)) is not None:
        incidents.append(dual)
    return incidents


def _slot_incidents(decision: StatusDecision, policy: StatusPolicy, slot: SlotObservation | None, now: float) -> list[Incident]:
    """The replication slot's incidents (none when capture is off), and whether to record its reading."""
    if slot is None:
        return []
    state = decision.book.slots.setdefault(slot.slot, {})
    if slot.problem is not None:
        decision.warnings.append(f"replication slot {slot.slot}: {slot.problem}")
        found = unreadable_incident(state, slot.source, slot.slot, slot.problem, now, policy.kafka_unreadable_threshold_s)
        return [found] if found else []
    seen = track(state, slot.reading, now)
    if seen and observe_now(state, seen, now):
        decision.slot_seen = seen
    return slot_incidents(slot.source, seen, now, policy.slot_inactive_threshold_s)
