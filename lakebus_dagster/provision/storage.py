"""Ensure the warehouse bucket, the Iceberg namespaces the routes write into, and the table
properties of the tables that exist already."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

from lakebus_dagster.markdown import markdown_table
from lakebus_dagster.provision.outcome import Action, Outcome


def reconcile_bucket(ensure_bucket, bucket: str) -> Outcome:
    """``ensure_bucket(name) -> bool`` (created?) comes from the object-store resource."""
    created = ensure_bucket(bucket)
    return Outcome("bucket", bucket, Action.CREATED if created else Action.UNCHANGED)


def reconcile_namespaces(catalog: Catalog, namespaces: Iterable[str]) -> list[Outcome]:
    existing = {".".join(ns) for ns in catalog.list_namespaces()}
    outcomes = []
    for ns in sorted(set(namespaces)):
        if ns in existing:
            outcomes.append(Outcome("namespace", ns, Action.UNCHANGED))
        else:
            catalog.create_namespace_if_not_exists(ns)
            outcomes.append(Outcome("namespace", ns, Action.CREATED))
    return outcomes


def reconcile_table_properties(catalog: Catalog, tables: Iterable[str], wanted: Mapping[str, str]) -> list[Outcome]:
    """Give each existing table of ``tables`` (``namespace.table``) the ``wanted`` properties.

    Only the keys whose value differs are set, in one transaction per table (an update without
    requirements: it does not conflict with the sink's commits). Other properties are left alone. A
    table that does not exist yet is reported ``unchanged``: whoever creates it (the sink's
    auto-create props, the DWS ``TBLPROPERTIES``) gives it the same properties.
    """
    outcomes = []
    for name in sorted(set(tables)):
        try:
            table = catalog.load_table(name)
        except (NoSuchTableError, NoSuchNamespaceError):
            outcomes.append(Outcome("table", name, Action.UNCHANGED, "not created yet: gets the properties at creation"))
            continue
        current = table.properties
        changed = {key: value for key, value in wanted.items() if current.get(key) != value}
        if not changed:
            outcomes.append(Outcome("table", name, Action.UNCHANGED, f"{len(wanted)} properties as declared"))
            continue
        with table.transaction() as tx:
            tx.set_properties(**changed)
        changes = tuple(f"{key}: {current.get(key, '(unset)')} -> {value}" for key, value in sorted(changed.items()))
        rows = [{"property": key, "live": current.get(key, "(unset)"), "declared": value} for key, value in sorted(changed.items())]
        outcomes.append(Outcome("table", name, Action.UPDATED, "; ".join(changes),
                                diff_markdown=markdown_table(rows, ("property", "live", "declared")), changes=changes))
    return outcomes
