"""Provisioning: make the cluster match the declared bus layout, idempotently."""

import dagster as dg

from lakebus_dagster.defs.provisioning.jobs import provision_lakebus

defs = dg.Definitions(jobs=[provision_lakebus])
