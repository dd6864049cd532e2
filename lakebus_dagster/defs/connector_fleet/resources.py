"""Which connectors beyond the sink this deployment declares (the file demo of seed 003, for now)."""

from __future__ import annotations

import dagster as dg
from pydantic import Field

from lakebus_dagster.bus.connector_specs import ConnectorSpec, file_demo
from lakebus_dagster.bus.layout import BusLayout


class ConnectorSpecsResource(dg.ConfigurableResource):
    """The declared connector specs. ``file_demo_dir`` is a directory on the Connect worker's machine
    (locally: ``<state_dir>/file-demo``); the demo's names carry the bus's suffix."""

    file_demo: bool = Field(default=True, description="declare the FileStream source → topic → FileStream sink demo")
    file_demo_dir: str = Field(description="where the demo's input.txt / output.txt live (on the Connect worker's machine)")

    def specs(self, layout: BusLayout) -> list[ConnectorSpec]:
        return file_demo(layout, self.file_demo_dir).specs() if self.file_demo else []
