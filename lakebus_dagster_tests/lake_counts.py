"""Rows the sink has committed, read from the tables' snapshot summaries: what the tests and the
benchmarks poll while they wait for events to land (the package itself never needs the count)."""

from __future__ import annotations

from pyiceberg.catalog import Catalog


def committed_rows(catalog: Catalog, *tables: str) -> int:
    """Rows in the current snapshots of ``tables``, from their summaries (no data file read); a table
    the sink has not created yet counts 0. Cheap enough to poll every second."""
    total = 0
    for name in tables:
        if not catalog.table_exists(name):
            continue
        snapshot = catalog.load_table(name).current_snapshot()
        if snapshot is not None and snapshot.summary is not None:
            total += int(snapshot.summary.additional_properties.get("total-records", 0))
    return total
