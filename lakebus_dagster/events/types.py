"""Python type annotations -> Kafka Connect schema types.

Python has one ``int`` and one ``float``; Connect (and the Iceberg columns the sink creates from
it) distinguish widths. A plain ``int`` maps to ``int64`` because it is the only width that cannot
overflow silently; 32-bit columns are opted into with the :data:`Int32` marker, exactly where the
Go models used ``int32``. Money is exact: :func:`decimal` (``decimal.Decimal`` values, a Connect
``Decimal`` with its precision and scale, an Iceberg ``decimal`` column), never a binary float; an
instant is :data:`Timestamp` (an aware ``datetime``, a Connect ``Timestamp``, an Iceberg
``timestamptz`` column). Anything else - nested models, lists, unions of two types - raises
:class:`SchemaError`: the Go ``BuildSchemaFromStruct`` skipped such fields, which meant columns that
quietly never reached the lake.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import types
from dataclasses import dataclass
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
    #: Connect's logical ``Decimal`` (bytes in Connect, a JSON number in the envelope)
    DECIMAL = "decimal"
    #: Connect's logical ``Timestamp`` (int64 epoch milliseconds)
    TIMESTAMP = "timestamp"


#: Connect's logical type names, and the physical type each one is carried as
DECIMAL_LOGICAL = "org.apache.kafka.connect.data.Decimal"
TIMESTAMP_LOGICAL = "org.apache.kafka.connect.data.Timestamp"
#: Connect's parameter naming a Decimal's precision (JsonConverter and Debezium write it)
DECIMAL_PRECISION_PARAMETER = "connect.decimal.precision"
#: Iceberg's largest decimal precision (the sink creates every decimal column with it)
MAX_DECIMAL_PRECISION = 38


@dataclass(frozen=True)
class DecimalSpec:
    """A decimal's precision (all digits) and scale (digits after the point): ``decimal(18, 2)``."""

    precision: int
    scale: int

    def __post_init__(self) -> None:
        if not (type(self.precision) is int and type(self.scale) is int
                and 1 <= self.precision <= MAX_DECIMAL_PRECISION and 0 <= self.scale <= self.precision):
            raise SchemaError(f"decimal({self.precision}, {self.scale}): need 1 <= precision <= "
                              f"{MAX_DECIMAL_PRECISION} and 0 <= scale <= precision")

    def __str__(self) -> str:
        return f"decimal({self.precision},{self.scale})"


#: ``int`` stored as a Connect ``int32`` / Iceberg ``int`` column.
Int32 = Annotated[int, ConnectType.INT32]
#: ``float`` stored as a Connect ``float`` / Iceberg ``float`` column.
Float32 = Annotated[float, ConnectType.FLOAT32]
#: an instant: an aware ``datetime`` (or epoch milliseconds), a Connect ``Timestamp``, an Iceberg
#: ``timestamptz`` column
Timestamp = Annotated[_dt.datetime, ConnectType.TIMESTAMP]


def decimal(precision: int, scale: int) -> Any:
    """An exact number: ``decimal.Decimal`` (or ``int``) values, a Connect ``Decimal`` of that
    precision and scale, an Iceberg ``decimal(38, scale)`` column (the sink's precision; the SDK and
    the strict converter hold values to ``precision``)."""
    return Annotated[_decimal.Decimal, DecimalSpec(precision, scale)]


#: an amount of money: 18 digits, 2 after the point (the built-in events' ``amount_decimal``)
Money = decimal(18, 2)

# Exact-identity lookups: ``bool`` must not fall through to ``int``.
_DEFAULTS: dict[type, ConnectType] = {
    bool: ConnectType.BOOLEAN,
    int: ConnectType.INT64,
    float: ConnectType.FLOAT64,
    str: ConnectType.STRING,
    _dt.datetime: ConnectType.TIMESTAMP,
}
_PYTHON_TYPE: dict[ConnectType, type] = {
    ConnectType.INT32: int,
    ConnectType.INT64: int,
    ConnectType.FLOAT32: float,
    ConnectType.FLOAT64: float,
    ConnectType.STRING: str,
    ConnectType.BOOLEAN: bool,
    ConnectType.DECIMAL: _decimal.Decimal,
    ConnectType.TIMESTAMP: _dt.datetime,
}
_SUPPORTED = ("bool, int, float, str, Int32, Float32, decimal(p, s), Timestamp, optionally wrapped in "
              "Optional[...] / `| None`")


@dataclass(frozen=True)
class ResolvedType:
    """What a field annotation maps to: the Connect type, nullability, and a decimal's spec."""

    type: ConnectType
    optional: bool
    decimal: DecimalSpec | None = None


def resolve_annotation(annotation: Any, *, where: str) -> ResolvedType:
    """The Connect type of a field annotation, whether it is optional, and a decimal's spec.

    ``where`` (e.g. ``"event 'bet': Bet.user_id"``) is put in front of the error message.
    """
    optional = False
    marker: ConnectType | None = None
    digits: DecimalSpec | None = None
    current = annotation
    while True:
        origin = get_origin(current)
        if origin is Annotated:
            marker = next((m for m in current.__metadata__ if isinstance(m, ConnectType)), marker)
            digits = next((m for m in current.__metadata__ if isinstance(m, DecimalSpec)), digits)
            if digits is not None:
                marker = ConnectType.DECIMAL
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
        if marker is ConnectType.DECIMAL and digits is None:
            raise SchemaError(f"{where}: a Decimal needs its precision and scale: annotate it decimal(18, 2)")
        return ResolvedType(marker, optional, digits)
    if current is _decimal.Decimal:
        raise SchemaError(f"{where}: a Decimal needs its precision and scale: annotate it decimal(18, 2)")
    connect_type = _DEFAULTS.get(current) if isinstance(current, type) else None
    if connect_type is None:
        raise SchemaError(
            f"{where}: unsupported type {annotation!r} (nested and container types cannot be "
            f"mapped to a Connect column); supported: {_SUPPORTED}"
        )
    return ResolvedType(connect_type, optional)
