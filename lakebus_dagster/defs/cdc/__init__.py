"""Change capture from PostgreSQL (issue 30): the ``provision_change_capture`` job — database checks
and publication, typed Iceberg change tables, empty current-state tables, the Debezium source and the
change-table sink — per declared table its captured table, change table and current-state asset
(a PySpark MERGE), re-reads, the offset ledger over the change topics and, when capture is on, its
schedule and the sensor keeping the current state fresh (:func:`build_defs`)."""

import dagster as dg

from lakebus_dagster.defs.cdc.assets import CDC_GROUP, capture_assets
from lakebus_dagster.defs.cdc.ledger import cdc_offset_ledger
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.cdc.schedules import cdc_ledger_schedule
from lakebus_dagster.defs.cdc.sensors import CDC_CURRENT_JOB, cdc_current_state_sensor
from lakebus_dagster.defs.cdc.jobs import (
    provision_change_capture,
    resnapshot_captured_table,
    resync_captured_table,
    stop_captured_table_resync,
)
from lakebus_dagster.settings import Settings

#: the current-state tables, one run (the sensor's, the UI's and `lakebus launch`'s way to build them)
cdc_current_state_job = dg.define_asset_job(
    CDC_CURRENT_JOB,
    selection=dg.AssetSelection.groups(CDC_GROUP),
    description="Build the current-state table of every captured table: one incremental MERGE each (LAKEBUS_POSTGRES=on).",
    tags={"domain": "cdc"},
)

JOBS = [provision_change_capture, cdc_current_state_job, cdc_offset_ledger, resync_captured_table, resnapshot_captured_table,
        stop_captured_table_resync]


def build_defs(settings: Settings) -> dg.Definitions:
    """The domain's definitions: the assets of every table the settings' declaration captures; with
    capture on (LAKEBUS_POSTGRES=on) also ``cdc_offset_ledger_schedule`` and ``cdc_current_state_sensor``
    (off, a schedule or sensor that could only skip is not registered: the jobs stay, and refuse, naming the setting)."""
    assets = capture_assets(ChangeCaptureResource.from_settings(settings).specs())
    defs = dg.Definitions(jobs=JOBS, assets=assets)
    if not settings.capture.enabled:
        return defs
    return dg.Definitions.merge(defs, dg.Definitions(schedules=[cdc_ledger_schedule], sensors=[cdc_current_state_sensor]))
