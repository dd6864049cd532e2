"""The readers behind ``lakebus metrics`` (:mod:`lakebus_dagster.cli.metrics`) and the gauges of the
Dagster instance's two sources.

* ``incidents``: the incidents the monitoring sensors keep open, each sensor's
  :class:`~lakebus_dagster.monitor.incidents.IncidentBook` in its cursor (``connector_status_sensor``:
  Connect, the sink, the bus, the slot; ``lake_incident_sensor``: DWS runs and checks, ODS freshness),
  read through the instance's public API, never written.
* ``dws``: per DWS asset the partitions the gap-fill would rebuild now, missing or failed within its
  lookback (:func:`lakebus_dagster.defs.lakehouse.automation.gaps`, over the same window).

The instance is ``DAGSTER_HOME``'s when that is set (the deployment's pods), else the local stack's
(``<state>/dagster_home``, as ``lakebus status``); an instance that does not exist is not created.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakebus_dagster.cli.metrics import Readers
    from lakebus_dagster.connect import ConnectorStatus
    from lakebus_dagster.monitor.stall import SinkProgress
    from lakebus_dagster.stack.local_settings import StackSettings

#: the sensors whose cursors hold an incident book: connector_status_sensor's is the book itself,
#: lake_incident_sensor's wraps it (``{"book": …}``)
INCIDENT_SENSORS = ("connector_status_sensor", "lake_incident_sensor")


def incident_kind(key: str) -> str:
    """An incident key's first part: ``connector`` (a connector, its tasks, the sink, the slot),
    ``connect`` (Connect unreachable / starting / failing), ``dws``, ``check``, ``fresh`` (the lake)."""
    return key.split(":", 1)[0]


def open_incidents(cursors: Mapping[str, str | None]) -> dict[tuple[str, str], int]:
    """(sensor, kind) -> the incidents open in that sensor's book. A part of another incident (the
    same episode of one connector, :attr:`~lakebus_dagster.monitor.incidents.OpenIncident.part_of`)
    is not counted; one clearing (gone, not yet for long enough) still is."""
    from lakebus_dagster.monitor.incidents import IncidentBook
    from lakebus_dagster.monitor.lake_incidents import LakeState

    counts: dict[tuple[str, str], int] = {}
    for sensor, cursor in cursors.items():
        book = LakeState.from_cursor(cursor).book if sensor == "lake_incident_sensor" else IncidentBook.from_cursor(cursor)
        for key, entry in book.open.items():
            if entry.part_of is None:
                counts[(sensor, incident_kind(key))] = counts.get((sensor, incident_kind(key)), 0) + 1
    return counts


def incident_families(counts: Mapping[tuple[str, str], int]) -> list[Any]:
    from prometheus_client.core import GaugeMetricFamily

    family = GaugeMetricFamily("lakebus_open_incidents", "incidents the monitoring sensors hold open (alerted, not yet "
                               "resolved), per sensor and kind", labels=["sensor", "kind"])
    for (sensor, kind), n in sorted(counts.items()):
        family.add_metric([sensor, kind], n)
    return [family]


def dws_families(missing: Mapping[str, int]) -> list[Any]:
    from prometheus_client.core import GaugeMetricFamily

    family = GaugeMetricFamily("lakebus_dws_missing_partitions", "DWS partitions missing or failed within the gap-fill's "
                               "lookback (what it rebuilds at its next tick)", labels=["asset"])
    for asset, n in sorted(missing.items()):
        family.add_metric([asset], n)
    return [family]


# -- the Dagster instance --------------------------------------------------------------------------
def instance_home(settings: StackSettings) -> Path:
    from lakebus_dagster.stack.dagster_ui import dagster_home

    return Path(os.environ["DAGSTER_HOME"]) if os.environ.get("DAGSTER_HOME") else dagster_home(settings)


class InstanceReads:
    """The two reads of one Dagster instance, opened at the first scrape that needs it and kept."""

    def __init__(self, home: Path, clock: Callable[[], float] = time.time) -> None:
        self.home, self.clock, self._instance = home, clock, None

    def instance(self) -> Any:
        if self._instance is None:
            if not ((self.home / "dagster.yaml").exists() or (self.home / "schedules").exists()):
                raise FileNotFoundError(f"no Dagster instance at {self.home} (DAGSTER_HOME)")  # opening one would create it
            from dagster import DagsterInstance

            self._instance = DagsterInstance.from_config(str(self.home))
        return self._instance

    def incidents(self) -> dict[tuple[str, str], int]:
        # public API only: every instigator's state, picked by the sensors' (unique) names
        states = {s.instigator_name: s for s in self.instance().all_instigator_state()}
        return open_incidents({name: getattr(states[name].instigator_data, "cursor", None)
                               for name in INCIDENT_SENSORS if name in states})

    def dws(self) -> dict[str, int]:
        from datetime import datetime, timezone

        from lakebus_dagster.defs.asset_keys import dws_key
        from lakebus_dagster.defs.lakehouse.automation import gap_window, gaps
        from lakebus_dagster.defs.lakehouse.partitions import PARTITIONS_BY_GRAIN
        from lakebus_dagster.lake.dws import DWS_TABLES

        now, out = datetime.fromtimestamp(self.clock(), timezone.utc), {}
        for spec in DWS_TABLES:
            key, partitions = dws_key(spec.name), PARTITIONS_BY_GRAIN[spec.grain]
            window = gap_window(partitions, now)
            out[key.to_user_string()] = len(gaps(window, self.instance().get_status_by_partition(key, window, partitions)))
        return out


# -- every reader ----------------------------------------------------------------------------------
def readers_for(settings: StackSettings) -> Readers:
    """The readers of ``lakebus status``, on these settings (one client per read: a scrape is rare),
    and the Dagster instance's."""
    from lakebus_dagster.cli.connectors import connect_client
    from lakebus_dagster.cli.metrics import Readers
    from lakebus_dagster.cli.status import _SettingsCatalog, bus_layout
    from lakebus_dagster.connect import ConnectorNotFound
    from lakebus_dagster.kafka import KafkaClients
    from lakebus_dagster.ledger.store import KafkaStateStore
    from lakebus_dagster.observe.sink_progress import sink_progress, sink_snapshot

    layout = bus_layout(settings)
    catalog = _SettingsCatalog(settings)
    kafka = KafkaClients(settings.kafka.client_config())  # one client config for every scrape's reads
    dagster = InstanceReads(instance_home(settings))

    def connector() -> ConnectorStatus | None:
        try:
            with connect_client(settings) as client:
                return client.status(layout.connector_name)
        except ConnectorNotFound:
            return None

    def progress() -> SinkProgress:
        with connect_client(settings) as client:
            return sink_progress(layout, client, kafka, catalog)

    def commits() -> dict[str, int | None]:
        opened = catalog.load()
        out: dict[str, int | None] = {}
        for table in layout.tables:
            snapshot = sink_snapshot(opened.load_table(table)) if opened.table_exists(table) else None
            out[table] = snapshot.timestamp_ms if snapshot is not None else None
        return out

    def verified() -> dict[int, int] | None:
        state = KafkaStateStore.reader(kafka.consumer, layout.bus_topic.name).load()
        return None if state is None else dict(state.verified_to)

    return Readers(layout.connector_name, layout.bus_topic.name, connector, progress, commits, verified,
                   dagster.incidents, dagster.dws)
