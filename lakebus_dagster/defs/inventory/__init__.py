"""The bus as a catalog: topic inventory with schemas (+ change alerts) and the Connect cluster view."""

import dagster as dg

from lakebus_dagster.defs.inventory.assets import connect_cluster, topic_inventory
from lakebus_dagster.defs.inventory.jobs import observe_bus_inventory
from lakebus_dagster.defs.inventory.resources import TopicInventoryResource
from lakebus_dagster.defs.inventory.sensors import topic_inventory_sensor

defs = dg.Definitions(
    assets=[topic_inventory, connect_cluster],
    sensors=[topic_inventory_sensor],
    jobs=[observe_bus_inventory],
    resources={"topic_inventory": TopicInventoryResource()},
)
