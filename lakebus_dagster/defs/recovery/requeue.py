"""``requeue_lost_records``: copies of the records the offset ledger finds lost (never landed,
offsets passed), back onto the bus."""

# no `from __future__ import annotations`: Dagster resolves the config and resource annotations at runtime

import dagster as dg
from pydantic import Field

from lakebus_dagster.defs.alerts import AlertResource, make_alert, send_and_record
from lakebus_dagster.defs.guard import AUDITED, confirm_field, require_confirmation
from lakebus_dagster.defs.kafka_roles import OPERATIONS_TAGS
from lakebus_dagster.defs.resources import BusLayoutResource, ConnectResource, IcebergCatalogResource, KafkaResource
from lakebus_dagster.kafka import produce_all
from lakebus_dagster.ledger import Ledger
from lakebus_dagster.ledger.requeue import RequeuePlan, plan_requeue, read_offsets, requeue_items

REQUEUE_JOB = "requeue_lost_records"
#: what ``confirm`` names: the re-queue copies records back onto the bus topic
REQUEUE_CONFIRM = "the bus topic's name"


class RequeueConfig(dg.Config):
    grace_s: float = Field(
        default=300.0,
        description="the ledger's grace period (as its check): an unaccounted offset younger than this is pending and "
        "is not re-queued",
    )
    include_removed: bool = Field(
        default=False,
        description="also re-queue lost offsets the ledger had verified once (rows removed since by a hand-made delete; "
        "the ODS retention's deletes are retired, not lost); off: only records that never landed",
    )
    max_records: int = Field(default=100_000, ge=1, description="refuse (fail, send nothing) above this many records")
    dry_run: bool = Field(default=False, description="report what would be re-queued, send nothing")
    confirm: str = confirm_field(REQUEUE_CONFIRM)


def _requeue_alert(plan: RequeuePlan, copies: str) -> dict:
    lines = [f"re-queued: {plan.describe(plan.requeue)} (the copies: {copies}); each carries lakebus.requeued.from "
             "naming its original, lands within a commit interval, and the next offset_ledger run counts the "
             "originals as re-queued."]
    if plan.removed:
        lines.append(f"left alone (in a table once, removed since): {plan.describe(plan.removed)}")
    return make_alert("requeued", f"{plan.topic}: {plan.requeue_count} lost record(s) re-queued", lines,
                      key=f"requeued:{plan.topic}")


@dg.op
def requeue_lost_records_op(
    context: dg.OpExecutionContext,
    config: RequeueConfig,
    layout: BusLayoutResource,
    operations: KafkaResource,
    connect: ConnectResource,
    iceberg: IcebergCatalogResource,
    alerts: AlertResource,
):
    """Copy every record the offset ledger finds lost back onto the bus (rules:
    :mod:`lakebus_dagster.ledger.requeue`). Runs the ledger itself first (not persisted), so what it
    copies is what is lost now, not what an older check saw; a second run finds nothing to do."""
    kafka = operations  # a bus-changing job: the operations principal (kafka/acls.py)
    bus = layout.layout()
    topic = bus.bus_topic.name
    require_confirmation(context.job_name, config.confirm, topic, REQUEUE_CONFIRM)
    with connect.client() as client:
        ledger = Ledger(bus, kafka.consumer, kafka.admin(), kafka.producer(), iceberg.load(), client)
        run = ledger.run(grace_s=config.grace_s, persist=False)
    plan = plan_requeue(topic, run.verdict.gaps, run.state.ever_verified, include_removed=config.include_removed)
    meta = {
        "bus_topic": topic,
        "lost_count": sum(len(o) for o in run.verdict.gaps.values()),
        "requeue_count": plan.requeue_count,
        "requeue_offsets": plan.describe(plan.requeue),
        "left_removed_count": plan.removed_count,
        "left_removed_offsets": plan.describe(plan.removed),
        "dry_run": config.dry_run,
    }
    if plan.removed:
        context.log.warning(f"{topic}: {plan.removed_count} lost offset(s) were in a table once and removed since; left "
                            f"alone ({plan.describe(plan.removed)}); include_removed=true re-queues them too")
    if plan.requeue_count > config.max_records:
        raise dg.Failure(f"{topic}: {plan.requeue_count} lost record(s) to re-queue, more than max_records="
                         f"{config.max_records}; nothing sent. Check the offset_ledger check's metadata, then raise "
                         "max_records in this job's config", metadata=meta)
    if not plan.requeue_count or config.dry_run:
        context.log.info(f"{topic}: {plan.requeue_count} lost record(s) to re-queue" + (" (dry run: nothing sent)" if plan.requeue_count else ""))
        context.add_output_metadata({**meta, "copies": "-"})
        return
    msgs, unreadable = [], {}
    for p, offsets in sorted(plan.requeue.items()):
        found, gone = read_offsets(kafka.consumer, topic, p, offsets)
        msgs += found
        if gone:
            unreadable[p] = gone
    if unreadable:
        raise dg.Failure(f"{topic}: lost offset(s) no longer readable on the bus (retention deleted them?): "
                         f"{plan.describe(unreadable)}; nothing sent", metadata=meta)
    positions = produce_all(kafka.producer(**{"acks": "all", "enable.idempotence": True}), requeue_items(msgs))
    by_partition: dict[int, list[int]] = {}
    for p, o in positions:
        by_partition.setdefault(p, []).append(o)
    copies = RequeuePlan(topic, by_partition).describe(by_partition)
    context.log.info(f"{topic}: re-queued {len(msgs)} lost record(s) {plan.describe(plan.requeue)} as {copies}")
    send_and_record(_requeue_alert(plan, copies), alerts, context)
    context.add_output_metadata({**meta, "copies": copies})


@dg.job(
    description="Copy the records the offset ledger finds lost (never landed, offsets passed) back onto the bus, each "
    "once, with a header naming the original; run by requeue_after_loss_sensor or by hand (config.confirm = the bus "
    "topic's name).",
    # one at a time with provisioning (the run queue's limit): two re-queues started together would
    # both see the same gaps before either's copies are on the bus, and copy them twice
    tags={"domain": "ledger", "lakebus/exclusive": "provisioning", **AUDITED, **OPERATIONS_TAGS},
)
def requeue_lost_records():
    requeue_lost_records_op()
