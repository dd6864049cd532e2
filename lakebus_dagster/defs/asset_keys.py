"""Every asset key of the lakebus code location, built here and only here (issue 22).

An asset key is a name users and tools hold on to: the UI's asset pages and lineage, the run and
observation history (keyed by it), asset selections in jobs and in a user's own ``dagster`` calls,
the checks attached to it. A key spelled in two places drifts apart silently — the offset ledger's
check once rebuilt the ODS keys with a literal ``"ods"`` and the ``"demo"`` namespace, and would have
attached to assets that no longer exist the day either changed. So each key or key family is
declared once, here; ``test_architecture`` fails when another module builds an ``AssetKey`` from
string literals.

Per-event and per-table keys are derived, never listed: the events come from the event SDK's
registry, the DWS tables from ``lakebus_dagster.lake.dws.DWS_TABLES``.
"""

from __future__ import annotations

from collections.abc import Iterable

import dagster as dg

from lakebus_dagster.events.registry import ods_table_name

# -- lakehouse ----------------------------------------------------------------------------------
ODS_PREFIX = "ods"
DWS_PREFIX = "dws"


def ods_key(event: str) -> dg.AssetKey:
    """``bet`` -> ``ods/dwd_biz_bet`` (the sink's table name for the event, see the registry)."""
    return dg.AssetKey([ODS_PREFIX, ods_table_name(event)])


def ods_keys(events: Iterable[str]) -> list[dg.AssetKey]:
    """The ODS keys of ``events``, sorted by event (a stable order for check specs and selections)."""
    return [ods_key(event) for event in sorted(events)]


def dws_key(table: str) -> dg.AssetKey:
    """``dws_user_day`` -> ``dws/dws_user_day``."""
    return dg.AssetKey([DWS_PREFIX, table])


# -- change capture (issue 30) ------------------------------------------------------------------
CDC_PREFIX = "cdc"


def cdc_current_key(schema: str, table: str) -> dg.AssetKey:
    """``app``, ``orders`` -> ``cdc/pg_app_orders_current`` (the current-state table's name, without namespace)."""
    return dg.AssetKey([CDC_PREFIX, f"pg_{schema}_{table}_current"])


def cdc_change_key(schema: str, table: str) -> dg.AssetKey:
    """``app``, ``orders`` -> ``cdc/pg_app_orders``: the change table the sink appends to (external to Dagster)."""
    return dg.AssetKey([CDC_PREFIX, f"pg_{schema}_{table}"])


def cdc_source_key(capture: str, schema: str, table: str) -> dg.AssetKey:
    """``shop``, ``app``, ``orders`` -> ``postgres/shop/app/orders``: the captured table in its database."""
    return dg.AssetKey(["postgres", capture, schema, table])


#: the captured database's replication slot, observed by the status sensor (lag bytes and age)
CDC_SLOT_KEY = dg.AssetKey([CDC_PREFIX, "replication_slot"])


# -- the bus and Connect (observed by the inventory and monitoring sensors) ---------------------
TOPIC_INVENTORY_KEY = dg.AssetKey(["kafka", "topic_inventory"])
DLQ_ASSET_KEY = dg.AssetKey(["kafka", "dlq_events"])
#: the Connect cluster's view (lakebus_dagster.inventory.connect_view); the key predates the module's name
CONNECT_CLUSTER_KEY = dg.AssetKey(["connect", "cluster"])

# -- lakebus itself -----------------------------------------------------------------------------
#: every alert delivered is also an observation of this asset (the UI's alert history)
ALERTS_ASSET_KEY = dg.AssetKey(["lakebus", "alerts"])
#: every finished run of an operator action is one observation of this asset (the UI's audit trail)
AUDIT_KEY = dg.AssetKey(["lakebus", "audit"])
