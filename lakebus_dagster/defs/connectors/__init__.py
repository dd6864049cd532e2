"""Connector maintenance: the day-2 operations of seed 000/002, as jobs launched from the UI."""

import dagster as dg

from lakebus_dagster.defs.connectors.jobs import MAINTENANCE_JOBS

defs = dg.Definitions(jobs=MAINTENANCE_JOBS)
