"""Python type annotations -> Kafka Connect schema types.

Python has one ``int`` and one ``float``; Connect (and the Iceberg columns the sink creates from
it) distinguish widths. A plain ``int`` maps to ``int64`` because it is the only width that cannot
overflow silently; 32-bit columns are opted into with the :data:`Int32` marker, exactly where the
Go models used ``int32``. Anything else - nested models, lists, unions of two types - raises
:class:`SchemaError`: the Go ``BuildSchemaFromStruct`` skipped such fields, which meant columns that
quietly never reached the lake.
"""

from __future__ import annotations

import types
from enum import StrEnum
from typing import Annotated, Any, Union, get_args, get_origin

from .errors import SchemaError


class ConnectType(StrEnum):
    """The Connect primitive types the SDK emits (the ``type`` key of a schema field)."""

    INT32 = "int32"
    INT64 = "int64"
    FLOAT32 = "float"
    FLOAT64 = "double"
    STRING = "string"
    BOOLEAN = "boolean"


#: ``int`` stored as a Connect ``int32`` / Iceberg ``int`` column.
Int32 = Annotated[int, ConnectType.INT32]
#: ``float`` stored as a Connect ``float`` / Iceberg ``float`` column.
Float32 = Annotated[float, ConnectType.FLOAT32]

# Exact-identity lookups: ``bool`` must not fall through to ``int``.
_DEFAULTS: dict[type, ConnectType] = {
    bool: ConnectType.BOOLEAN,
    int: ConnectType.INT64,
    float: ConnectType.FLOAT64,
    str: ConnectType.STRING,
}
_PYTHON_TYPE: dict[ConnectType, type] = {
    ConnectType.INT32: int,
    ConnectType.INT64: int,
    ConnectType.FLOAT32: float,
    ConnectType.FLOAT64: float,
    ConnectType.STRING: str,
    ConnectType.BOOLEAN: bool,
}
_SUPPORTED = "bool, int, float, str, Int32, Float32, optionally wrapped in Optional[...] / `| None`"


def resolve_annotation(annotation: Any, *, where: str) -> tuple[ConnectType, bool]:
    """Return ``(connect_type, optional)`` for a field annotation.

    ``where`` (e.g. ``"event 'bet': Bet.user_id"``) is put in front of the error message.
    """
    optional = False
    marker: ConnectType | None = None
    current = annotation
    while True:
        origin = get_origin(current)
        if origin is Annotated:
            marker = next((m for m in current.__metadata__ if isinstance(m, ConnectType)), marker)
            current = current.__origin__
        elif origin is Union or origin is types.UnionType:
            args = get_args(current)
            non_none = [a for a in args if a is not type(None)]
            if len(non_none) != 1 or len(non_none) == len(args):
                raise SchemaError(
                    f"{where}: unsupported union {annotation!r}; only Optional[X] is allowed"
                )
            optional = True
            current = non_none[0]
        else:
            break

    if marker is not None:
        if _PYTHON_TYPE[marker] is not current:
            raise SchemaError(
                f"{where}: marker {marker.value!r} needs a {_PYTHON_TYPE[marker].__name__} "
                f"annotation, got {current!r}"
            )
        return marker, optional
    connect_type = _DEFAULTS.get(current) if isinstance(current, type) else None
    if connect_type is None:
        raise SchemaError(
            f"{where}: unsupported type {annotation!r} (nested and container types cannot be "
            f"mapped to a Connect column); supported: {_SUPPORTED}"
        )
    return connect_type, optional
