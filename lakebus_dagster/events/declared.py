"""Models for the event types a deployment declares in its config file (``events:``,
:mod:`lakebus_dagster.event_declaration`), registered beside the built-in ones.

Why a generated dataclass: the registry, the schema reflection, the encoder and the sink's guard
all work from a model class. A declared event becomes the same kind of class a developer would
write (a frozen, slotted :class:`~.models.EventBase` subclass, every own field optional), so nothing
downstream knows the difference.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from lakebus_dagster.event_declaration import DeclaredEvent, decimal_spec

from .errors import SchemaError
from .models import EventBase
from .types import ConnectType, Float32, Int32, Timestamp, decimal

#: a declared field's Connect type -> the annotation the schema reflection maps back to it
_ANNOTATIONS = {
    ConnectType.INT32: Int32,
    ConnectType.INT64: int,
    ConnectType.FLOAT32: Float32,
    ConnectType.FLOAT64: float,
    ConnectType.STRING: str,
    ConnectType.BOOLEAN: bool,
    ConnectType.TIMESTAMP: Timestamp,
}


def _annotation(kind: str):
    digits = decimal_spec(kind)
    return decimal(*digits) if digits is not None else _ANNOTATIONS[ConnectType(kind)]


def event_model(declared: DeclaredEvent) -> type[EventBase]:
    """The dataclass of a declared event: ``withdrawal`` -> ``Withdrawal(EventBase)``."""
    name = "".join(part.capitalize() for part in declared.name.split("_"))
    fields = [(field, _annotation(kind) | None, dataclasses.field(default=None))
              for field, kind in declared.fields]
    model = dataclasses.make_dataclass(name, fields, bases=(EventBase,), frozen=True, slots=True, kw_only=True,
                                       namespace={"__module__": __name__})
    return model


def register_declared(registry, declared: Iterable[DeclaredEvent], where: str = "events") -> None:
    """Register each declared event as version 1 in ``registry``; an event the code already
    registers is refused, naming the file's key (a declaration cannot redefine ``bet``)."""
    for event in declared:
        if event.name in registry.events():
            raise SchemaError(f"{where}: events.{event.name} is already an event of lakebus "
                              f"(registered: {', '.join(registry.events())}); declare another name")
        registry.register(event.name, event_model(event))


def register_configured(registry) -> None:
    """The events declared in the deployment's config file (LAKEBUS_CONFIG, else ./lakebus.yaml), if
    any. A file that cannot be read adds none here: the settings load reports its problems."""
    from lakebus_dagster.config_file import ConfigFileError, parsed

    try:
        loaded = parsed()
    except ConfigFileError:
        return
    if loaded is not None:
        register_declared(registry, loaded.events, where=str(loaded.path))
