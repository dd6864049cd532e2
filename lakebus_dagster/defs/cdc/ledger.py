"""``cdc_offset_ledger``: the offset ledger over change capture's topics
(:mod:`lakebus_dagster.cdc.ledger`) as a UI job — per change topic the records accounted for by
place (change table, DLQ), the pending ones (not committed yet, within the grace), and a failed run
naming every lost or duplicated offset."""

from collections import Counter

import dagster as dg
from pydantic import Field

from lakebus_dagster.cdc.capture import CaptureError
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.resources import ConnectResource, IcebergCatalogResource, KafkaResource


class CdcLedgerConfig(dg.Config):
    grace_s: float = Field(default=300.0, description="a record the sink passed less than this long ago and that is in "
                           "no place yet is pending, not lost (the sink commits its offsets a little before the rows show)")


@dg.op(description="Account for every record of each change topic: one change-table row or one DLQ record, never none "
       "(lost) and never two (duplicated).")
def cdc_offset_ledger_op(context: dg.OpExecutionContext, config: CdcLedgerConfig, capture: ChangeCaptureResource,
                         kafka: KafkaResource, iceberg: IcebergCatalogResource, connect: ConnectResource) -> None:
    from lakebus_dagster.cdc.ledger import run_change_ledgers

    if not capture.enabled:
        raise dg.Failure("change capture is off (LAKEBUS_POSTGRES is not 'on'): no change topic to account for",
                         allow_retries=False)
    try:
        spec = capture.spec()
    except CaptureError as exc:
        raise dg.Failure(str(exc), allow_retries=False) from exc
    with connect.client() as client:
        runs = run_change_ledgers(spec, kafka.clients().config, iceberg.load(), client, config.grace_s)
    summary, problems = {}, []
    for table, run in runs.items():
        places = sum((p.by_place for p in run.verdict.partitions.values()), Counter())
        pending = sum(len(p.pending) for p in run.verdict.partitions.values())
        summary[spec.topic(table)] = {"places": dict(places), "pending": pending, "records_read": run.bus_records_read,
                                      "dlq_records_read": run.dlq_records_read, "passed": run.passed}
        context.log.info(f"{spec.topic(table)}: {dict(places)}, {pending} pending, {'passed' if run.passed else 'FAILED'}")
        if not run.passed:
            problems.append(run.verdict.problem_summary())
    context.add_output_metadata({"topics": dg.MetadataValue.json(summary)})
    if problems:
        raise dg.Failure(f"change capture {spec.name!r}: records lost or duplicated — " + "; ".join(problems),
                         metadata={"topics": dg.MetadataValue.json(summary)}, allow_retries=False)


@dg.job(description="The offset ledger over change capture (LAKEBUS_POSTGRES=on): every record of every change topic in "
        "exactly one place — its change table or the capture's DLQ; fails naming lost or duplicated offsets.",
        tags={"domain": "cdc"})
def cdc_offset_ledger():
    cdc_offset_ledger_op()
