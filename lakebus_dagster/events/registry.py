"""The event registry: event name -> versioned model + schema, and event -> Iceberg table routes.

It is the single source of truth for *which* events exist: the encoder looks schemas up here and
the bus layout / connector provisioning reads :func:`routes` to configure the sink's per-table
route regexes, so adding an event is one ``register`` call, or one entry in the config file's
``events:`` section (:mod:`.declared`), which the default registry reads when it is built.

Versions are kept per event (1, 2, ...; a record's ``schema_version`` field selects one) so that a
producer still built against version 1 keeps encoding with the version-1 schema after version 2 is
registered: the sink adds the new nullable columns and old rows read them as null.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .declared import register_configured
from .errors import SchemaError, UnknownEventError
from .models import Bet, BetV2, EventBase, Recharge, RechargeV2
from .schema import ConnectSchema, check_evolution, derive_schema

DEFAULT_NAMESPACE = "demo"
#: The sink's per-event tables keep the seed's names, ``dwd_biz_<event>``; lakebus calls them the
#: ODS tables (the raw, per-event layer the DWS tables aggregate).
TABLE_PREFIX = "dwd_biz_"
# Event names become table-name suffixes and route regexes: keep them plain identifiers.
_EVENT_NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class EventVersion:
    """One registered version of one event."""

    event: str
    version: int
    model: type[EventBase]
    schema: ConnectSchema


class EventRegistry:
    def __init__(self) -> None:
        self._versions: dict[str, list[EventVersion]] = {}
        self._by_model: dict[type, EventVersion] = {}

    def register(
        self, event_name: str, model: type[EventBase], *, version: int = 1
    ) -> EventVersion:
        """Register ``model`` as ``version`` of ``event_name``.

        A new event starts at version 1; each later version must be exactly the previous one plus
        one and may only add optional fields (see :func:`~.schema.check_evolution`).
        """
        if not (isinstance(event_name, str) and _EVENT_NAME.fullmatch(event_name)):
            raise SchemaError(
                f"event {event_name!r}: name must match {_EVENT_NAME.pattern} "
                "(it becomes part of a table name)"
            )
        schema = derive_schema(event_name, model)
        if model in self._by_model:
            other = self._by_model[model]
            raise SchemaError(
                f"event {event_name!r}: model {model.__name__} is already registered as "
                f"{other.event!r} version {other.version}; one model class per event version"
            )
        history = self._versions.get(event_name, [])
        expected = len(history) + 1
        if type(version) is not int or version != expected:
            latest = f"latest is {len(history)}" if history else "it is not registered yet"
            raise SchemaError(
                f"event {event_name!r}: cannot register version {version!r}, expected {expected} "
                f"({latest}); versions go up by exactly 1"
            )
        if history:
            check_evolution(event_name, history[-1].schema, schema)
        registered = EventVersion(event_name, version, model, schema)
        self._versions.setdefault(event_name, []).append(registered)
        self._by_model[model] = registered
        return registered

    def get(self, event_name: str, version: int | None = None) -> EventVersion:
        """The given version of ``event_name`` (the latest when ``version`` is None)."""
        history = self._versions.get(event_name)
        if not history:
            known = ", ".join(sorted(self._versions)) or "none"
            raise UnknownEventError(
                event_name, "event", f"event is not registered (registered: {known})"
            )
        if version is None:
            return history[-1]
        if type(version) is not int or not 1 <= version <= len(history):
            raise UnknownEventError(
                event_name,
                "schema_version",
                f"{version!r} is not a registered version (registered: 1..{len(history)})",
            )
        return history[version - 1]

    def for_model(self, model: type) -> EventVersion:
        """The event version a model class was registered as."""
        try:
            return self._by_model[model]
        except KeyError:
            name = getattr(model, "__name__", model)
            raise UnknownEventError(
                None, "event", f"{name!r} is not a registered event model"
            ) from None

    def versions(self, event_name: str) -> tuple[EventVersion, ...]:
        self.get(event_name)  # raises for unknown events
        return tuple(self._versions[event_name])

    def events(self) -> tuple[str, ...]:
        return tuple(self._versions)

    def routes(self, namespace: str = DEFAULT_NAMESPACE) -> dict[str, str]:
        """``{event: "<namespace>.dwd_biz_<event>"}`` for every registered event."""
        return {event: table_name(event, namespace) for event in self._versions}


def ods_table_name(event: str) -> str:
    """``bet`` -> ``dwd_biz_bet``: the ODS table of an event, without its namespace."""
    return f"{TABLE_PREFIX}{event}"


def table_name(event: str, namespace: str = DEFAULT_NAMESPACE) -> str:
    """``bet`` -> ``demo.dwd_biz_bet``: the ODS table of an event in ``namespace``."""
    return f"{namespace}.{ods_table_name(event)}"


def _build_default_registry() -> EventRegistry:
    registry = EventRegistry()
    registry.register("bet", Bet)
    registry.register("recharge", Recharge)
    registry.register("bet", BetV2, version=2)
    registry.register("recharge", RechargeV2, version=2)
    register_configured(registry)  # the deployment's own event types (config file ``events:``)
    return registry


#: The registry producers and the connector provisioning share.
default_registry = _build_default_registry()


def routes(namespace: str = DEFAULT_NAMESPACE) -> dict[str, str]:
    """Routes of the default registry; the connector provisioning's source of truth."""
    return default_registry.routes(namespace)
