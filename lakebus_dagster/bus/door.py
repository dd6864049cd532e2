"""The sink's door: lakebus's strict converter and registry guard, configured from the registry.

Both are Java classes of lakebus's own Connect plugin (``infra/maven/connect-plugin-lakebus``, on
Connect's plugin path):

- ``io.lakebus.connect.StrictJsonConverter`` replaces ``JsonConverter`` as the value converter:
  a record that does not match its own declared envelope schema exactly (wrong JSON type, integer
  out of its width, a fraction in an integer field, a missing or null required field, an
  undeclared field) fails conversion instead of landing coerced;
- ``io.lakebus.connect.RegistryGuard`` is the first SMT: a record whose ``event`` is null, missing
  or no known route, whose ``schema_version`` is not registered, or whose envelope schema is not
  compatible with that registered version fails the transformation instead of vanishing in the
  sink's routing or failing the sink task.

Both failures are Connect's tolerated errors (``errors.tolerance=all``): the original record goes
to the DLQ with ``__connect.errors.*`` headers whose exception message names the field and the rule.

The guard's config carries the registry itself (every version of every routed event, as the same
Connect JSON schemas the SDK puts into envelopes), so the event registry stays the one source: a
newly registered event or version reaches the sink at the next provisioning, with no other change.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from lakebus_dagster.bus.layout import BusLayout, LayoutError
from lakebus_dagster.events.registry import EventRegistry

STRICT_CONVERTER_CLASS = "io.lakebus.connect.StrictJsonConverter"
LAKEBUS_GUARD_CLASS = "io.lakebus.connect.RegistryGuard"
#: the guard's alias in the connector's ``transforms`` chain (it must come first)
GUARD_ALIAS = "guard"
#: the payload field selecting the registered version (``EventBase.schema_version``)
VERSION_FIELD = "schema_version"


def registry_json(layout: BusLayout, registry: EventRegistry) -> str:
    """``{"<event>": {"<version>": <schema>}}`` for every routed event, compact and deterministic.

    Deterministic (sorted keys, no whitespace) because provisioning diffs the stored config
    string: the same registry must produce the same bytes, or every run would update the connector.
    """
    registered = set(registry.events())
    missing = sorted(set(layout.routes) - registered)
    if missing:
        raise LayoutError(
            f"routes {missing} have no schema in the event registry (registered: {sorted(registered)}); "
            "register the event so the sink's guard knows its contract"
        )
    doc: Mapping[str, Mapping[str, object]] = {
        event: {str(v.version): v.schema.to_json() for v in registry.versions(event)}
        for event in sorted(layout.routes)
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def value_converter() -> dict[str, str]:
    """The connector's ``value.converter*`` keys: the strict converter over Schema+JSON envelopes."""
    return {
        "value.converter": STRICT_CONVERTER_CLASS,
        "value.converter.schemas.enable": "true",
    }


def guard_transform(layout: BusLayout, registry: EventRegistry) -> tuple[str, dict[str, str]]:
    """``(alias, settings)`` of the guard SMT; settings are relative to ``transforms.<alias>.``."""
    return GUARD_ALIAS, {
        "type": LAKEBUS_GUARD_CLASS,
        "route.field": layout.route_field,
        "version.field": VERSION_FIELD,
        "registry": registry_json(layout, registry),
    }
