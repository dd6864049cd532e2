"""Connectors other than the Iceberg sink, declared as code next to the bus layout (seed 002's
"standard connector configs kept as code").

A :class:`ConnectorSpec` is a connector class, its config and its declared target state — the same
three things the sink is made of — and is reconciled by the same validate → diff → PUT-on-difference
path (:func:`lakebus_dagster.provision.connector.reconcile_connector`).

**Ownership.** Every spec's config carries two marker keys, :data:`OWNER_KEY` and :data:`BUS_KEY`
(Connect stores unknown keys untouched and connectors ignore them). Prune mode deletes a live
connector only when it carries *both* markers with this bus's values and its name is no longer
declared, so lakebus never deletes a connector somebody else created, nor one another bus (a test
run's suffixed bus, another environment) declared.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lakebus_dagster.bus.layout import BusLayout, LayoutError, TopicSpec
from lakebus_dagster.bus.target_state import TargetState, TargetStateError

FILE_SOURCE_CLASS = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK_CLASS = "org.apache.kafka.connect.file.FileStreamSinkConnector"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"

#: config key marking a connector as declared by lakebus
OWNER_KEY = "lakebus.owner"
OWNER_VALUE = "lakebus"
#: config key naming the bus (its bus topic) whose declaration holds the connector
BUS_KEY = "lakebus.bus"

_NAME = re.compile(r"^[A-Za-z0-9._-]{1,200}$")


@dataclass(frozen=True)
class ConnectorSpec:
    """One declared connector: name, class, config (strings, no secrets) and target state.

    ``topics`` are the topics the connector needs; provisioning creates them before the connector.
    ``files`` are local paths the connector reads or writes (the FileStream demo), created empty by
    provisioning when missing — only meaningful when the Connect worker runs on this machine.
    """

    name: str
    connector_class: str
    config: Mapping[str, str]
    target_state: TargetState = TargetState.RUNNING
    topics: tuple[TopicSpec, ...] = ()
    files: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise LayoutError(f"connector spec name {self.name!r} is not a valid connector name")
        try:
            object.__setattr__(self, "target_state", TargetState.parse(self.target_state, where=f"connector spec {self.name!r}"))
        except TargetStateError as exc:
            raise LayoutError(str(exc)) from exc
        reserved = sorted({"connector.class", "name", OWNER_KEY, BUS_KEY} & set(self.config))
        if reserved:
            raise LayoutError(f"connector spec {self.name!r}: config must not set {', '.join(reserved)} (lakebus sets them)")

    def desired_config(self, layout: BusLayout) -> dict[str, str]:
        """The config as Connect stores it: class, the spec's keys, and the two ownership markers."""
        return {
            "connector.class": self.connector_class,
            **{k: str(v) for k, v in self.config.items()},
            OWNER_KEY: OWNER_VALUE,
            BUS_KEY: layout.bus_topic.name,
        }


def owned_by(config: Mapping[str, str], layout: BusLayout) -> bool:
    """True when a live connector's config says this bus's declaration created it."""
    return config.get(OWNER_KEY) == OWNER_VALUE and config.get(BUS_KEY) == layout.bus_topic.name


@dataclass(frozen=True)
class FileDemo:
    """Seed 003's demo: a file → topic (FileStreamSource) → file (FileStreamSink) pipeline.

    Lines pass as plain strings (``StringConverter`` on both sides), so the output file holds
    exactly the input's lines. The source's offset is ``{"position": <characters read>}`` for
    partition ``{"filename": <input file>}`` (equal to bytes for ASCII text).
    """

    directory: Path
    suffix: str = ""

    def _name(self, base: str) -> str:
        return f"{base}-{self.suffix}" if self.suffix else base

    @property
    def topic(self) -> TopicSpec:
        return TopicSpec(self._name("file-demo-lines"), partitions=1)

    @property
    def source_name(self) -> str:
        return self._name("file-demo-source")

    @property
    def sink_name(self) -> str:
        return self._name("file-demo-sink")

    @property
    def input_file(self) -> Path:
        return self.directory / "input.txt"

    @property
    def output_file(self) -> Path:
        return self.directory / "output.txt"

    def specs(self) -> list[ConnectorSpec]:
        strings = {"key.converter": STRING_CONVERTER, "value.converter": STRING_CONVERTER}
        source = ConnectorSpec(
            self.source_name,
            FILE_SOURCE_CLASS,
            {"tasks.max": "1", "file": str(self.input_file), "topic": self.topic.name, **strings},
            topics=(self.topic,),
            files=(str(self.input_file),),
        )
        sink = ConnectorSpec(
            self.sink_name,
            FILE_SINK_CLASS,
            {"tasks.max": "1", "file": str(self.output_file), "topics": self.topic.name, **strings},
            topics=(self.topic,),
        )
        return [source, sink]


def file_demo(layout: BusLayout, directory: str | Path) -> FileDemo:
    """The file demo of ``layout``'s bus: names carry the bus's suffix (what follows ``events``)."""
    base = "events"
    suffix = layout.bus_topic.name[len(base) + 1:] if layout.bus_topic.name.startswith(base + "-") else ""
    return FileDemo(Path(directory), suffix)
