"""``cdc_offset_ledger``: the offset ledger over change capture's topics
(:mod:`lakebus_dagster.cdc.ledger`) as a job — run by ``cdc_offset_ledger_schedule``
(:mod:`.schedules`) or from the UI — with the events ledger's code: incremental from each change
topic's verified point (state in ``<change topic>.ledger``), the events ledger's metadata per change
topic (records by place, pending, lost and duplicated offsets), one ``offset_ledger`` alert per
distinct set of problems (:func:`lakebus_dagster.defs.ledger.checks.alert_once`), and a failed run
naming every lost or duplicated offset."""

from collections import Counter

import dagster as dg

from lakebus_dagster.cdc.capture import CaptureError
from lakebus_dagster.defs.alerts import AlertResource
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.ledger.checks import LedgerCheckConfig, alert_once, check_metadata
from lakebus_dagster.defs.resources import ConnectResource, IcebergCatalogResource, KafkaResource

CDC_LEDGER_JOB = "cdc_offset_ledger"


class CdcLedgerConfig(LedgerCheckConfig):
    """The events ledger check's config: ``grace_s`` (never below two of the capture sink's commit
    cycles: :func:`lakebus_dagster.cdc.ledger.in_flight_grace_s`), ``full`` (from each topic's
    baseline), ``persist`` (store the verified point and the alerted problems in ``<change topic>.ledger``)."""


@dg.op(description="Account for every record of each change topic since its verified point: one change-table row or "
       "one DLQ record, never none (lost) and never two (duplicated); one alert per distinct set of problems.")
def cdc_offset_ledger_op(context: dg.OpExecutionContext, config: CdcLedgerConfig, capture: ChangeCaptureResource,
                         kafka: KafkaResource, iceberg: IcebergCatalogResource, connect: ConnectResource,
                         alerts: AlertResource) -> None:
    from lakebus_dagster.cdc.ledger import change_ledgers, in_flight_grace_s

    if not capture.enabled:
        raise dg.Failure("change capture is off (LAKEBUS_POSTGRES is not 'on'): no change topic to account for",
                         allow_retries=False)
    try:
        specs = capture.specs()
    except CaptureError as exc:
        raise dg.Failure(str(exc), allow_retries=False) from exc
    if config.persist:
        present = set(kafka.admin().list_topics(timeout=10).topics)
        missing = [s.ledger_topic(t).name for s in specs for t in s.tables if s.ledger_topic(t).name not in present]
        if missing:
            raise dg.Failure(f"change capture {', '.join(s.name for s in specs)}: the ledger's state topic(s) {', '.join(missing)} "
                             "do not exist; run provision_change_capture (it creates them), or run with persist=false",
                             allow_retries=False)
    summary, problems, metadata = {}, [], {}
    where = f"the {CDC_LEDGER_JOB} run's metadata"
    for i, spec in enumerate(specs):
        grace_s = in_flight_grace_s(spec, config.grace_s)  # records of the current commit cycle are pending, not lost
        if grace_s != config.grace_s:
            context.log.info(f"grace {config.grace_s} s raised to {grace_s} s: two commit cycles of {spec.sink_name}")
        metadata["grace_s" if i == 0 else f"{spec.name} grace_s"] = dg.MetadataValue.float(grace_s)
        with connect.client() as client:
            for table, ledger in change_ledgers(spec, kafka.clients().config, iceberg.load(), client).items():
                run = ledger.run(grace_s=grace_s, persist=config.persist, full=config.full)
                alert_once(ledger, run, alerts, context, persist=config.persist, where=where)
                topic = spec.topic(table)
                places = sum((p.by_place for p in run.verdict.partitions.values()), Counter())
                pending = sum(len(p.pending) for p in run.verdict.partitions.values())
                summary[topic] = {"places": dict(places), "pending": pending, "records_read": run.bus_records_read,
                                  "dlq_records_read": run.dlq_records_read, "passed": run.passed,
                                  "verified_to": {str(p): v for p, v in sorted(run.state.verified_to.items())}}
                metadata.update({f"{topic} {key}": value for key, value in check_metadata(run).items()})
                context.log.info(f"{topic}: {dict(places)}, {pending} pending, {run.bus_records_read} record(s) read since "
                                 f"the verified point, {'passed' if run.passed else 'FAILED'}")
                if not run.passed:
                    problems.append((spec.name, run.verdict.problem_summary()))
    metadata["topics"] = dg.MetadataValue.json(summary)
    if problems:  # the failed step carries the same metadata (a failed step has no output to attach it to)
        names = ", ".join(dict.fromkeys(repr(n) for n, _ in problems))
        raise dg.Failure(f"change capture {names}: records lost or duplicated — " + "; ".join(p for _, p in problems),
                         metadata=metadata, allow_retries=False)
    context.add_output_metadata(metadata)


@dg.job(name=CDC_LEDGER_JOB,
        description="The offset ledger over change capture (LAKEBUS_POSTGRES=on): every record of every change topic in "
        "exactly one place — its change table or the capture's DLQ — incremental from each topic's verified point; "
        "one alert per distinct set of problems; fails naming lost or duplicated offsets.",
        tags={"domain": "cdc"})
def cdc_offset_ledger():
    cdc_offset_ledger_op()
