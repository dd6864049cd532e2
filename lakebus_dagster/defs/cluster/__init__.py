"""The Connect cluster as a whole: bulk pause/resume/stop/restart, declared connector specs, source start positions."""

import dagster as dg

from lakebus_dagster.defs.cluster.jobs import CLUSTER_JOBS

defs = dg.Definitions(jobs=CLUSTER_JOBS)
