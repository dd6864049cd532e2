"""Cluster-wide Connect operations (seed 003's stopAll and friends), declared connector specs (seed
002's connector configs as code) and moving a source connector's start position (seed 002's patched
JDBC source), as jobs launched from the UI.

Every job reads the cluster first and refuses with one line naming Connect's URL when it is
unreachable — before changing anything. The bulk jobs act only on a difference (a second run reports
every connector ``unchanged``) and show before/after per connector. For connectors lakebus owns
(the layout's sink and the declared specs) they record the declared target state in the layout's
state topic first, exactly like ``pause_connector`` / ``stop_connector`` / ``resume_connector``,
so provisioning and the status sensor do not undo a bulk pause.
"""

import re
import dagster as dg
from pydantic import Field

from lakebus_dagster.bus.connector_specs import owned_by
from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.bus.target_state import DeclaredState, TargetState
from lakebus_dagster.connect import ConnectClient, ConnectError, ConnectorNotFound, ConnectUnavailable
from lakebus_dagster.connect.source_offsets import OffsetFormatError, validate_source_offsets
from lakebus_dagster.defs.connector_fleet.constants import DEFAULT_WAIT_S, DOMAIN_TAG
from lakebus_dagster.provision.bulk import LiveConnector, live_target, should_declare
from lakebus_dagster.defs.connector_fleet.resources import ConnectorSpecsResource
from lakebus_dagster.defs.guard import AUDITED, confirm_field, require_confirmation
from lakebus_dagster.defs.resources import BusLayoutResource, ConnectResource, KafkaResource
from lakebus_dagster.markdown import markdown_table
from lakebus_dagster.provision import outcomes_markdown
from lakebus_dagster.provision.outcome import ProvisioningError
from lakebus_dagster.provision.specs import reconcile_specs
from lakebus_dagster.provision.target_state_store import read_declared, record_declared

BULK_COLUMNS = ("connector", "owned", "state before", "declared before", "action", "state after", "declared after")


def unreachable(connect: ConnectResource, exc: ConnectError) -> dg.Failure:
    return dg.Failure(
        f"Kafka Connect at {connect.url} is unreachable ({type(exc).__name__}); nothing was changed", allow_retries=False
    )


class BulkConfig(dg.Config):
    connectors: str = Field(default=".*", description="regular expression selecting connectors by name (default: every connector)")
    reason: str = Field(default="", description="why (recorded with the declared state of the connectors lakebus owns)")
    wait_timeout_s: float = Field(default=DEFAULT_WAIT_S, description="deadline for each connector's resulting state")


def _owned(layout: BusLayout, specs: ConnectorSpecsResource, name: str, config: dict[str, str]) -> TargetState | None:
    """The declared default of a connector lakebus owns (None when lakebus does not own it)."""
    if name == layout.connector_name:
        return layout.connector_state
    for spec in specs.specs(layout):
        if spec.name == name and owned_by(config, layout):
            return spec.target_state
    return None


def _survey(client: ConnectClient, kafka: KafkaResource, layout: BusLayout, specs: ConnectorSpecsResource, pattern: str) -> list[LiveConnector]:
    try:
        selector = re.compile(pattern)
    except re.error as exc:
        raise dg.Failure(f"config.connectors {pattern!r} is not a regular expression: {exc}", allow_retries=False) from exc
    overview = client.list_connectors(expand_status=True, expand_info=True)
    recorded = read_declared(kafka.clients(), layout.state_topic.name)
    out = []
    for name, entry in sorted(overview.items()):
        if not selector.search(name):
            continue
        default = _owned(layout, specs, name, entry.info.config if entry.info else {})
        state = entry.status.state if entry.status else "UNKNOWN"
        out.append(LiveConnector(name, state, default is not None, recorded.get(name) if default is not None else None,
                                 default or TargetState.RUNNING))
    return out


def _bulk(
    context: dg.OpExecutionContext,
    config: BulkConfig,
    layout_res: BusLayoutResource,
    connect: ConnectResource,
    kafka: KafkaResource,
    specs: ConnectorSpecsResource,
    target: TargetState,
) -> None:
    layout = layout_res.layout()
    rows = []
    try:
        with connect.client() as client:
            for c in _survey(client, kafka, layout, specs, config.connectors):
                declared_after = c.declared_state
                if c.owned and should_declare(c, target, context.job_name):
                    record = DeclaredState.now(c.name, target, run_id=context.run_id, job=context.job_name, reason=config.reason)
                    record_declared(kafka.clients(), layout, record)
                    declared_after = target
                wanted = live_target(c, target, context.job_name)
                action = "unchanged"
                if wanted is not None and c.state != wanted.connect_state:
                    getattr(client, _VERBS[wanted])(c.name)
                    action = f"{_VERBS[wanted]} ({c.state} → {wanted.connect_state})"
                after = c.state
                if action != "unchanged":
                    after = client.wait_for_state(c.name, {wanted.connect_state}, timeout=config.wait_timeout_s, require_tasks=False).state
                rows.append({
                    "connector": c.name, "owned": "yes" if c.owned else "no", "state before": c.state,
                    "declared before": c.declared_state.connect_state if c.owned else "", "action": action,
                    "state after": after, "declared after": declared_after.connect_state if c.owned else "",
                })
    except ConnectUnavailable as exc:
        raise unreachable(connect, exc) from exc
    changed = sum(r["action"] != "unchanged" or r["declared before"] != r["declared after"] for r in rows)
    context.log.info(f"{context.job_name}: {len(rows)} connector(s) selected, {changed} changed")
    context.add_output_metadata({
        "connectors": dg.MetadataValue.md(markdown_table(rows, BULK_COLUMNS)),
        "selected": len(rows),
        "changed": changed,
        "outcome": "unchanged" if changed == 0 else "changed",
    })


_VERBS = {TargetState.PAUSED: "pause", TargetState.RUNNING: "resume", TargetState.STOPPED: "stop"}


def _bulk_op(name: str, target: TargetState, description: str):
    @dg.op(name=name, description=description)
    def _op(context: dg.OpExecutionContext, config: BulkConfig, layout: BusLayoutResource, connect: ConnectResource,
            kafka: KafkaResource, connector_specs: ConnectorSpecsResource):
        _bulk(context, config, layout, connect, kafka, connector_specs, target)

    return _op


class RestartFailedConfig(dg.Config):
    connectors: str = Field(default=".*", description="regular expression selecting connectors by name (default: every connector)")
    wait_timeout_s: float = Field(default=DEFAULT_WAIT_S, description="deadline for each restarted connector to be RUNNING")


@dg.op(description="Restart every FAILED connector instance and task (onlyFailed=true) and wait for RUNNING; "
       "a connector that fails again is listed, and the run fails naming it.")
def restart_failed_connectors_op(context: dg.OpExecutionContext, config: RestartFailedConfig, connect: ConnectResource):
    try:
        selector = re.compile(config.connectors)
    except re.error as exc:
        raise dg.Failure(f"config.connectors {config.connectors!r} is not a regular expression: {exc}", allow_retries=False) from exc
    rows, still_failed = [], []
    try:
        with connect.client() as client:
            overview = client.list_connectors(expand_status=True, expand_info=False)
            for name, entry in sorted(overview.items()):
                status = entry.status
                if not selector.search(name) or status is None:
                    continue
                failed = status.state == "FAILED" or bool(status.failed_tasks)
                row = {"connector": name, "before": status.describe(), "action": "unchanged", "after": status.describe()}
                if failed:
                    row["action"] = "restart (failed only)"
                    try:
                        after = client.restart_and_wait(name, include_tasks=True, only_failed=True, timeout=config.wait_timeout_s)
                        row["after"] = after.describe()
                    except ConnectError as exc:
                        if isinstance(exc, ConnectUnavailable):
                            raise
                        last = getattr(exc, "last_status", None)
                        row["after"] = (last.describe() if last else "?") + " (failed again)"
                        still_failed.append(name)
                rows.append(row)
    except ConnectUnavailable as exc:
        raise unreachable(connect, exc) from exc
    restarted = sum(r["action"] != "unchanged" for r in rows)
    metadata = {"connectors": dg.MetadataValue.md(markdown_table(rows)), "restarted": restarted,
                "outcome": "unchanged" if restarted == 0 else "changed"}
    if still_failed:
        raise dg.Failure(f"failed again after a restart: {', '.join(still_failed)}", metadata=metadata, allow_retries=False)
    context.add_output_metadata(metadata)


PRUNE_CONFIRM = "the bus topic's name (the bus whose undeclared connectors are deleted)"
SOURCE_CONFIRM = "the source connector's name"  # ``confirm`` of the jobs that delete connectors or move offsets


class SpecsConfig(dg.Config):
    prune: bool = Field(default=False, description="delete connectors this bus declared earlier and no longer declares "
                        "(never a connector without this bus's lakebus.owner/lakebus.bus markers)")
    wait_timeout_s: float = Field(default=120.0, description="deadline for each connector's declared state")
    confirm: str = confirm_field(PRUNE_CONFIRM + " (only with prune=true)")


@dg.op(description="Reconcile the declared connector specs (file demo: FileStream source → topic → FileStream sink): "
       "topics, then validate → diff → PUT only on a difference → declared target state; prune only when asked.")
def provision_connector_specs_op(context: dg.OpExecutionContext, config: SpecsConfig, layout: BusLayoutResource,
                                 connect: ConnectResource, kafka: KafkaResource, connector_specs: ConnectorSpecsResource):
    bus = layout.layout()
    if config.prune:
        require_confirmation(context.job_name, config.confirm, bus.bus_topic.name, PRUNE_CONFIRM)
    specs = connector_specs.specs(bus)
    try:
        with connect.client() as client:
            recorded = read_declared(kafka.clients(), bus.state_topic.name)
            declared = {s.name: recorded[s.name].state for s in specs if s.name in recorded}
            outcomes = reconcile_specs(client, kafka.admin(), bus, specs, declared, prune=config.prune,
                                       wait_timeout_s=config.wait_timeout_s)
    except ConnectUnavailable as exc:
        raise unreachable(connect, exc) from exc
    except ProvisioningError as exc:
        raise dg.Failure(str(exc), allow_retries=False) from exc
    for o in outcomes:
        context.log.info(f"{o.kind} {o.name}: {o.action.value}{' — ' + o.details if o.details else ''}")
    metadata = {"outcomes": dg.MetadataValue.md(outcomes_markdown(outcomes)), "prune": config.prune,
                "specs": dg.MetadataValue.json([{"name": s.name, "class": s.connector_class, "target_state": s.target_state.value}
                                                for s in specs])}
    for o in outcomes:
        if o.diff_markdown:
            metadata[f"diff {o.kind} {o.name}"] = dg.MetadataValue.md(o.diff_markdown)
    context.add_output_metadata(metadata)


class StartPositionConfig(dg.Config):
    connector: str = Field(description="the source connector's name")
    offsets: list[dict] = Field(description="the new position in the connector's own KIP-875 format, e.g. for a FileStream "
                                "source [{\"partition\": {\"filename\": \"/path\"}, \"offset\": {\"position\": 42}}]")
    wait_timeout_s: float = Field(default=DEFAULT_WAIT_S, description="deadline for STOPPED and for the state afterwards")
    confirm: str = confirm_field(SOURCE_CONFIRM + " again")


@dg.op(description="Move a source connector's start position: check the offsets against the connector's own format "
       "(nothing changes if they do not fit), stop it, PATCH the offsets, bring it back to its declared state "
       "(or the state it had); before/after offsets in the metadata.")
def move_source_start_position_op(context: dg.OpExecutionContext, config: StartPositionConfig, layout: BusLayoutResource,
                                  connect: ConnectResource, kafka: KafkaResource, connector_specs: ConnectorSpecsResource):
    bus = layout.layout()
    name = config.connector
    require_confirmation(context.job_name, config.confirm, name, SOURCE_CONFIRM)
    try:
        with connect.client() as client:
            try:
                info = client.info(name)
            except ConnectorNotFound as exc:
                raise dg.Failure(f"connector {name!r} does not exist on Kafka Connect at {connect.url}; nothing was changed",
                                 allow_retries=False) from exc
            if info.type != "source":
                raise dg.Failure(f"connector {name!r} is a {info.type} connector; this job moves source connectors "
                                 "(sinks: set_connector_offsets); nothing was changed", allow_retries=False)
            before_offsets = client.get_offsets(name)
            try:
                offsets = validate_source_offsets(name, info.config.get("connector.class", ""), info.config, config.offsets, before_offsets)
            except OffsetFormatError as exc:
                raise dg.Failure(f"{exc}; nothing was changed", allow_retries=False) from exc
            before = client.status(name)
            default = _owned(bus, connector_specs, name, info.config)
            if default is not None:
                record = read_declared(kafka.clients(), bus.state_topic.name).get(name)
                back_to = record.state if record else default
            else:
                back_to = {"PAUSED": TargetState.PAUSED, "STOPPED": TargetState.STOPPED}.get(before.state, TargetState.RUNNING)
            if before.state != "STOPPED":
                client.stop(name)
            client.wait_for_state(name, {"STOPPED"}, timeout=config.wait_timeout_s, require_tasks=False)
            message = client.patch_offsets(name, offsets)
            after_offsets = client.get_offsets(name)
            if back_to is not TargetState.STOPPED:
                getattr(client, _VERBS[back_to])(name)
            after = client.wait_for_state(name, {back_to.connect_state}, timeout=config.wait_timeout_s,
                                          require_tasks=back_to is not TargetState.STOPPED)
    except ConnectUnavailable as exc:
        raise unreachable(connect, exc) from exc
    context.log.info(f"connector {name}: offsets {before_offsets} → {after_offsets}; {before.state} → {after.state}")
    context.add_output_metadata({
        "offsets_before": dg.MetadataValue.json(before_offsets),
        "offsets_after": dg.MetadataValue.json(after_offsets),
        "state_before": before.state,
        "state_after": after.state,
        "connect_message": message,
    })


def _job(name: str, op_def, description: str) -> dg.JobDefinition:
    @dg.job(name=name, description=description, tags={**DOMAIN_TAG, **AUDITED})
    def _j():
        op_def()

    return _j


FLEET_JOBS = [
    _job("pause_all_connectors", _bulk_op("pause_all_connectors_op", TargetState.PAUSED,
         "Pause every selected connector not already paused or stopped; owned connectors are declared paused first."),
         "Pause every connector of the Connect cluster (or those matching config.connectors); before/after per connector."),
    _job("resume_all_connectors", _bulk_op("resume_all_connectors_op", TargetState.RUNNING,
         "Resume connectors a bulk pause/stop parked and unowned paused/stopped ones; an operator's own declared pause/stop is kept."),
         "Resume what pause_all/stop_all parked (connectors lakebus owns stay as an operator declared them)."),
    _job("stop_all_connectors", _bulk_op("stop_all_connectors_op", TargetState.STOPPED,
         "Stop every selected connector (tasks shut down, configs kept); owned connectors are declared stopped first."),
         "Stop every connector of the Connect cluster (seed 003's stopAll); before/after per connector."),
    _job("restart_failed_connectors", restart_failed_connectors_op, "Restart every FAILED connector and task of the cluster and wait for RUNNING."),
    _job("provision_connector_specs", provision_connector_specs_op,
         "Create/update the declared connectors beyond the sink (the FileStream file demo); prune=true deletes undeclared "
         "ones lakebus created and needs config.confirm = the bus topic's name."),
    _job("move_source_start_position", move_source_start_position_op,
         "Stop a source connector, set its offsets (its own format, checked first), bring it back; before/after offsets. "
         "Needs config.confirm = the connector's name."),
]
