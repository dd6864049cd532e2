"""The bus as a catalog: topic inventory with schemas (+ change alerts), the Connect cluster view, and
their publication to the team's DataHub."""

import dagster as dg

from lakebus_dagster.defs.inventory.assets import connect_cluster, topic_inventory
from lakebus_dagster.defs.inventory.datahub import datahub_resource, publish_to_datahub
from lakebus_dagster.defs.inventory.jobs import observe_bus_inventory
from lakebus_dagster.defs.inventory.resources import TopicInventoryResource
from lakebus_dagster.defs.inventory.sensors import topic_inventory_sensor

defs = dg.Definitions(
    assets=[topic_inventory, connect_cluster],
    sensors=[topic_inventory_sensor],
    jobs=[observe_bus_inventory, publish_to_datahub],
    resources={"topic_inventory": TopicInventoryResource(), "datahub": datahub_resource()},
)
