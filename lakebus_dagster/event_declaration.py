"""The ``events:`` section of the config file: event types a team declares without editing lakebus.

Why a declaration and not code: a team that adds a ``withdrawal`` to its bus should not fork the
package to add one dataclass. The declaration names the event and its fields with their Connect
types; :mod:`lakebus_dagster.events.registry` turns each into a model registered beside the built-in
``bet`` and ``recharge``, so the routes, the sink's registry guard, the ODS asset and the SDK's
encoder all see it (``provision_lakebus`` then adds the route to the running sink)::

    events:
      withdrawal:
        fields: {user_id: int32, order_id: string, amount: 'decimal(18,2)', paid_at: timestamp}

Every declared field is optional (nullable), like the built-in events' own fields: the sink can
add a nullable column to a table, never a required one. The base fields (``event``, ``log_date``,
``hour``, ...) are every event's and cannot be declared. A declared event starts at version 1; a
later field is a new version (a code-registered model, :meth:`EventRegistry.register`).

This module checks the shape only and imports nothing of the events package (the registry imports
the config file's reader, not the other way round).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: the Connect types a declared field may have (the values of ``events.types.ConnectType``; a decimal
#: is written with its precision and scale, ``decimal(18,2)``: money, exact; a ``timestamp`` is an
#: instant, an Iceberg timestamptz)
FIELD_TYPES = ("int32", "int64", "float", "double", "string", "boolean", "timestamp", "decimal(p,s)")
#: ``decimal(<precision>,<scale>)``
DECIMAL_TYPE = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)")
#: Iceberg's largest decimal precision
MAX_PRECISION = 38


def decimal_spec(kind: str) -> tuple[int, int] | None:
    """``decimal(18,2)`` -> ``(18, 2)``; None for any other type name."""
    match = DECIMAL_TYPE.fullmatch(kind) if isinstance(kind, str) else None
    return (int(match[1]), int(match[2])) if match else None
#: the fields every event carries (``events.models.EventBase``): not declarable
BASE_FIELDS = ("category", "event", "log_date", "hour", "plat_id", "app_id", "ts", "schema_version")
#: an event name becomes a table-name suffix and a route regex; a field name a column
_NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class DeclaredEvent:
    """One declared event type: its name and its own fields (name, Connect type), in file order."""

    name: str
    fields: tuple[tuple[str, str], ...]


def parse_events(body: Any, where: str = "events") -> tuple[DeclaredEvent, ...]:
    """``events:`` -> the declared events; a ValueError naming the key for the first problem."""
    if not isinstance(body, Mapping):
        raise ValueError(f"{where} must be a mapping of event names to {{fields: {{<field>: <type>}}}}")
    out = []
    for name, spec in body.items():
        at = f"{where}.{name}"
        if not (isinstance(name, str) and _NAME.fullmatch(name)):
            raise ValueError(f"{at}: an event name must match {_NAME.pattern} (it becomes part of a table name)")
        if not isinstance(spec, Mapping) or set(spec) != {"fields"}:
            raise ValueError(f"{at} must be {{fields: {{<field>: <type>}}}}, got {spec!r}")
        fields = spec["fields"]
        if not isinstance(fields, Mapping) or not fields:
            raise ValueError(f"{at}.fields must name at least one field and its type ({', '.join(FIELD_TYPES)})")
        checked = []
        for field, kind in fields.items():
            if not (isinstance(field, str) and _NAME.fullmatch(field)):
                raise ValueError(f"{at}.fields.{field}: a field name must match {_NAME.pattern} (it becomes a column)")
            if field in BASE_FIELDS:
                raise ValueError(f"{at}.fields.{field}: a base field of every event ({', '.join(BASE_FIELDS)}); "
                                 "remove it from the declaration")
            digits = decimal_spec(kind)
            if digits is not None:
                precision, scale = digits
                if not (1 <= precision <= MAX_PRECISION and 0 <= scale <= precision):
                    raise ValueError(f"{at}.fields.{field}: {kind} needs 1 <= precision <= {MAX_PRECISION} and "
                                     "0 <= scale <= precision")
                kind = f"decimal({precision},{scale})"
            elif kind not in FIELD_TYPES or kind == "decimal(p,s)":
                hint = ("; quote it ('decimal(18,2)'): in a {...} mapping the comma ends the value"
                        if isinstance(kind, str) and kind.startswith("decimal(") and ")" not in kind else "")
                raise ValueError(f"{at}.fields.{field}: type {kind!r} is not one of {', '.join(FIELD_TYPES)}{hint}")
            checked.append((field, kind))
        out.append(DeclaredEvent(name, tuple(checked)))
    return tuple(out)
