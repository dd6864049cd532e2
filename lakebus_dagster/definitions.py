"""The lakebus code location: every domain's definitions merged with the shared resources."""

from __future__ import annotations

import dagster as dg

from lakebus_dagster.defs import connectors, events, lakehouse, monitoring, provisioning
from lakebus_dagster.defs import ledger
from lakebus_dagster.defs import cluster, inventory
from lakebus_dagster.defs.resources import build_resources

defs = dg.Definitions.merge(
    dg.Definitions(resources=build_resources()),
    provisioning.defs,
    connectors.defs,
    events.defs,
    monitoring.defs,
    lakehouse.defs,
    ledger.defs,
    cluster.defs,
    inventory.defs,
)
