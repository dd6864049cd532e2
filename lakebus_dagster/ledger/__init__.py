"""The offset ledger: proof that every record on the bus is in exactly one place — one ODS row,
one DLQ record, re-queued, or a tombstone (rules in :mod:`lakebus_dagster.ledger.verify`)."""

from lakebus_dagster.ledger.ranges import compress, describe
from lakebus_dagster.ledger.run import Ledger, LedgerRun, ledger_complete
from lakebus_dagster.ledger.state import LedgerState
from lakebus_dagster.ledger.verify import LedgerVerdict, Place, Window, verify

__all__ = ["Ledger", "LedgerRun", "LedgerState", "LedgerVerdict", "Place", "Window", "compress",
           "describe", "ledger_complete", "verify"]
