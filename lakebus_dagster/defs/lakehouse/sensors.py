"""lake_incident_sensor: one alert per lake incident — a failed DWS run, a failing DWS check on a
partition, a stale ODS table — and one recovery notice when it clears.

Each tick reads what finished since its watermarks, from the instance only (no service is called):

* DWS runs: the DWS jobs' runs and the runs of Dagster's implicit asset job (``__ASSET_JOB``:
  declarative automation, a backfill or a materialization from the UI) that selected DWS assets,
  FAILURE or SUCCESS, ended after the last one applied. Incident ``dws:<job>:<partition or range>``:
  it opens on the first failed attempt (retries, ``dagster/root_run_id``, fail inside it) and
  closes when later successful runs covered its partitions and built the tables that failed.
* DWS checks (partitioned, non-blocking: a failing one never fails its run): the latest evaluation
  per check and partition, for every evaluation newer than the last storage id seen. Incident
  ``check:<asset>:<check>:<partition or range>`` (a single-run backfill checks its range at once);
  the next passing evaluation covering it closes it.
* ODS ``freshness_check``: failed opens ``fresh:<asset>``, passed closes it (a table not created yet
  fails it too, and is not stale: no news).

The book (:class:`~lakebus_dagster.monitor.lake_incidents.LakeState`) lives in the cursor. An alert
that cannot be delivered fails the tick: nothing of it is saved, so the next tick sees the same
outcomes again and sends the same alerts (an alert the failing tick did deliver before the failure
may be sent twice; none is lost). Every delivered alert is an observation of ``lakebus/alerts``.
A failure older than :data:`LOOKBACK_S` (a first tick on an old instance) opens no incident.

What it reads and how: :mod:`lakebus_dagster.defs.lakehouse.lake_outcomes`.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from lakebus_dagster.defs.clock import ClockResource
from lakebus_dagster.defs.alerts import AlertDeliveryError, AlertResource, alert_observations, deliver_pending
from lakebus_dagster.defs.lakehouse.lake_outcomes import DWS_CHECKS, FRESHNESS_CHECK, LOOKBACK_S, check_outcomes, run_outcomes
from lakebus_dagster.monitor.lake_incidents import LakeState, lake_alerts

LAKE_INCIDENT_SENSOR = "lake_incident_sensor"
LAKE_SENSOR_INTERVAL_S = 60


# -- the sensor -----------------------------------------------------------------------------------
def lake_incident_sensor(dws_job_names: Sequence[str], dws_asset_keys: Sequence[dg.AssetKey],
                         ods_asset_keys: Sequence[dg.AssetKey]) -> dg.SensorDefinition:
    """The sensor over the DWS jobs ``dws_job_names``, the DWS assets (their three partition checks)
    and the ODS assets (their freshness checks)."""
    jobs, dws, ods = tuple(dws_job_names), frozenset(dws_asset_keys), frozenset(ods_asset_keys)
    check_keys = [dg.AssetCheckKey(k, name) for k in sorted(dws, key=str) for name in DWS_CHECKS]
    check_keys += [dg.AssetCheckKey(k, FRESHNESS_CHECK) for k in sorted(ods, key=str)]

    @dg.sensor(
        name=LAKE_INCIDENT_SENSOR,
        minimum_interval_seconds=LAKE_SENSOR_INTERVAL_S,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Every minute: one alert per lake incident — a failed DWS run (schedules, automation, backfills), "
        "a failing DWS check on a partition, a stale ODS table — and one recovery notice when a later run or "
        "evaluation passes.",
    )
    def _lake_incidents(context: dg.SensorEvaluationContext, alerts: AlertResource, clock: ClockResource):
        state = LakeState.from_cursor(context.cursor)
        now = clock.now()
        runs, state.runs_after = run_outcomes(context.instance, jobs, dws,
                                              state.runs_after if state.runs_after is not None else now - LOOKBACK_S)
        checks, state.checks_after = check_outcomes(context.instance, check_keys, ods, state.checks_after, now)
        delivered, undelivered = deliver_pending(lake_alerts(state, [*runs, *checks], now), alerts, context.log)
        if undelivered:  # nothing of this tick is kept: the next one sees the same outcomes and sends them again
            raise AlertDeliveryError(f"{len(undelivered)} lake alert(s) not delivered ({len(delivered)} sent): "
                                     + "; ".join(a["title"][:100] for a in undelivered))
        fresh = sum(o.family.startswith("fresh:") for o in checks)
        seen = f"saw {len(runs)} DWS run outcome(s), {len(checks) - fresh} DWS check result(s), {fresh} freshness result(s)"
        told = "; ".join(f"{a['kind']}: {a['title'][:120]}" for a in delivered)
        return dg.SensorResult(
            skip_reason=dg.SkipReason(f"{seen}; {f'sent {len(delivered)} alert(s) ({told})' if delivered else 'no change'}; "
                                      f"open incidents: {', '.join(sorted(state.scopes)) or 'none'}"),
            asset_events=alert_observations(delivered), cursor=state.to_cursor())

    return _lake_incidents
