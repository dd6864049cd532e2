"""Which connectors beyond the sink this deployment declares (the file demo of seed 003, for now), and how a
rolling restart restarts one Connect worker."""

from __future__ import annotations

import sys

import dagster as dg
from pydantic import Field

from lakebus_dagster.bus.connector_specs import ConnectorSpec, file_demo
from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.connect.restarters import CommandRestarter
from lakebus_dagster.settings import Settings


class ConnectorSpecsResource(dg.ConfigurableResource):
    """The declared connector specs. ``file_demo_dir`` is a directory on the Connect worker's machine
    (locally: ``<state_dir>/file-demo``); the demo's names carry the bus's suffix."""

    file_demo: bool = Field(default=True, description="declare the FileStream source → topic → FileStream sink demo")
    file_demo_dir: str = Field(description="where the demo's input.txt / output.txt live (on the Connect worker's machine)")

    def specs(self, layout: BusLayout) -> list[ConnectorSpec]:
        return file_demo(layout, self.file_demo_dir).specs() if self.file_demo else []


class WorkerRestartResource(dg.ConfigurableResource):
    """How ``rolling_restart_connect`` restarts one Connect worker: a command template
    (:class:`~lakebus_dagster.connect.restarters.CommandRestarter`: ``{url}``, ``{host}``, ``{port}``,
    ``{number}`` filled in per worker). Empty (production's default) means the platform owns the
    workers: the job refuses with what to do instead (Strimzi rolls its pods itself)."""

    command: list[str] = Field(default_factory=list, description="argv restarting one worker and returning once it "
                               "was started again, e.g. [\"kubectl\", \"delete\", \"pod\", \"{host}\"]; empty = refuse")
    timeout_s: float = Field(default=300.0, description="deadline for the command itself")

    @classmethod
    def from_settings(cls, settings: Settings) -> WorkerRestartResource:
        """The local stack's worker restart (its process manager) when the Connect URLs are the stack's
        own workers; else none: a deployment's workers belong to its platform (the job says what to do)."""
        if settings.connect.urls != settings.local_connect_urls:
            return cls()
        return cls(command=[sys.executable, "-m", "lakebus_dagster.stack", "restart-worker", "{url}"])

    def restarter(self) -> CommandRestarter:
        """The configured restarter; raises ``ValueError`` with :data:`PLATFORM_ADVICE` when none is."""
        return CommandRestarter(self.command, self.timeout_s)
