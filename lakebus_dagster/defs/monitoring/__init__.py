"""Monitoring: connector status and DLQ sensors, alerts, auto-restart, and the policy-driven requests of the
recovery jobs (poison-record remediation, the re-queue after a loss; the jobs: :mod:`lakebus_dagster.defs.recovery`)."""

import dagster as dg

from lakebus_dagster.defs.alerts import alerts_asset
from lakebus_dagster.defs.monitoring.dlq_sensor import dlq_asset, dlq_sensor
from lakebus_dagster.defs.monitoring.requeue_sensor import requeue_after_loss_sensor
from lakebus_dagster.defs.monitoring.sensors import connector_status_sensor
from lakebus_dagster.defs.monitoring.slots import slot_asset

defs = dg.Definitions(
    assets=[alerts_asset, dlq_asset, slot_asset],
    sensors=[connector_status_sensor, dlq_sensor, requeue_after_loss_sensor],
    # "alerts" comes from the environment helper (defs/resources.py): sink and webhook are configuration;
    # "monitoring_policy" from the code location's one settings load (definitions.py, defs/monitoring/policy.py)
)
