"""Readers of a finished offset_ledger run, importable from here too; they live in
:mod:`lakebus_dagster.defs.ledger.checks`."""

from lakebus_dagster.defs.ledger.checks import ledger_grace_of_run, lost_count_of_run

__all__ = ["ledger_grace_of_run", "lost_count_of_run"]
