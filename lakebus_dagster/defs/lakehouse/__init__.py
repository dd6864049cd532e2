"""Lakehouse: the ODS tables the sink writes (observed), the DWS tables Spark builds from them
(hourly / daily partitions, MERGE per partition), their checks, schedules and Iceberg maintenance."""

import dagster as dg

from lakebus_dagster.defs.lakehouse.assets import dws_assets, ods_sources
from lakebus_dagster.defs.lakehouse.checks import dws_checks, ods_freshness_checks, ods_freshness_sensor
from lakebus_dagster.defs.lakehouse.jobs import jobs
from lakebus_dagster.defs.lakehouse.schedules import schedules

defs = dg.Definitions(
    assets=[*ods_sources, *dws_assets],
    asset_checks=[*ods_freshness_checks, *dws_checks],
    schedules=schedules,
    sensors=[ods_freshness_sensor],
    jobs=jobs,
)
