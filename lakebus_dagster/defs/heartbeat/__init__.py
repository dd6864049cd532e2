"""Heartbeat: the daemon's dead-man's switch (an external URL pinged while the daemon is alive)."""

import dagster as dg

from lakebus_dagster.defs.heartbeat.resources import HeartbeatResource, heartbeat_resource
from lakebus_dagster.defs.heartbeat.sensors import heartbeat_sensor


def build_defs(resource: HeartbeatResource | None = None) -> dg.Definitions:
    """The heartbeat sensor with the deployment's heartbeat resource (read from the environment and
    the config file when not given)."""
    return dg.Definitions(sensors=[heartbeat_sensor], resources={"heartbeat": resource or heartbeat_resource()})


__all__ = ["HeartbeatResource", "build_defs", "heartbeat_resource", "heartbeat_sensor"]
