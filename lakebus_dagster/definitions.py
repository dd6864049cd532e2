"""The lakebus code location: every domain's definitions merged with the shared resources."""

from __future__ import annotations

import dagster as dg

from lakebus_dagster.defs import connectors, events, lakehouse, monitoring, provisioning
from lakebus_dagster.defs import ledger, recovery
from lakebus_dagster.defs import cdc, connector_fleet, inventory
from lakebus_dagster.defs import audit, heartbeat
from lakebus_dagster.defs.monitoring.policy import monitoring_policy
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.settings import Settings, load_settings

#: the code location's one configuration load (environment > LAKEBUS_CONFIG's file > defaults):
#: every resource and the monitoring policy are built from it
settings = load_settings()


def build_definitions(settings: Settings) -> dg.Definitions:
    """The code location of a deployment's settings: the shared resources and every domain's
    definitions (a domain's optional parts only when its settings switch them on)."""
    return dg.Definitions.merge(
        # Every job runs its steps in the run's own process. lakebus's steps are clients (of Kafka,
        # Connect, the catalog, the Spark Connect server) doing seconds of work; a process per step cost
        # 10-20 s of imports each on the reference machine (provision_lakebus: 3 steps of ~1 s in a
        # 48 s run). A job that needs isolation sets its own executor_def.
        dg.Definitions(resources={**build_resources(settings), "monitoring_policy": monitoring_policy(settings)},
                       executor=dg.in_process_executor),
        provisioning.defs,
        connectors.defs,
        events.defs,
        monitoring.defs,
        lakehouse.build_lakehouse(settings).definitions(),
        ledger.defs,
        recovery.defs,
        connector_fleet.defs,
        inventory.defs,
        cdc.build_defs(settings),
        heartbeat.build_defs(),
        audit.defs,
    )


defs = build_definitions(settings)
