"""Ensure the warehouse bucket and the Iceberg namespaces the routes write into."""

from __future__ import annotations

from collections.abc import Iterable

from pyiceberg.catalog import Catalog

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
