"""connector_status_sensor: cursor-based, alert once per incident, never crash a tick (its DLQ
sibling, dlq_sensor: :mod:`.dlq_sensor`).

A tick is observe -> decide -> act: :func:`~.observation.observe` turns the reads into plain data,
the core's :func:`~lakebus_dagster.monitor.status_tick.decide` returns the new incident book (the
cursor), the alerts it owes and the healing intents, and :func:`_act` turns intents into run
requests and delivers the alerts. The sensor names every job it may request in its decorator
(Dagster rejects a whole tick that requests an untargeted job), and every alert it delivers is also
recorded as an observation of the ``lakebus/alerts`` asset (:mod:`lakebus_dagster.defs.alerts`), so
the UI shows what was sent and when, not only the alert sink.
"""

import dagster as dg

from lakebus_dagster.defs.alerts import AlertResource, alert_observations, deliver_pending
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.clock import ClockResource
from lakebus_dagster.defs.monitoring.constants import STATUS_SENSOR_INTERVAL_S
from lakebus_dagster.defs.monitoring.healing import LEDGER_JOB, QUARANTINE_JOB, RESTART_JOB, run_request
from lakebus_dagster.defs.monitoring.observation import observe
from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource
from lakebus_dagster.defs.monitoring.slots import slot_observation
from lakebus_dagster.defs.resources import BusLayoutResource, ConnectResource, IcebergCatalogResource, KafkaResource
from lakebus_dagster.monitor.incidents import IncidentBook
from lakebus_dagster.monitor.status_tick import StatusDecision, StatusObservation, after_delivery, decide


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
    bus = layout.layout()
    observed, book = observe(context, clock.now(), bus, connect, kafka, iceberg, capture)
    decision = decide(observed, book, monitoring_policy.status_policy(), bus)
    return _act(context, observed, decision, alerts)


def _act(context: dg.SensorEvaluationContext, observed: StatusObservation, decision: StatusDecision,
         alerts: AlertResource) -> dg.SensorResult:
    """Log what the core said, deliver the alerts the book owes (kept pending when the sink refuses
    them), and return the intents as run requests with the new cursor."""
    for line in decision.warnings:
        context.log.warning(line)
    for line in decision.notes:
        context.log.info(line)
    delivered, still_pending = deliver_pending(decision.book.pending_alerts, alerts, context.log)
    return _status_tick_result(after_delivery(decision.book, still_pending), [run_request(i) for i in decision.intents], delivered,
                               slot_observation(decision.slot_seen, observed.slot))


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
