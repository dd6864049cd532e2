"""Offset ledger: the ODS check that every bus record is in exactly one place, on a schedule and
after every DLQ replay, poison-record remediation or re-queue (those jobs and the run after each:
:mod:`lakebus_dagster.defs.recovery`)."""

import dagster as dg

from lakebus_dagster.defs.ledger.checks import CHECK_NAME, LedgerCheckConfig, offset_ledger_check
from lakebus_dagster.defs.ledger.jobs import LEDGER_JOB, ledger_job, ledger_schedule

defs = dg.Definitions(
    asset_checks=[offset_ledger_check],
    jobs=[ledger_job],
    schedules=[ledger_schedule],
)

__all__ = ["CHECK_NAME", "LEDGER_JOB", "LedgerCheckConfig", "defs", "ledger_job", "offset_ledger_check"]
