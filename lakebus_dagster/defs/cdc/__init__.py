"""Change capture from PostgreSQL (issue 30): the ``provision_change_capture`` job — database checks
and publication, typed Iceberg change tables, the Debezium source and the change-table sink — and
the current-state table of each captured demo table (a PySpark MERGE asset)."""

import dagster as dg

from lakebus_dagster.defs.cdc.assets import CURRENT_STATE_ASSETS
from lakebus_dagster.defs.cdc.jobs import provision_change_capture

defs = dg.Definitions(jobs=[provision_change_capture], assets=CURRENT_STATE_ASSETS)
