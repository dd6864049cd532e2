"""Change capture from PostgreSQL (issue 30): the ``provision_change_capture`` job — database checks
and publication, typed Iceberg change tables, the Debezium source and the change-table sink."""

import dagster as dg

from lakebus_dagster.defs.cdc.jobs import provision_change_capture

defs = dg.Definitions(jobs=[provision_change_capture])
