"""connector_status_sensor: cursor-based, alert once per incident, never crash a tick (its DLQ
sibling, dlq_sensor: :mod:`.dlq_sensor`).

Both sensors name every job they may request in their decorator (Dagster rejects a whole tick that
requests an untargeted job), and every alert they deliver is also recorded as an observation of
the ``lakebus/alerts`` asset (:mod:`lakebus_dagster.defs.alerts`), so the UI shows what was sent and
when, not only the alert sink.
"""

from dataclasses import dataclass
from typing import Any

import dagster as dg
from confluent_kafka import KafkaException

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.connect import ConnectClient, ConnectError, ConnectorNotFound, ConnectorOverview
from lakebus_dagster.defs.alerts import AlertResource, alert_observations, deliver_pending, make_alert
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.clock import ClockResource
from lakebus_dagster.defs.monitoring.constants import STATUS_SENSOR_INTERVAL_S
from lakebus_dagster.defs.monitoring.healing import (LEDGER_JOB, QUARANTINE_JOB, RESTART_JOB, connectors_being_healed, heal,
                                                    ledger_after_move, ledger_after_stall)
from lakebus_dagster.defs.monitoring.slots import watch_slot
from lakebus_dagster.monitor.stall_rules import (dual_coordinator_incident, dual_members_window_seconds, owed_after_drain,
                                                   running_as_declared,
                                                   stall_incident, starved_incident, uncommitted_incident)
from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource
from lakebus_dagster.defs.resources import BusLayoutResource, ConnectResource, IcebergCatalogResource, KafkaResource
from lakebus_dagster.kafka import TopicMissing
from lakebus_dagster.monitor.incidents import Incident, IncidentBook, connect_incident, detect_incidents
from lakebus_dagster.observe.sink_progress import sink_progress
from lakebus_dagster.monitor.stall import stall_after_seconds, uncommitted_after_seconds
from lakebus_dagster.monitor.starved import STARVED_STALL_WINDOWS
from lakebus_dagster.provision.target_state_store import TargetStateStoreError, declared_states

def _declared_states(bus: BusLayout, kafka: KafkaResource, extra: tuple[str, ...] = ()) -> tuple[dict[str, str], str | None]:
    """What each connector should be (the operator's pause/stop/resume, else the layout's default),
    and why the state topic could not be read, if it could not. ``extra``: change capture's connectors.

    An unreadable state topic is an incident of its own (once it stays unreadable, see
    :func:`_kafka_unreadable`) and the layout's default applies meanwhile (a parked connector may
    then also show as unexpected: both clear together).
    """
    try:
        return declared_states(kafka.clients(), bus, extra), None
    except TargetStateStoreError as exc:
        return {name: bus.connector_state.connect_state for name in (bus.connector_name, *extra)}, str(exc)


@dataclass(frozen=True)
class _Tick:
    """What every rule of one status-sensor tick reads: its clock, its incident book (the cursor),
    the monitoring policy and the tick's log."""

    now: float
    book: IncidentBook
    policy: MonitoringPolicyResource
    log: Any


@dataclass(frozen=True)
class _SinkReaders:
    """Where the sink's progress is read from during one tick: Connect (an open client, and the
    configured worker URLs an incident names), the bus and the catalog."""

    client: ConnectClient
    connect_urls: tuple[str, ...]
    kafka: KafkaResource
    iceberg: IcebergCatalogResource


def _kafka_unreadable(tick: _Tick, key: str, connector: str | None, what: str, problem: str | None) -> list[Incident]:
    """A failed read from Kafka is an incident only once it has failed for the policy's
    ``kafka_unreadable_threshold_s``.

    Seen on the cluster profile: a request queued for a broker that was just killed fails
    (``_DESTROY_BROKER``) until another replica leads, a few seconds later — a blip, not an incident.
    """
    if problem is None:
        tick.book.kafka_unreadable_since.pop(key, None)
        return []
    now = tick.now
    since = tick.book.kafka_unreadable_since.setdefault(key, now)
    tick.log.warning(f"{what} ({now - since:.0f}s): {problem}")
    if now - since < tick.policy.kafka_unreadable_threshold_s:
        return []
    return [Incident(key, connector, f"{what} for {now - since:.0f}s: {problem}")]


@dg.sensor(
    name="connector_status_sensor",
    minimum_interval_seconds=STATUS_SENSOR_INTERVAL_S,
    default_status=dg.DefaultSensorStatus.RUNNING,
    jobs=[RESTART_JOB, QUARANTINE_JOB, LEDGER_JOB],
    description="Watches the sink (and change capture's source, sink and replication slot, with LAKEBUS_POSTGRES=on) every "
    "10 s: one alert per incident (failed task, stalled or lost commits, connector missing, Connect unreachable or still "
    "starting, a slot inactive or lost) and one recovery notice; restarts failed tasks with backoff, moves a record that keeps failing to the DLQ, and runs the "
    "offset ledger as soon as a commit-coordinator stall resolves (records it lost are re-queued right after).",
)
def connector_status_sensor(
    context: dg.SensorEvaluationContext,
    connect: ConnectResource,
    kafka: KafkaResource,
    iceberg: IcebergCatalogResource,
    layout: BusLayoutResource,
    alerts: AlertResource,
    monitoring_policy: MonitoringPolicyResource,
    capture: ChangeCaptureResource,
    clock: ClockResource,
):
    book = IncidentBook.from_cursor(context.cursor)
    now = clock.now()
    tick = _Tick(now=now, book=book, policy=monitoring_policy, log=context.log)
    bus = layout.layout()
    declared, unreadable = _declared_states(bus, kafka, capture.connector_names(context.log))
    # read once per tick: the incidents (STOPPED is expected) and the healing (no overlap) both use it
    being_healed = connectors_being_healed(context.instance, now)
    overview = None
    try:
        with connect.client() as client:
            overview = client.list_connectors(expand_status=True, expand_info=True)
            incidents = detect_incidents(overview, declared, book, now, monitoring_policy.unassigned_threshold_s,
                                         monitoring_policy.missing_threshold_s, connect.urls,
                                         being_healed=being_healed)
            incidents += _kafka_unreadable(tick, f"declared-state:{bus.state_topic.name}:unreadable", None,
                                           f"cannot read the declared states on {bus.state_topic.name}", unreadable)
            incidents += _progress_incidents(tick, bus, overview.get(bus.connector_name), declared,
                                             _SinkReaders(client, connect.urls, kafka, iceberg))
    except ConnectError as exc:
        # Connect failing is an incident like any other (alerted once), not a crashed tick; the
        # error's type names the cause (unreachable, starting, connector missing, answering errors).
        context.log.warning(f"reading Kafka Connect failed: {exc}")
        incident = connect_incident(exc, connect.urls, book, now, monitoring_policy.missing_threshold_s)
        incidents = [incident] if incident is not None else []
    slot_found, slot_observed = watch_slot(capture, book, now, monitoring_policy.slot_inactive_threshold_s,
                                           monitoring_policy.kafka_unreadable_threshold_s, context.log)
    incidents += slot_found

    opened, cleared = book.update(incidents, now, monitoring_policy.recovery_stable_s)
    for inc in opened:
        book.pending_alerts.append(make_alert("incident", inc.summary, f"incident {inc.key}", inc.key))
    for key, inc in cleared:
        if inc.part_of is None:  # a part of an incident resolves silently; the incident's own recovery says it all
            book.pending_alerts.append(make_alert("recovery", f"resolved: {inc.summary}", f"open for {now - inc.opened_at:.0f}s", key))

    after_stall = ledger_after_stall(bus, cleared, monitoring_policy)
    after_move = ledger_after_move(book, bus, overview, after_stall, monitoring_policy, now)
    run_requests = heal(book, context, monitoring_policy, now, being_healed) + after_stall + after_move
    delivered, book.pending_alerts = deliver_pending(book.pending_alerts, alerts, context.log)
    return _status_tick_result(book, run_requests, delivered, slot_observed)


def _progress_incidents(tick: _Tick, bus: BusLayout, sink: ConnectorOverview | None, declared: dict[str, str],
                        readers: _SinkReaders) -> list[Incident]:
    """The sink's progress while it is declared RUNNING: starved (nothing committed for minutes, whatever
    its tasks do), and, while every task runs, stalled or lost (uncommitted) commits; or progress
    unmeasurable for too long — a sink can be RUNNING in Connect's eyes and write nothing. A rule's
    records are forgotten when it no longer judges, so a resumed sink starts its clocks afresh."""
    book, now, policy = tick.book, tick.now, tick.policy
    progress_key = f"connector:{bus.connector_name}:progress-unknown"
    watched = sink is not None and sink.status is not None and declared.get(bus.connector_name) == "RUNNING"
    running = watched and running_as_declared(bus, declared, sink)
    if not running:
        book.progress.pop(bus.connector_name, None)
        book.uncommitted.pop(bus.connector_name, None)
    if not watched:
        book.starved.pop(bus.connector_name, None)
        book.drained.pop(bus.connector_name, None)
        book.kafka_unreadable_since.pop(progress_key, None)
        return []
    incidents: list[Incident] = []
    stall_after_s = stall_after_seconds(bus.tuning.commit_interval_ms, bus.tuning.commit_timeout_ms,
                                        policy.stall_commit_intervals)
    seen, problem = None, None
    try:
        seen = sink_progress(bus, readers.client, readers.kafka.clients(), readers.iceberg)
    except (KafkaException, TopicMissing, TimeoutError) as exc:
        problem = str(exc)
    except ConnectorNotFound as exc:  # deleted since the listing: missing, not "Connect down"
        if (missing := connect_incident(exc, readers.connect_urls, book, now, policy.missing_threshold_s)) is not None:
            incidents.append(missing)
    except ConnectError:
        if running:  # a sink not running (its own incident) is measured on a best-effort basis
            raise
    incidents += _kafka_unreadable(tick, progress_key, bus.connector_name,
                                   f"cannot measure {bus.connector_name}'s progress on {bus.bus_topic.name}", problem)
    if seen is None:
        return incidents
    seen = owed_after_drain(bus, book, seen)
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


def _status_tick_result(book: IncidentBook, run_requests: list[dg.RunRequest], delivered: list[dict],
                        observed: list[dg.AssetObservation]) -> dg.SensorResult:
    """The tick's runs, the alerts it delivered and the slot it observed as observations, and the new
    cursor; without a run, a skip reason saying what happened (the tick history shows it)."""
    cursor, events = book.to_cursor(), [*alert_observations(delivered), *observed]
    if run_requests:
        return dg.SensorResult(run_requests=run_requests, asset_events=events, cursor=cursor)
    open_now = ", ".join(sorted(book.open)) or "none"
    told = "; ".join(f"{a['kind']}: {a['title'][:120]}" for a in delivered)
    reason = f"sent {len(delivered)} alert(s) ({told}); " if delivered else "no change; "
    return dg.SensorResult(skip_reason=dg.SkipReason(f"{reason}open incidents: {open_now}"), asset_events=events, cursor=cursor)
