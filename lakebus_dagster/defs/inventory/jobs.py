"""One job to observe the inventory assets on demand (the UI's "Observe" does the same per asset)."""

import dagster as dg

from lakebus_dagster.defs.asset_keys import CONNECT_CLUSTER_KEY, TOPIC_INVENTORY_KEY

observe_bus_inventory = dg.define_asset_job(
    "observe_bus_inventory",
    selection=dg.AssetSelection.assets(TOPIC_INVENTORY_KEY, CONNECT_CLUSTER_KEY),
    description="Observe the topic inventory (topics, configs, rates, consumer lag, schemas) and the Connect cluster view.",
    tags={"domain": "inventory"},
)
