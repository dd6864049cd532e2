"""``rolling_restart_connect``: bring a new plugin into a running Connect cluster, one worker at a time.

Connect has no ``/plugin/reload`` (seed 003's gateway has one): a worker loads plugins when it
starts. The job runs :class:`~lakebus_dagster.connect.rolling.Roll` — refuse on an unhealthy cluster,
restart one worker, wait until it answers and lists the plugin, wait until the tasks settle, next —
through the deployment's :class:`WorkerRestartResource` (locally the stack's process manager; where the
platform owns the workers, a refusal saying what to do). A rerun on a cluster that already has the
plugin rolls again, safely; ``only_if_missing`` skips it instead, with the reason.
"""

import dagster as dg
from pydantic import Field

from lakebus_dagster.connect import ConnectUnavailable
from lakebus_dagster.connect.rolling import Roll, RollPlan, RollRefused, RollStopped
from lakebus_dagster.connect.worker_probe import RestCluster
from lakebus_dagster.defs.connector_fleet.constants import DOMAIN_TAG
from lakebus_dagster.defs.connector_fleet.resources import WorkerRestartResource
from lakebus_dagster.defs.guard import AUDITED
from lakebus_dagster.defs.resources import ConnectResource
from lakebus_dagster.markdown import markdown_table


class RollingRestartConfig(dg.Config):
    plugins: list[str] = Field(default_factory=list, description="plugin classes every restarted worker must list "
                               "afterwards (GET /connector-plugins on that worker), e.g. the new connector's class")
    only_if_missing: bool = Field(default=False, description="skip the roll when every worker already lists every plugin")
    worker_deadline_s: float = Field(default=300.0, description="deadline for a restarted worker to answer and list the plugins")
    settle_s: float = Field(default=20.0, description="how long the placement of every task must hold still after a restart")
    settle_deadline_s: float = Field(default=300.0, description="deadline for the tasks to settle after a restart")


@dg.op(description="Restart the Connect workers one at a time: refuse on an unhealthy cluster or a silent worker; after "
       "each restart wait until the worker answers and lists the plugins, then until every task is RUNNING and unmoved "
       "for settle_s; stop (never restarting the next) when a worker does not come back. Per worker: seconds down, "
       "tasks moved, plugins before/after.")
def rolling_restart_connect_op(context: dg.OpExecutionContext, config: RollingRestartConfig, connect: ConnectResource,
                               worker_restart: WorkerRestartResource):
    try:
        restarter = worker_restart.restarter()
    except ValueError as exc:
        raise dg.Failure(f"rolling restart of the Connect workers at {connect.url} refused: {exc}", allow_retries=False) from exc
    plan = RollPlan(urls=connect.urls, plugins=tuple(config.plugins), worker_deadline_s=config.worker_deadline_s,
                    settle_s=config.settle_s, settle_deadline_s=config.settle_deadline_s, only_if_missing=config.only_if_missing)
    try:
        with connect.client() as client:
            report = Roll(plan, RestCluster(client, connect.auth()), restarter, log=context.log.info).run()
    except RollRefused as exc:
        raise dg.Failure(f"rolling restart refused: {exc}", allow_retries=False) from exc
    except RollStopped as exc:
        raise dg.Failure(f"rolling restart stopped: {exc}", allow_retries=False,
                         metadata={"rolled": dg.MetadataValue.md(markdown_table([w.row() for w in exc.done])),
                                   "workers_rolled": len(exc.done)}) from exc
    except ConnectUnavailable as exc:
        raise dg.Failure(f"Kafka Connect at {connect.url} is unreachable ({exc}); the roll stopped", allow_retries=False) from exc
    rows = [w.row() for w in report.workers]
    context.add_output_metadata({
        "workers": dg.MetadataValue.md(markdown_table(rows)) if rows else dg.MetadataValue.text("none restarted"),
        "workers_rolled": len(rows),
        "seconds_down": dg.MetadataValue.json({w.worker: round(w.down_s, 1) for w in report.workers}),
        "tasks_moved": sum(w.tasks_moved for w in report.workers),
        "plugins_added": dg.MetadataValue.json(sorted({p for w in report.workers for p in w.added})),
        "plugins_expected": dg.MetadataValue.json(list(config.plugins)),
        "outcome": "skipped" if report.skipped else "rolled",
        **({"skipped_because": report.skipped} if report.skipped else {}),
        "restarter": restarter.describe(),
    })


@dg.job(name="rolling_restart_connect", tags={**DOMAIN_TAG, **AUDITED},
        description="Bring a new plugin into the running Connect cluster: restart its workers one at a time, each once the "
        "tasks have settled (Connect has no plugin reload); refuses on an unhealthy cluster.")
def rolling_restart_connect():
    rolling_restart_connect_op()
