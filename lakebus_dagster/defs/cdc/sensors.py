"""``cdc_current_state_sensor``: the current-state tables follow their change tables with nobody
launching anything. Every tick reads each declared change table's newest snapshot id from the
catalog; a table whose snapshot differs from the cursor's gets a run of its current-state asset
(``cdc_current_state``, that asset only), unless a run of it is still in flight — then the cursor
keeps the old id and a later tick asks again, so there is at most one run per table at a time.
The decision is :func:`decide` (pure: snapshots seen, cursor, tables in flight → requests, cursor).

A run that fails leaves the cursor moved: the next commit to the change table asks again, and the
MERGE reads every change past the current-state table's own watermark, so nothing is skipped."""

from __future__ import annotations

import json
from collections.abc import Mapping

import dagster as dg

from lakebus_dagster.defs.asset_keys import cdc_current_key
from lakebus_dagster.defs.cdc.resources import ChangeCaptureResource
from lakebus_dagster.defs.resources import IcebergCatalogResource

CDC_CURRENT_SENSOR = "cdc_current_state_sensor"
CDC_CURRENT_JOB = "cdc_current_state"
#: a run's tag naming the change table it follows (how the sensor finds a table's run in flight)
CHANGE_TABLE_TAG = "lakebus/cdc-change-table"
IN_FLIGHT = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
             dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]


def decide(seen: Mapping[str, int | None], cursor: Mapping[str, int], in_flight: set[str]) -> tuple[list[tuple[str, int]], dict[str, int]]:
    """(change table, snapshot id) to run for, and the new cursor: each table whose newest snapshot
    (None: no snapshot yet, nothing to follow) is not the cursor's and has no run in flight. A table
    no longer declared leaves the cursor."""
    requests, out = [], {t: s for t, s in cursor.items() if t in seen}
    for table, snapshot in sorted(seen.items()):
        if snapshot is None or cursor.get(table) == snapshot or table in in_flight:
            continue
        requests.append((table, snapshot))
        out[table] = snapshot
    return requests, out


def newest_snapshots(catalog, change_tables: list[str]) -> dict[str, int | None]:
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    out: dict[str, int | None] = {}
    for name in change_tables:
        try:
            snapshot = catalog.load_table(name).current_snapshot()
        except (NoSuchTableError, NoSuchNamespaceError):
            snapshot = None
        out[name] = snapshot.snapshot_id if snapshot is not None else None
    return out


@dg.sensor(
    name=CDC_CURRENT_SENSOR,
    job_name=CDC_CURRENT_JOB,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Keeps every current-state table fresh: a change table's new snapshot (read from the catalog) requests "
    "one run of its current-state asset; at most one run per table in flight.",
)
def cdc_current_state_sensor(context: dg.SensorEvaluationContext, capture: ChangeCaptureResource,
                             iceberg: IcebergCatalogResource):
    if not capture.enabled:
        return dg.SkipReason("change capture is off (LAKEBUS_POSTGRES is not 'on'): no change table to follow")
    keys = {spec.change_table(t): cdc_current_key(spec.schema, t) for spec in capture.specs() for t in spec.tables}
    seen = newest_snapshots(iceberg.load(), list(keys))
    runs = context.instance.get_runs(dg.RunsFilter(job_name=CDC_CURRENT_JOB, statuses=IN_FLIGHT))
    in_flight = {run.tags[CHANGE_TABLE_TAG] for run in runs if CHANGE_TABLE_TAG in run.tags}
    requests, cursor = decide(seen, json.loads(context.cursor or "{}"), in_flight)
    context.update_cursor(json.dumps(cursor, sort_keys=True))
    if not requests:
        waiting = sorted(in_flight & set(keys))
        return dg.SkipReason("no change table got a new snapshot" + (f"; in flight: {', '.join(waiting)}" if waiting else ""))
    return [dg.RunRequest(run_key=f"{table}@{snapshot}", asset_selection=[keys[table]], tags={CHANGE_TABLE_TAG: table})
            for table, snapshot in requests]
