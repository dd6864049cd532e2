"""Jobs over the whole fleet of connectors in one Connect deployment: bulk pause/resume/stop/restart,
a rolling restart of the workers (a new plugin), the declared connector specs, a source's start position.

Named ``connector_fleet`` (not ``cluster``) because "cluster" is the 3-broker stack profile
(``LAKEBUS_PROFILE=cluster``); the jobs keep their names and the ``connect-cluster`` domain tag (issue 22)."""

import dagster as dg

from lakebus_dagster.defs.connector_fleet.jobs import FLEET_JOBS
from lakebus_dagster.defs.connector_fleet.rolling_restart import rolling_restart_connect

defs = dg.Definitions(jobs=[*FLEET_JOBS, rolling_restart_connect])
