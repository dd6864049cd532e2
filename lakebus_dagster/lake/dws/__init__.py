"""DWS aggregates of the ODS tables with Spark SQL, one module per kind of thing:

* :mod:`.scope` — :class:`Scope`, the UTC time range a write or check works on, and its predicates;
* :mod:`.spec` — :class:`DwsTable` and its kinds: a spec owns its sources, its aggregate SQL and the
  totals it must reconcile to;
* :mod:`.tables` — the declared tables (:data:`DWS_TABLES`);
* :mod:`.locations` — :class:`LakehouseTables`: the ODS tables of the bus layout, the DWS namespace;
* :mod:`.merge` — DDL and the partition-scoped MERGE (why it is built this way is documented there);
* :mod:`.runner` — :func:`build_scope`: aggregate a scope and MERGE it;
* :mod:`.checks` — :func:`reconcile_totals`, null and duplicate keys.
"""

from lakebus_dagster.lake.dws.checks import (
    AMOUNT_ABS_TOLERANCE,
    AMOUNT_REL_TOLERANCE,
    ScopeChecks,
    TotalsCheck,
    amounts_match,
    check_scope,
    duplicate_keys,
    null_key_rows,
    reconcile_totals,
    totals_sql,
)
from lakebus_dagster.lake.dws.locations import DWS_NAMESPACE_SUFFIX, LakehouseTables, dws_namespace
from lakebus_dagster.lake.dws.merge import (
    GONE,
    TABLE_PROPERTIES,
    create_namespace_sql,
    create_table_sql,
    merge_source_sql,
    merge_sql,
    source_sql,
)
from lakebus_dagster.lake.dws.runner import BuildStats, build_scope, current_snapshot, ensure_tables
from lakebus_dagster.lake.dws.scope import Grain, Scope, scope_predicate
from lakebus_dagster.lake.dws.spec import DwsTable, EventRollup, UserDayRollup
from lakebus_dagster.lake.dws.tables import BET_HOUR, DWS_TABLES, RECHARGE_HOUR, USER_DAY

__all__ = [
    "AMOUNT_ABS_TOLERANCE", "AMOUNT_REL_TOLERANCE", "BET_HOUR", "DWS_NAMESPACE_SUFFIX", "DWS_TABLES", "GONE",
    "RECHARGE_HOUR", "TABLE_PROPERTIES", "USER_DAY", "BuildStats", "ScopeChecks", "check_scope", "DwsTable", "EventRollup", "Grain",
    "LakehouseTables", "Scope", "TotalsCheck", "UserDayRollup", "amounts_match", "build_scope",
    "create_namespace_sql", "create_table_sql", "current_snapshot", "duplicate_keys", "dws_namespace",
    "ensure_tables", "merge_source_sql", "merge_sql", "null_key_rows", "reconcile_totals", "scope_predicate",
    "source_sql", "totals_sql",
]
