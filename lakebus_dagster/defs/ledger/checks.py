"""The offset ledger as one asset check on every ODS table: every bus offset up to the end is in
exactly one place (one ODS row, one DLQ record, re-queued, or a tombstone).

One check definition, one result per ODS asset (a lost ``recharge`` record cannot be told from a
lost ``bet`` record — a lost record has no row to say which table it was meant for — so each ODS
asset carries the whole bus's verdict). Incremental: only offsets since the last verified point
are read (state in the ``<bus>.ledger`` topic, see :mod:`lakebus_dagster.ledger.state`). A
failure sends one alert per distinct set of problems, naming the offsets, and records it on
``lakebus/alerts`` like every other alert.
"""


from typing import Any

# no `from __future__ import annotations`: Dagster resolves the config and resource annotations at runtime
import dagster as dg
from pydantic import Field

from lakebus_dagster.defs.alerts import AlertResource, make_alert, send_and_record
from lakebus_dagster.defs.asset_keys import ods_keys
from lakebus_dagster.defs.resources import BusLayoutResource, ConnectResource, IcebergCatalogResource, KafkaResource
from lakebus_dagster.events.registry import default_registry
from lakebus_dagster.ledger import Ledger, LedgerRun, describe

CHECK_NAME = "offset_ledger"


def ods_asset_keys() -> list[dg.AssetKey]:
    """The ODS assets' keys: one per event in the registry, the same keys the lakehouse declares."""
    return ods_keys(default_registry.events())


class LedgerCheckConfig(dg.Config):
    grace_s: float = Field(
        default=300.0,
        description="an unaccounted offset younger than this is pending, not lost (the sink commits Kafka offsets a "
        "little before its Iceberg commit makes the rows visible)",
    )
    full: bool = Field(default=False, description="re-verify from the ledger's baseline instead of the last verified point")
    persist: bool = Field(default=True, description="store the new verified point in the <bus>.ledger topic")


def _partition_table(run: LedgerRun) -> dg.MetadataValue:
    columns = ["partition", "verified_from", "committed", "end", "verified_to", "ods", "dlq", "requeued", "tombstone", "retired",
               "pending", "lost", "duplicated"]
    records = []
    for p, v in sorted(run.verdict.partitions.items()):
        w = v.window
        records.append(dg.TableRecord({
            "partition": p, "verified_from": w.start, "committed": w.committed, "end": w.end, "verified_to": v.verified_to,
            "ods": v.by_place.get("ods", 0), "dlq": v.by_place.get("dlq", 0), "requeued": v.by_place.get("requeued", 0),
            "tombstone": v.by_place.get("tombstone", 0), "retired": v.by_place.get("retired", 0), "pending": len(v.pending),
            "lost": describe(v.gaps) or "-", "duplicated": describe(d.offset for d in v.duplicates) or "-",
        }))
    schema = dg.TableSchema(columns=[dg.TableColumn(c, "string" if c in ("lost", "duplicated") else "int") for c in columns])
    return dg.MetadataValue.table(records, schema=schema)


def _duplicates_table(run: LedgerRun) -> dg.MetadataValue:
    records = [dg.TableRecord({"partition": d.partition, "offset": d.offset, "places": " | ".join(d.places)})
               for d in run.verdict.duplicates[:200]]
    schema = dg.TableSchema(columns=[dg.TableColumn("partition", "int"), dg.TableColumn("offset", "int"), dg.TableColumn("places", "string")])
    return dg.MetadataValue.table(records, schema=schema)


def check_metadata(run: LedgerRun) -> dict[str, Any]:
    gaps = run.verdict.gaps
    return {
        "bus_topic": dg.MetadataValue.text(run.verdict.topic),
        "partitions": _partition_table(run),
        "lost_offsets": dg.MetadataValue.text(
            "; ".join(f"[{p}] {describe(offs)}" for p, offs in sorted(gaps.items())) or "none"),
        "lost_count": dg.MetadataValue.int(sum(len(o) for o in gaps.values())),
        "duplicate_count": dg.MetadataValue.int(len(run.verdict.duplicates)),
        "duplicates": _duplicates_table(run),
        "pending_count": dg.MetadataValue.int(sum(len(v.pending) for v in run.verdict.partitions.values())),
        "complete": dg.MetadataValue.bool(run.complete),
        "bus_records_read": dg.MetadataValue.int(run.bus_records_read),
        "ods_rows_read": dg.MetadataValue.int(run.ods_rows_read),
        "dlq_records_read": dg.MetadataValue.int(run.dlq_records_read),
        "dlq_records_without_origin": dg.MetadataValue.int(run.dlq_unattributed),
        "copies_claimed": dg.MetadataValue.int(len(run.verdict.claims)),
        "baseline": dg.MetadataValue.text(f"{run.state.baseline} ({run.state.baseline_reason})"),
        "reverified_from_baseline_because": dg.MetadataValue.text("; ".join(run.reverified) or "-"),
        "seconds": dg.MetadataValue.float(round(run.seconds, 3)),
    }


def ledger_alert(run: LedgerRun, where: str = "the offset_ledger check's metadata") -> dict[str, str]:
    summary = run.verdict.problem_summary()
    lost = sum(len(o) for o in run.verdict.gaps.values())
    return make_alert(
        "offset_ledger",
        f"offset ledger of {run.verdict.topic}: {lost} record(s) lost, {len(run.verdict.duplicates)} duplicated",
        summary + "\nEvery bus offset must be in exactly one place (ODS row, DLQ record, re-queued, tombstone, retired by the ODS retention); "
                  f"see {where} for the places of each duplicate.",
        key=f"offset_ledger:{run.verdict.topic}",
    )


def alert_once(ledger: Ledger, run: LedgerRun, alerts: AlertResource, context: dg.OpExecutionContext, *, persist: bool,
               where: str = "the offset_ledger check's metadata") -> str:
    """One alert per distinct set of problems (the summary last alerted is kept in the ledger's state,
    so a run finding the same problems again stays silent; a passing run clears it); the summary."""
    summary = run.verdict.problem_summary()
    if not run.passed and summary != run.state.alerted:
        # raises if undelivered: the next run alerts again
        send_and_record(ledger_alert(run, where), alerts, context)
        ledger.mark_alerted(summary, persist=persist)
    elif run.passed and run.state.alerted:
        ledger.mark_alerted("", persist=persist)
    return summary


@dg.multi_asset_check(
    name=CHECK_NAME,
    specs=[dg.AssetCheckSpec(CHECK_NAME, asset=key, description="every bus offset is in exactly one place") for key in ods_asset_keys()],
    description=__doc__,
)
def offset_ledger_check(
    context: dg.AssetCheckExecutionContext,
    config: LedgerCheckConfig,
    layout: BusLayoutResource,
    kafka: KafkaResource,
    connect: ConnectResource,
    iceberg: IcebergCatalogResource,
    alerts: AlertResource,
):
    bus = layout.layout()
    with connect.client() as client:
        ledger = Ledger(bus, kafka.consumer, kafka.admin(), kafka.producer(), iceberg.load(), client)
        run = ledger.run(grace_s=config.grace_s, persist=config.persist, full=config.full)
        summary = alert_once(ledger, run, alerts, context.op_execution_context, persist=config.persist)
    description = (f"{bus.bus_topic.name}: " + (summary.replace("\n", "; ") if not run.passed else
                   "every offset up to the verified point is in exactly one place"
                   + ("" if run.complete else f" ({sum(len(v.pending) for v in run.verdict.partitions.values())} pending)")))
    context.log.info(description)
    metadata = check_metadata(run)
    for spec in context.check_specs:
        yield dg.AssetCheckResult(
            asset_key=spec.asset_key,
            check_name=spec.name,
            passed=run.passed,
            severity=dg.AssetCheckSeverity.ERROR,
            description=description[:1000],
            metadata=metadata,
        )


def lost_count_of_run(instance: dg.DagsterInstance, run_id: str) -> int:
    """The largest ``lost_count`` among the offset_ledger check evaluations of one run (0 if none)."""
    lost = 0
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
        evaluation = entry.dagster_event.event_specific_data if entry.dagster_event else None
        value = getattr(evaluation, "metadata", {}).get("lost_count")
        if value is not None:
            lost = max(lost, int(value.value))
    return lost


def ledger_grace_of_run(run: dg.DagsterRun) -> float | None:
    """The grace a ledger run was launched with (a stall's ledger run sets a short one), if any."""
    config = ((run.run_config or {}).get("ops") or {}).get(CHECK_NAME, {}).get("config") or {}
    return config.get("grace_s")
