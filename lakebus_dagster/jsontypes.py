"""JSON type names of decoded JSON values, shared by the schema inventory and the source-offset
checks (a neutral module: ``connect`` and ``inventory`` both need it, and neither may import the other
both ways — issue 22's package-cycle rule)."""

from __future__ import annotations

from typing import Any


def json_type(value: Any) -> str:
    """The JSON type name of a decoded JSON value (``bool`` is not an integer here)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
