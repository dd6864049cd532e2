"""Change capture from PostgreSQL (issue 30): the ``provision_change_capture`` job — database checks
and publication, typed Iceberg change tables, the Debezium source and the change-table sink — the
current-state table of each captured demo table (a PySpark MERGE asset), re-reads, the offset ledger
over the change topics and, when capture is on, its schedule (:func:`build_defs`)."""

import dagster as dg

from lakebus_dagster.defs.cdc.assets import CDC_GROUP, CURRENT_STATE_ASSETS
from lakebus_dagster.defs.cdc.ledger import cdc_offset_ledger
from lakebus_dagster.defs.cdc.schedules import cdc_ledger_schedule
from lakebus_dagster.defs.cdc.jobs import (
    provision_change_capture,
    resnapshot_captured_table,
    resync_captured_table,
    stop_captured_table_resync,
)

#: the current-state tables, one run (the UI's and `lakebus launch`'s way to build them)
cdc_current_state_job = dg.define_asset_job(
    "cdc_current_state",
    selection=dg.AssetSelection.groups(CDC_GROUP),
    description="Build the current-state table of every captured table: one incremental MERGE each (LAKEBUS_POSTGRES=on).",
    tags={"domain": "cdc"},
)

defs = dg.Definitions(
    jobs=[provision_change_capture, cdc_current_state_job, cdc_offset_ledger, resync_captured_table, resnapshot_captured_table,
          stop_captured_table_resync],
    assets=CURRENT_STATE_ASSETS,
)


def build_defs(capture_enabled: bool) -> dg.Definitions:
    """The domain's definitions; with capture on (LAKEBUS_POSTGRES=on) also ``cdc_offset_ledger_schedule``
    (off, a schedule that could only skip is not registered: the jobs stay, and refuse, naming the setting)."""
    if not capture_enabled:
        return defs
    return dg.Definitions.merge(defs, dg.Definitions(schedules=[cdc_ledger_schedule]))
