"""Connector maintenance jobs: status, pause, resume, stop, restart, delete, offsets.

Each job names its connector in run config (default: the layout's sink connector), performs one
operation through the typed Connect client, waits for the resulting state with a deadline, and
records before/after in the run's metadata. Pause, stop and resume change the connector's
*declared* target state first (:mod:`lakebus_dagster.bus.target_state`), which provisioning and
the status sensor honour.
"""

from typing import Literal

import dagster as dg
from pydantic import Field

from lakebus_dagster.bus.target_state import DeclaredState, TargetState
from lakebus_dagster.connect import ConnectStateFailed
from lakebus_dagster.connect.source_offsets import OffsetFormatError, validate_source_offsets
from lakebus_dagster.defs.guard import AUDITED, confirm_field, require_confirmation
from lakebus_dagster.defs.resources import BusLayoutResource, ConnectResource, KafkaResource
from lakebus_dagster.defs.connectors.status import status_metadata
from lakebus_dagster.provision.outcome import Action
from lakebus_dagster.provision.target_state_store import declared_state, record_declared

DEFAULT_WAIT_S = 60.0


class ConnectorTarget(dg.Config):
    connector: str = Field(default="", description="connector name; empty = the bus layout's sink connector")
    wait_timeout_s: float = Field(default=DEFAULT_WAIT_S, description="deadline for the resulting state")


def _name(config: ConnectorTarget, layout: BusLayoutResource) -> str:
    return config.connector or layout.layout().connector_name


@dg.op
def connector_status(context: dg.OpExecutionContext, config: ConnectorTarget, layout: BusLayoutResource, connect: ConnectResource):
    """Connector and task states, worker ids and the first line of any trace."""
    name = _name(config, layout)
    with connect.client() as client:
        status = client.status(name)
        offsets = client.get_offsets(name)
    context.add_output_metadata({**status_metadata("", status), "offsets": dg.MetadataValue.json(offsets)})
    context.log.info(f"connector {name}: {status.describe()}")


class DeclareStateConfig(ConnectorTarget):
    reason: str = Field(default="", description="why (recorded with the declared state, shown wherever it is read)")


def _declare_and_apply(
    context: dg.OpExecutionContext,
    config: DeclareStateConfig,
    layout: BusLayoutResource,
    connect: ConnectResource,
    kafka: KafkaResource,
    target: TargetState,
) -> dict[str, dg.MetadataValue]:
    """Record ``target`` as the connector's declared state, then bring the connector there.

    The declaration comes first, so provisioning and the status sensor already expect the new
    state while Connect moves to it. Each half acts only on a difference: an unchanged
    declaration is not rewritten (its record keeps who/when/why), and a connector already in the
    state gets no call — so running the job twice reports ``unchanged`` the second time.
    """
    bus = layout.layout()
    name = _name(config, layout)
    wanted = target.connect_state
    with connect.client() as client:
        before = client.status(name)  # a missing connector fails here, before anything is recorded
        previous, record = declared_state(kafka.clients(), bus, name)
        metadata: dict[str, dg.MetadataValue] = {}
        if previous is target:
            declared_change = f"unchanged (declared {wanted})"
        else:
            record = DeclaredState.now(name, target, run_id=context.run_id, job=context.job_name, reason=config.reason)
            topic_outcome = record_declared(kafka.clients(), bus, record)
            declared_change = f"{previous.connect_state} → {wanted}"
            if topic_outcome.action is not Action.UNCHANGED:
                metadata["state_topic"] = dg.MetadataValue.text(f"{topic_outcome.name}: {topic_outcome.action.value}")
        if before.state == wanted:
            connector_change = f"unchanged ({wanted})"
        else:
            getattr(client, _VERBS[target])(name)
            connector_change = f"{before.state} → {wanted}"
        after = client.wait_for_state(name, {wanted}, timeout=config.wait_timeout_s, require_tasks=target is not TargetState.STOPPED)
    unchanged = declared_change.startswith("unchanged") and connector_change.startswith("unchanged")
    context.log.info(f"connector {name}: declared {declared_change}; connector {connector_change}")
    metadata.update(
        {
            **status_metadata("before_", before),
            **status_metadata("after_", after),
            "outcome": dg.MetadataValue.text("unchanged" if unchanged else "changed"),
            "declared_change": dg.MetadataValue.text(declared_change),
            "connector_change": dg.MetadataValue.text(connector_change),
            "declared_state": dg.MetadataValue.text(wanted),
            "declared_record": dg.MetadataValue.json(record.as_dict() if record else {"source": "layout default"}),
        }
    )
    return metadata


_VERBS = {TargetState.PAUSED: "pause", TargetState.RUNNING: "resume", TargetState.STOPPED: "stop"}


def _declare_op(op_name: str, target: TargetState, what: str):
    @dg.op(
        name=op_name,
        description=f"Declare the connector {target.value} (recorded in the bus layout's state topic, with run id, time "
        f"and reason), then {what} it and wait until it is {target.connect_state}. Provisioning and the status "
        "sensor honour the declaration.",
    )
    def _op(
        context: dg.OpExecutionContext,
        config: DeclareStateConfig,
        layout: BusLayoutResource,
        connect: ConnectResource,
        kafka: KafkaResource,
    ):
        context.add_output_metadata(_declare_and_apply(context, config, layout, connect, kafka, target))

    return _op


pause_op = _declare_op("pause_connector_op", TargetState.PAUSED, "pause")
resume_op = _declare_op("resume_connector_op", TargetState.RUNNING, "resume")
stop_op = _declare_op("stop_connector_op", TargetState.STOPPED, "stop")


#: the run tag the status sensor puts on every healing run it requests: the incident the run answers
INCIDENT_TAG = "lakebus/incident"


class RestartConfig(ConnectorTarget):
    only_failed: bool = Field(default=True, description="restart only FAILED instances")
    include_tasks: bool = Field(default=True, description="restart the tasks too, not only the connector instance")


@dg.op
def restart_connector_op(context: dg.OpExecutionContext, config: RestartConfig, layout: BusLayoutResource, connect: ConnectResource):
    """Restart and wait for RUNNING: failed instances (or the connector alone) through
    ``POST /connectors/<name>/restart?includeTasks=..&onlyFailed=..``; every instance
    (``only_failed=false`` with tasks) as stop + resume, one wave (see ``ConnectClient.stop_and_resume``)."""
    name = _name(config, layout)
    every_instance = config.include_tasks and not config.only_failed
    incident = context.run.tags.get(INCIDENT_TAG)
    outcome = "running"
    with connect.client() as client:
        before = client.status(name)
        try:
            if every_instance:
                after = client.stop_and_resume(name, timeout=config.wait_timeout_s)
            else:
                after = client.restart_and_wait(
                    name, include_tasks=config.include_tasks, only_failed=config.only_failed, timeout=config.wait_timeout_s
                )
        except ConnectStateFailed as exc:
            # A restart the status sensor requested for an open incident has done its part once Connect
            # restarted the instances; a task failing again (a poison record, a backend still down) is
            # that incident's next state, which the sensor reads on its next tick and answers with a
            # quarantine, another restart after its backoff, or an escalation. A restart launched by
            # hand fails, as the person who launched it expects to hear at once.
            if incident is None or exc.last_status is None:
                raise
            after, outcome = exc.last_status, f"failed again; incident {incident} stays open for the status sensor"
            context.log.warning(f"connector {name}: restarted, and failed again: {after.describe()}; {outcome}")
    context.log.info(f"connector {name}: {before.describe()} → {after.describe()}")
    metadata = {**status_metadata("before_", before), **status_metadata("after_", after)}
    context.add_output_metadata({**metadata, "only_failed": config.only_failed, "include_tasks": config.include_tasks,
                                 "method": "stop + resume" if every_instance else "POST /restart", "outcome": outcome})


CONNECTOR_CONFIRM = "the connector's name"  # what ``confirm`` names in the jobs that delete or move something


class DeleteConfig(ConnectorTarget):
    confirm: str = confirm_field(CONNECTOR_CONFIRM)


@dg.op
def delete_connector_op(context: dg.OpExecutionContext, config: DeleteConfig, layout: BusLayoutResource, connect: ConnectResource):
    """Delete the connector (its committed offsets stay in its consumer group)."""
    name = _name(config, layout)
    require_confirmation(context.job_name, config.confirm, name, CONNECTOR_CONFIRM)
    with connect.client() as client:
        before = client.status(name)
        client.delete(name)
    context.add_output_metadata({**status_metadata("before_", before), "deleted": name})


class OffsetPosition(dg.Config):
    partition: int = Field(description="partition of the bus topic (sink) ")
    offset: int = Field(ge=0, description="the next offset the connector will read")


class OffsetsConfig(ConnectorTarget):
    mode: Literal["reset", "set"] = Field(
        default="set",
        description="reset = DELETE the offsets (a sink restarts from consumer.override.auto.offset.reset); "
        "set = PATCH the positions below",
    )
    topic: str = Field(default="", description="sink: the topic the positions are for (empty = the layout's bus topic)")
    positions: list[OffsetPosition] = Field(default_factory=list, description="sink: partition -> next offset")
    source_offsets: list[dict] = Field(
        default_factory=list,
        description="source connectors: the raw KIP-875 [{partition: {...}, offset: {...}}] list (e.g. a JDBC timestamp)",
    )
    resume: bool = Field(
        default=True,
        description="afterwards, bring the connector back to its declared state (RUNNING unless declared paused/stopped)",
    )
    confirm: str = confirm_field(CONNECTOR_CONFIRM)


def sink_offsets(topic: str, positions: list[OffsetPosition]) -> list[dict]:
    return [
        {"partition": {"kafka_topic": topic, "kafka_partition": p.partition}, "offset": {"kafka_offset": p.offset}}
        for p in positions
    ]


@dg.op
def set_connector_offsets_op(
    context: dg.OpExecutionContext, config: OffsetsConfig, layout: BusLayoutResource, connect: ConnectResource, kafka: KafkaResource
):
    """Move a connector's start position with the standard API (Kafka ≥ 3.6): stop → PATCH/DELETE offsets → back to
    the connector's declared state (resume, unless an operator declared it paused or stopped).

    For the Apache Iceberg sink the source offsets live in the Connect consumer group
    ``connect-<name>`` (the sink commits them there inside its Kafka transaction), which is what
    this API rewrites. Its other groups need no reset: ``connect-<name>-coord`` tracks the
    *control* topic, and the ``cg-control-<uuid>`` groups are per task start and are discarded.
    (The older Tabular sink kept source offsets in a durable ``cg-control-<name>`` group as well;
    this job does not handle that connector class.) Moving a sink backwards re-appends rows: the
    Iceberg sink only appends.
    """
    bus = layout.layout()
    name = _name(config, layout)
    require_confirmation(context.job_name, config.confirm, name, CONNECTOR_CONFIRM)
    with connect.client() as client:
        info = client.info(name)
        is_sink = info.type == "sink"
        if is_sink and info.config.get("connector.class", "").startswith("io.tabular."):
            raise dg.Failure(f"connector {name!r} is the Tabular Iceberg sink, whose durable cg-control group this job does not reset")
        if config.mode == "set" and not is_sink:
            try:  # refuses what cannot be a start position (Debezium's PostgreSQL source), naming why
                validate_source_offsets(name, info.config.get("connector.class", ""), info.config, config.source_offsets,
                                        client.get_offsets(name))
            except OffsetFormatError as exc:
                raise dg.Failure(f"{exc}; nothing was changed", allow_retries=False) from exc
        if config.mode == "set":
            offsets = sink_offsets(config.topic or bus.bus_topic.name, config.positions) if is_sink else config.source_offsets
            if not offsets:
                raise dg.Failure(f"connector {name!r}: mode=set needs {'positions' if is_sink else 'source_offsets'} in the config")
        before_offsets = client.get_offsets(name)
        before = client.status(name)
        client.stop(name)
        client.wait_for_state(name, {"STOPPED"}, timeout=config.wait_timeout_s, require_tasks=False)
        message = client.delete_offsets(name) if config.mode == "reset" else client.patch_offsets(name, offsets)
        after_offsets = client.get_offsets(name)
        metadata = {
            **status_metadata("before_", before),
            "offsets_before": dg.MetadataValue.json(before_offsets),
            "offsets_after": dg.MetadataValue.json(after_offsets),
            "connect_message": dg.MetadataValue.text(message or ""),
        }
        if config.resume:
            target, _ = declared_state(kafka.clients(), bus, name)
            if target is not TargetState.STOPPED:
                getattr(client, _VERBS[target])(name)
            after = client.wait_for_state(
                name, {target.connect_state}, timeout=config.wait_timeout_s, require_tasks=target is not TargetState.STOPPED
            )
            metadata.update(status_metadata("after_", after))
            metadata["declared_state"] = dg.MetadataValue.text(target.connect_state)
    context.log.info(f"connector {name}: offsets {config.mode} done ({message})")
    context.add_output_metadata(metadata)


def _job(name: str, op_def, description: str, audited: bool = True) -> dg.JobDefinition:
    @dg.job(name=name, description=description, tags={"domain": "connectors", **(AUDITED if audited else {})})
    def _j():
        op_def()

    return _j


MAINTENANCE_JOBS = [
    _job("connector_status_report", connector_status, "Connector/task states, workers, first trace lines and offsets.", False),
    _job("pause_connector", pause_op, "Pause the connector (tasks stay assigned, consume nothing)."),
    _job("resume_connector", resume_op, "Resume a paused or stopped connector."),
    _job("stop_connector", stop_op, "Stop the connector (tasks shut down; required before changing offsets)."),
    _job("restart_connector", restart_connector_op, "Restart the connector and (failed) tasks."),
    _job("delete_connector", delete_connector_op, "Delete the connector; needs config.confirm = the connector's name."),
    _job("set_connector_offsets", set_connector_offsets_op, "Stop → PATCH/DELETE offsets → resume (start position); "
         "needs config.confirm = the connector's name."),
]
