"""How much of the cluster the inventory reads: which topics, how many records, how long."""

import dagster as dg
from pydantic import Field

from lakebus_dagster.inventory.topics import InventoryBounds


class TopicInventoryResource(dg.ConfigurableResource):
    """Bounds of one inventory pass (the sensor runs it every minute, so it must stay cheap)."""

    include: str = Field(default=".*", description="regular expression: topics to inventory")
    exclude: str = Field(
        default=r"^_",
        description="regular expression: topics to leave out; default: internal topics (Kafka's __consumer_offsets, "
        "Connect's _connect-configs/-offsets/-status, whose content changes with every connector change)",
    )
    sample_per_partition: int = Field(default=50, ge=1, le=10_000, description="newest records read per partition for the schema")
    sample_time_s: float = Field(default=15.0, gt=0, le=120, description="wall-clock bound of the sampling")

    def bounds(self) -> InventoryBounds:
        return InventoryBounds(self.sample_per_partition, self.sample_time_s, self.include, self.exclude)
