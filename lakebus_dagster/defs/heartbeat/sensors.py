"""heartbeat_sensor: the dead-man's switch of the Dagster daemon.

Every alert of lakebus is sent by a sensor the daemon evaluates, so a dead daemon (or a code location
that no longer loads) is silence. While both are alive the sensor pings an external URL
(``LAKEBUS_HEARTBEAT_URL``) at most every ``LAKEBUS_HEARTBEAT_INTERVAL_MINUTES``; the team's own
monitoring (a healthchecks-style check) alerts when the pings stop.

"Healthy" here means exactly that: the daemon runs, evaluates this sensor, and the code location
loads with its resources. Incidents of the bus itself are the status sensor's alerts, not this one's.

A failed ping is logged as a warning and is the tick's skip reason (naming the URL); the next tick
tries again. It never raises, so a broken monitoring endpoint cannot make the sensor crash-loop.
"""

from __future__ import annotations

import dagster as dg

from lakebus_dagster.defs.clock import ClockResource
from lakebus_dagster.defs.heartbeat.resources import INTERVAL_VAR, URL_VAR, HeartbeatError, HeartbeatResource, shown_url

#: how often the daemon evaluates the sensor; the ping interval (minutes) is the resource's
HEARTBEAT_SENSOR_INTERVAL_S = 60


def _last_ping(cursor: str | None) -> float | None:
    try:
        return float(cursor) if cursor else None
    except ValueError:  # a cursor from something else: ping now, then keep ours
        return None


@dg.sensor(minimum_interval_seconds=HEARTBEAT_SENSOR_INTERVAL_S, default_status=dg.DefaultSensorStatus.RUNNING,
           description="Pings LAKEBUS_HEARTBEAT_URL at most every LAKEBUS_HEARTBEAT_INTERVAL_MINUTES while the daemon "
                       "is alive: a dead-man's switch for the team's monitoring (off unless the URL is set).")
def heartbeat_sensor(context: dg.SensorEvaluationContext, heartbeat: HeartbeatResource,
                     clock: ClockResource) -> dg.SensorResult | dg.SkipReason:
    if not heartbeat.url:
        return dg.SkipReason(f"heartbeat off: set {URL_VAR} (e.g. a healthchecks ping URL) in the daemon's "
                             f"environment to have it pinged every {heartbeat.interval_minutes} min ({INTERVAL_VAR})")
    now = clock.now()
    last = _last_ping(context.cursor)
    interval_s = heartbeat.interval_minutes * 60
    if last is not None and now - last < interval_s:
        return dg.SkipReason(f"heartbeat sent {now - last:.0f} s ago to {shown_url(heartbeat.url)}; "
                             f"next in {interval_s - (now - last):.0f} s")
    try:
        status = heartbeat.ping()
    except HeartbeatError as exc:
        context.log.warning(f"{exc}; the next tick tries again (runbook: docs/runbooks/dagster-daemon-down.md)")
        return dg.SkipReason(f"{exc}; retrying next tick")
    context.log.info(f"heartbeat sent to {shown_url(heartbeat.url)} (HTTP {status})")
    return dg.SensorResult(cursor=str(now), skip_reason=f"heartbeat sent to {shown_url(heartbeat.url)} (HTTP {status})")
