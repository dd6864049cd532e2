"""Where the DWS tables read from and write to: the ODS tables of the bus layout's routes, and a
DWS namespace derived from the ODS namespace (so an isolated bus gets isolated DWS tables).

The ODS tables are the sink's per-event tables, named ``<namespace>.dwd_biz_<event>`` after the
seed's table names (see :data:`lakebus_dagster.events.registry.TABLE_PREFIX`); lakebus calls them
the ODS layer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from lakebus_dagster.lake.dws.spec import DwsTable
from lakebus_dagster.lake.spark import SPARK_CATALOG

#: DWS namespace = ODS namespace + this suffix
DWS_NAMESPACE_SUFFIX = "dws"


def dws_namespace(ods_namespace: str) -> str:
    """``demo`` -> ``demo_dws``; ``demo_1a2b3c4d`` (an isolated test bus) -> ``demo_1a2b3c4d_dws``."""
    return f"{ods_namespace}_{DWS_NAMESPACE_SUFFIX}"


@dataclass(frozen=True)
class LakehouseTables:
    """The ODS table of every routed event, the DWS namespace, and the DWS specs built there."""

    ods_tables: Mapping[str, str]  # event -> "namespace.table"
    dws_namespace: str
    specs: tuple[DwsTable, ...]
    catalog: str = SPARK_CATALOG
    #: event -> a session view read instead of its ODS table, which does not exist yet or lacks the
    #: latest version's columns (:func:`~lakebus_dagster.lake.dws.sources.resolve_sources`)
    stand_ins: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_routes(
        cls, routes: Mapping[str, str], specs: Iterable[DwsTable] | None = None, catalog: str = SPARK_CATALOG
    ) -> LakehouseTables:
        """Tables for the bus layout's ``routes``; every event a spec reads must be routed."""
        if specs is None:
            from lakebus_dagster.lake.dws.tables import DWS_TABLES

            specs = DWS_TABLES
        specs = tuple(specs)
        needed = {event for spec in specs for event in spec.sources}
        missing = needed - set(routes)
        if missing:
            raise ValueError(f"the bus layout routes no {sorted(missing)} event(s); the DWS tables need {sorted(needed)}")
        namespaces = sorted({routes[e].split(".", 1)[0] for e in needed} or {t.split(".", 1)[0] for t in routes.values()})
        if len(namespaces) != 1:
            raise ValueError(f"the DWS tables read one ODS namespace, the routes span {namespaces}")
        return cls(dict(routes), dws_namespace(namespaces[0]), specs, catalog)

    def qualified(self, table: str) -> str:
        """``namespace.table`` -> ``<catalog>.namespace.table`` (procedures need the catalog)."""
        return f"{self.catalog}.{table}"

    def ods_table(self, event: str) -> str:
        """``namespace.table`` of ``event``'s ODS table."""
        return self.ods_tables[event]

    def sources_of(self, spec: DwsTable) -> dict[str, str]:
        """event -> catalog-qualified ODS table (or its stand-in view), for the events ``spec`` reads."""
        return {event: self.stand_ins.get(event) or self.qualified(self.ods_tables[event]) for event in spec.sources}

    def dws(self, spec: DwsTable) -> str:
        return f"{self.dws_namespace}.{spec.name}"

    @property
    def ods(self) -> tuple[str, ...]:
        return tuple(self.ods_tables.values())

    @property
    def all_dws(self) -> tuple[str, ...]:
        return tuple(self.dws(spec) for spec in self.specs)
