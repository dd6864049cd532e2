"""Audit: every operator action (a run of a job tagged ``lakebus/audit``) kept as one observation of
``lakebus/audit`` in Dagster's event log, with who, where, config, outcome and times."""

import dagster as dg

from lakebus_dagster.defs.audit.records import audit_asset
from lakebus_dagster.defs.audit.sensors import operator_audit_sensor

defs = dg.Definitions(assets=[audit_asset], sensors=[operator_audit_sensor])
