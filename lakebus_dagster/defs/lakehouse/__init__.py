"""Lakehouse: the ODS tables the sink writes (observed), the DWS tables Spark builds from them
(hourly / daily partitions, MERGE per partition), their checks, schedules and Iceberg maintenance.

Everything is generated from two declarations: the events of the event SDK's registry (one ODS
source + freshness check each) and the DWS specs (one asset with its three checks in the same step,
a place in its grain's job and schedule each). :func:`build_lakehouse` takes both, so a test can declare a third of either.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import dagster as dg

from lakebus_dagster.defs.lakehouse.assets import dws_asset, ods_source
from lakebus_dagster.defs.lakehouse.automation import gap_fill_sensor
from lakebus_dagster.defs.lakehouse.late_data import late_data_sensors
from lakebus_dagster.defs.lakehouse.sensors import lake_incident_sensor
from lakebus_dagster.defs.lakehouse.checks import ods_freshness
from lakebus_dagster.defs.asset_keys import ods_key
from lakebus_dagster.defs.lakehouse.constants import AssetJob, LakehouseLimits
from lakebus_dagster.defs.lakehouse.jobs import dws_jobs, maintenance_job, observe_ods_job
from lakebus_dagster.defs.lakehouse.retention import retention_job
from lakebus_dagster.defs.lakehouse.schedules import build_schedules
from lakebus_dagster.events.registry import default_registry
from lakebus_dagster.lake.dws import DWS_TABLES, DwsTable
from lakebus_dagster.settings import Settings


@dataclass(frozen=True)
class Lakehouse:
    """The lakehouse domain's definitions, by kind (tests and tools pick single ones from here)."""

    ods_sources: dict[str, dg.SourceAsset]  # by event
    dws_assets: dict[str, dg.AssetsDefinition]  # by DWS table name, each with its three checks
    ods_freshness_checks: list[dg.AssetChecksDefinition]
    ods_freshness_sensor: dg.SensorDefinition
    gap_fill_sensor: dg.SensorDefinition
    lake_incident_sensor: dg.SensorDefinition
    late_data_sensors: tuple[dg.SensorDefinition, ...]
    jobs: dict[str, dg.JobDefinition | AssetJob]
    schedules: list[dg.ScheduleDefinition]

    def definitions(self) -> dg.Definitions:
        return dg.Definitions(
            assets=[*self.ods_sources.values(), *self.dws_assets.values()],
            asset_checks=self.ods_freshness_checks,
            schedules=self.schedules,
            sensors=[self.ods_freshness_sensor, self.gap_fill_sensor, self.lake_incident_sensor, *self.late_data_sensors],
            jobs=list(self.jobs.values()),
        )


def build_lakehouse(settings: Settings | None = None, events: Iterable[str] | None = None,
                    specs: Sequence[DwsTable] = DWS_TABLES) -> Lakehouse:
    """The domain for ``events`` (default: every registered event) and the DWS tables ``specs``, with
    the freshness limit, retention and schedule times of ``settings``' config file (the code
    location's one load; None: the shipped values)."""
    limits = LakehouseLimits.of(settings.deployment_file if settings else None)
    events = tuple(default_registry.events() if events is None else events)
    specs = tuple(specs)
    missing = sorted({e for spec in specs for e in spec.sources} - set(events))
    if missing:
        raise ValueError(f"DWS tables read unregistered event(s) {missing}")
    ods_sources = {event: ods_source(event, limits.ods_max_commit_age) for event in events}
    dws_assets = {spec.name: dws_asset(spec, specs) for spec in specs}
    freshness_checks, freshness_sensor = ods_freshness([ods_key(event) for event in events], limits.ods_max_commit_age)
    jobs = dws_jobs(specs, list(dws_assets.values()))
    observe = observe_ods_job([ods_key(event) for event in events], limits.ods_max_commit_age)
    maintenance = maintenance_job(specs)
    retention = retention_job(limits.retention_days)
    return Lakehouse(
        ods_sources=ods_sources,
        dws_assets=dws_assets,
        ods_freshness_checks=freshness_checks,
        ods_freshness_sensor=freshness_sensor,
        gap_fill_sensor=gap_fill_sensor(list(dws_assets.values())),
        late_data_sensors=tuple(late_data_sensors(jobs)),
        lake_incident_sensor=lake_incident_sensor(
            list(jobs), [k for a in dws_assets.values() for k in a.keys], [ods_key(e) for e in events]),
        jobs={**jobs, observe.name: observe, maintenance.name: maintenance, retention.name: retention},
        schedules=build_schedules(jobs, observe, maintenance, retention, limits.schedule_crons),
    )
