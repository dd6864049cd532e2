"""Offset ledger: the ODS check that every bus record is in exactly one place, on a schedule and
after every DLQ replay, poison-record remediation or re-queue; and the re-queue of what it finds
lost."""

import dagster as dg

from lakebus_dagster.defs.ledger.checks import CHECK_NAME, LedgerCheckConfig, offset_ledger_check
from lakebus_dagster.defs.ledger.jobs import LEDGER_JOB, REQUEUE_JOB, ledger_job, ledger_schedule, requeue_lost_records
from lakebus_dagster.defs.ledger.sensors import ledger_after_recovery_sensor, requeue_after_loss_sensor

defs = dg.Definitions(
    asset_checks=[offset_ledger_check],
    jobs=[ledger_job, requeue_lost_records],
    schedules=[ledger_schedule],
    sensors=[ledger_after_recovery_sensor, requeue_after_loss_sensor],
)

__all__ = ["CHECK_NAME", "LEDGER_JOB", "REQUEUE_JOB", "LedgerCheckConfig", "defs", "ledger_job", "offset_ledger_check",
           "requeue_lost_records"]
