"""Recovery: the jobs that put records back without losing one — DLQ replay, poison-record
remediation, the re-queue of what the offset ledger found lost — and the ledger run after each.
Monitoring and the ledger request these jobs; this domain imports neither's sensors."""

import dagster as dg

from lakebus_dagster.defs.recovery.jobs import remediate_poison_record, replay_dlq
from lakebus_dagster.defs.recovery.requeue import REQUEUE_JOB, requeue_lost_records
from lakebus_dagster.defs.recovery.sensors import ledger_after_recovery_sensor

defs = dg.Definitions(
    jobs=[replay_dlq, remediate_poison_record, requeue_lost_records],
    sensors=[ledger_after_recovery_sensor],
)

__all__ = ["REQUEUE_JOB", "defs", "remediate_poison_record", "replay_dlq", "requeue_lost_records"]
