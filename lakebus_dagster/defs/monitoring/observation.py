"""What one status-sensor tick reads, turned into plain data (:class:`StatusObservation`) for the
decision core (:mod:`lakebus_dagster.monitor.status_tick`).

The reads, in order: the connectors' declared states (the state topic), the healing runs in flight
and the restart runs that ended (the Dagster run store), Connect's listing, the sink's progress
(Connect, Kafka, the Iceberg catalog; only while it is declared RUNNING), and change capture's
replication slot (PostgreSQL). A failed read is data too: the core decides whether it is an incident.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
from confluent_kafka import KafkaException

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.connect import ConnectError, ConnectorNotFound, ConnectorOverview
from lakebus_dagster.connect.workers import shown
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.monitoring.healing import connectors_being_healed, finished_restarts
from lakebus_dagster.defs.monitoring.slots import read_slot
from lakebus_dagster.defs.resources import ConnectResource, IcebergCatalogResource, KafkaResource
from lakebus_dagster.kafka import TopicMissing
from lakebus_dagster.monitor.incidents import IncidentBook
from lakebus_dagster.monitor.stall_rules import running_as_declared
from lakebus_dagster.monitor.status_tick import StatusObservation, sink_watched
from lakebus_dagster.observe.sink_progress import sink_progress
from lakebus_dagster.provision.target_state_store import TargetStateStoreError, declared_states


def _declared_states(bus: BusLayout, kafka: KafkaResource, extra: tuple[str, ...] = ()) -> tuple[dict[str, str], str | None]:
    """What each connector should be (the operator's pause/stop/resume, else the layout's default),
    and why the state topic could not be read, if it could not. ``extra``: change capture's connectors.

    An unreadable state topic is an incident of its own once it stays unreadable (the core's
    ``kafka_unreadable``) and the layout's default applies meanwhile (a parked connector may then also
    show as unexpected: both clear together).
    """
    try:
        return declared_states(kafka.clients(), bus, extra), None
    except TargetStateStoreError as exc:
        return {name: bus.connector_state.connect_state for name in (bus.connector_name, *extra)}, str(exc)


def _progress(bus: BusLayout, sink: ConnectorOverview | None, declared: dict[str, str], client, kafka: KafkaResource,
              iceberg: IcebergCatalogResource) -> dict[str, Any]:
    """The sink's progress (or why it could not be measured), only while it is declared RUNNING."""
    if not sink_watched(bus, declared, sink):
        return {}
    try:
        return {"progress": sink_progress(bus, client, kafka.clients(), iceberg)}
    except (KafkaException, TopicMissing, TimeoutError) as exc:
        return {"progress_problem": str(exc)}
    except ConnectorNotFound as exc:  # deleted since the listing: missing, not "Connect down"
        return {"progress_missing": exc}
    except ConnectError:
        if running_as_declared(bus, declared, sink):
            raise  # the sink runs and Connect fails it: Connect failing, for the whole tick
        return {}  # a sink not running (its own incident) is measured on a best-effort basis


def observe(context: dg.SensorEvaluationContext, now: float, bus: BusLayout, connect: ConnectResource, kafka: KafkaResource,
            iceberg: IcebergCatalogResource, capture: ChangeCaptureResource) -> tuple[StatusObservation, IncidentBook]:
    """One tick's reads (see the module docstring), and the previous tick's book: the cursor, read
    last because it names the restart runs to look up."""
    extra = capture.connector_names(context.log)
    declared, unreadable = _declared_states(bus, kafka, extra)
    seen: dict[str, Any] = {"now": now, "declared": declared, "connect_urls": tuple(shown(u) for u in connect.urls),
                            "declared_unreadable": unreadable,
                            # read once per tick: the incidents (STOPPED is expected) and the healing (no overlap) use it
                            "being_healed": frozenset(connectors_being_healed(context.instance, now)),
                            "slot": read_slot(capture)}
    try:
        with connect.client() as client:
            seen["overview"] = client.list_connectors(expand_status=True, expand_info=True)
            seen |= _progress(bus, seen["overview"].get(bus.connector_name), declared, client, kafka, iceberg)
    except ConnectError as exc:
        context.log.warning(f"reading Kafka Connect failed: {exc}")
        seen["connect_error"] = exc
    book, seen["finished_restarts"] = finished_restarts(context.instance, context.cursor)
    return StatusObservation(**seen), book
