"""Connect struct schemas derived from event models, and the rules for evolving them.

The sink runs ``JsonConverter`` with ``schemas.enable=true``, so every record carries its schema
and the Iceberg sink creates/evolves the table from it. The evolution rules here mirror what the
sink can do to a live table: it can *add* nullable columns, but cannot drop a column, change its
type or make it required - a version that tried would either fail the connector task or leave old
rows unreadable, so such versions are refused at registration.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import dataclass
from typing import Any

from .errors import SchemaError
from .models import EventBase
from .types import (
    DECIMAL_LOGICAL,
    DECIMAL_PRECISION_PARAMETER,
    TIMESTAMP_LOGICAL,
    ConnectType,
    DecimalSpec,
    resolve_annotation,
)


@dataclass(frozen=True)
class ConnectField:
    name: str
    type: ConnectType
    optional: bool
    #: a ``DECIMAL`` field's precision and scale (None for every other type)
    decimal: DecimalSpec | None = None

    @property
    def type_name(self) -> str:
        """``int32``, ``double``, ``decimal(18,2)``, ``timestamp``: the type as messages name it."""
        return str(self.decimal) if self.decimal is not None else self.type.value

    def to_json(self) -> dict[str, Any]:
        """The Connect JSON form; ``optional`` is omitted when false, as in the Go output.

        The logical types are written as Connect's ``JsonConverter`` writes them: a ``Decimal`` is
        ``bytes`` named ``org.apache.kafka.connect.data.Decimal`` with its ``scale`` (and precision)
        parameters, a ``Timestamp`` is ``int64`` named ``org.apache.kafka.connect.data.Timestamp``.
        """
        doc: dict[str, Any] = {"field": self.name}
        if self.type is ConnectType.DECIMAL:
            assert self.decimal is not None, f"{self.name}: a decimal field has a spec"
            doc |= {"type": "bytes", "name": DECIMAL_LOGICAL, "version": 1,
                    "parameters": {"scale": str(self.decimal.scale),
                                   DECIMAL_PRECISION_PARAMETER: str(self.decimal.precision)}}
        elif self.type is ConnectType.TIMESTAMP:
            doc |= {"type": "int64", "name": TIMESTAMP_LOGICAL, "version": 1}
        else:
            doc["type"] = self.type.value
        if self.optional:
            doc["optional"] = True
        return doc


@dataclass(frozen=True)
class ConnectSchema:
    name: str
    fields: tuple[ConnectField, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "struct",
            "name": self.name,
            "fields": [f.to_json() for f in self.fields],
        }

    def field(self, name: str) -> ConnectField | None:
        return next((f for f in self.fields if f.name == name), None)


def record_name(event: str) -> str:
    return f"{event}_record"


def _reflect(model: type, where: str) -> tuple[ConnectField, ...]:
    try:
        hints = typing.get_type_hints(model, include_extras=True)
    except Exception as exc:  # unresolved forward references, bad annotations
        raise SchemaError(f"{where}: cannot resolve type hints of {model.__name__}: {exc}") from exc
    result = []
    for f in dataclasses.fields(model):
        resolved = resolve_annotation(hints[f.name], where=f"{where}: field {model.__name__}.{f.name}")
        result.append(ConnectField(f.name, resolved.type, resolved.optional, resolved.decimal))
    return tuple(result)


@functools.cache
def _base_fields() -> tuple[ConnectField, ...]:
    return _reflect(EventBase, "EventBase")


def derive_schema(event: str, model: type) -> ConnectSchema:
    """Reflect ``model`` (an :class:`EventBase` dataclass) into the schema named ``<event>_record``.

    Base fields come first (dataclass field order), and their types must not be redeclared:
    every table shares them and the sink routes and partitions on them.
    """
    where = f"event {event!r}"
    if not (isinstance(model, type) and issubclass(model, EventBase) and model is not EventBase):
        raise SchemaError(
            f"{where}: model must be a dataclass subclass of EventBase, got {model!r}"
        )
    if "__dataclass_fields__" not in vars(model):
        # An undecorated subclass inherits the base's fields and its own annotations are ignored.
        raise SchemaError(f"{where}: {model.__name__} must itself be decorated with @dataclass")
    fields = _reflect(model, where)
    for expected, actual in zip(_base_fields(), fields):
        if expected != actual:
            raise SchemaError(
                f"{where}: field {model.__name__}.{actual.name} redeclares base field "
                f"{expected.name!r} ({expected.type_name}) as {actual.type_name}"
                f"{' optional' if actual.optional else ''}; base fields are shared by every table"
            )
    return ConnectSchema(record_name(event), fields)


def check_evolution(event: str, old: ConnectSchema, new: ConnectSchema) -> None:
    """Refuse ``new`` unless it is ``old`` plus at least one new optional field.

    All problems are reported at once so a model author fixes them in one go.
    """
    problems = []
    for before in old.fields:
        after = new.field(before.name)
        if after is None:
            problems.append(
                f"field {before.name!r} was removed: the Iceberg sink cannot drop a column and "
                "producers still on the old version keep sending it"
            )
        elif after.type is not before.type or after.decimal != before.decimal:
            problems.append(
                f"field {before.name!r} changes type {before.type_name} -> {after.type_name}: "
                "the Iceberg sink cannot change or narrow a column's type"
            )
        elif before.optional and not after.optional:
            problems.append(
                f"field {before.name!r} becomes required: existing rows and old producers have "
                "nulls in it, and the sink cannot make a nullable column required"
            )
        elif after.optional and not before.optional:
            problems.append(
                f"field {before.name!r} becomes optional: only adding optional fields is a "
                "compatible change; a required column stays required"
            )
    added = [f for f in new.fields if old.field(f.name) is None]
    for f in added:
        if not f.optional:
            problems.append(
                f"new field {f.name!r} must be optional: rows written by older versions have no "
                "value for it"
            )
    if not added:
        problems.append("a new version must add at least one optional field")
    if problems:
        raise SchemaError(f"event {event!r}: incompatible new version: " + "; ".join(problems))
