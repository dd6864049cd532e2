"""Asset checks: ODS freshness, and per partition of every DWS table: reconciliation with the ODS,
no null dimension keys, no duplicate keys.

The DWS checks are check *specs of the DWS asset*: the step that MERGEd a scope checks it with the
same Spark session, all three from one query (:func:`~lakebus_dagster.lake.dws.check_scope`) — a
run of the hourly job is one step per table, not one per check. The asset is subsettable, so the
checks can still run alone for a partition (select them in the UI; the table is then only read).
They are partitioned like their asset (a preview feature in Dagster 1.13), so a result is recorded
per partition; in a single-run backfill they check the whole partition range at once and list the
offending slots in their metadata.
"""

import warnings
from datetime import timedelta
from collections.abc import Iterator, Sequence
from typing import Any

import dagster as dg

from lakebus_dagster.defs.asset_keys import dws_key
from lakebus_dagster.defs.lakehouse.constants import DEFAULT_ODS_MAX_COMMIT_AGE
from lakebus_dagster.defs.lakehouse.partitions import PARTITIONS_BY_GRAIN
from lakebus_dagster.lake.dws import DwsTable, LakehouseTables, Scope, check_scope, duplicate_keys, null_key_rows
from lakebus_dagster.markdown import markdown_table

RECONCILES = "reconciles_with_ods"
NO_NULL_KEYS = "no_null_keys"
NO_DUPLICATE_KEYS = "no_duplicate_keys"


# -- ODS freshness --------------------------------------------------------------------------------
# ``FreshnessPolicy`` (the successor of these checks) only looks at materializations, and the ODS
# tables are never materialized by Dagster — only observed, with ``dagster/last_updated_timestamp``
# set to the snapshot's commit time, which is exactly what these checks read.
def ods_freshness(ods_keys: Sequence[dg.AssetKey], max_commit_age: timedelta = DEFAULT_ODS_MAX_COMMIT_AGE,
                  ) -> tuple[list[dg.AssetChecksDefinition], dg.SensorDefinition]:
    """Freshness checks of the ODS sources (WARN when no commit for ``max_commit_age``) and the sensor that evaluates them."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=dg.SupersessionWarning)
        checks = dg.build_last_update_freshness_checks(
            assets=list(ods_keys), lower_bound_delta=max_commit_age, severity=dg.AssetCheckSeverity.WARN
        )
        sensor = dg.build_sensor_for_freshness_checks(
            freshness_checks=checks, name="ods_freshness_checks_sensor", default_status=dg.DefaultSensorStatus.RUNNING
        )
    return list(checks), sensor


# -- DWS partitions -----------------------------------------------------------------------------
def dws_check_specs(spec: DwsTable) -> list[dg.AssetCheckSpec]:
    """The three partition checks of ``spec``'s asset."""
    key, partitions_def, table = dws_key(spec.name), PARTITIONS_BY_GRAIN[spec.grain], spec.name
    with warnings.catch_warnings():
        # partitioned asset checks are a preview feature in 1.13; they are what makes a result per partition
        warnings.filterwarnings("ignore", category=dg.PreviewWarning)
        return [
            dg.AssetCheckSpec(RECONCILES, asset=key, partitions_def=partitions_def,
                              description=f"Per {spec.grain} of the partition, {table}'s counts and amounts equal the ODS totals."),
            dg.AssetCheckSpec(NO_NULL_KEYS, asset=key, partitions_def=partitions_def,
                              description=f"No row of {table} in the partition has a null key ({', '.join(spec.keys)})."),
            dg.AssetCheckSpec(NO_DUPLICATE_KEYS, asset=key, partitions_def=partitions_def,
                              description=f"Every key ({', '.join(spec.keys)}) of {table} occurs once in the partition."),
        ]


def _slot(row: dict) -> str:
    return f"{row['log_date']}" + (f" {row['hour']:02d}h" if row.get("hour") is not None else "")


def dws_check_results(
    session: Any, spec: DwsTable, tables: LakehouseTables, scope: Scope, selected: set[str]
) -> Iterator[dg.AssetCheckResult]:
    """The results of the ``selected`` checks of ``scope``: one query for all three, then a sample
    of the offending rows for each check that failed."""
    if not selected:
        return
    key, where = dws_key(spec.name), scope.describe()
    found = check_scope(session, spec, tables, scope)
    totals = found.totals
    if RECONCILES in selected:
        yield dg.AssetCheckResult(
            asset_key=key,
            check_name=RECONCILES,
            passed=totals.passed,
            description=(
                f"{len(totals.slots)} {spec.grain}(s) of {where} reconcile"
                if totals.passed
                else f"{len(totals.mismatches)} mismatch(es) in {where}: "
                + "; ".join(f"{_slot(m)} {m['measure']} ODS {m['ods']} vs DWS {m['dws']}" for m in totals.mismatches[:5])
            ),
            metadata={
                "scope": where,
                "slots_compared": len(totals.slots),
                "mismatches": len(totals.mismatches),
                **{k: dg.MetadataValue.float(float(v)) for k, v in totals.totals().items()},
                "mismatch_detail": dg.MetadataValue.md(markdown_table(totals.mismatches[:20])),
            },
        )
    key_checks = (
        (NO_NULL_KEYS, found.null_key_rows, null_key_rows, "rows_with_null_keys", "row(s) with a null key",
         dg.AssetCheckSeverity.WARN),
        (NO_DUPLICATE_KEYS, found.duplicated_keys, duplicate_keys, "duplicated_keys", "duplicated key(s)",
         dg.AssetCheckSeverity.ERROR),
    )
    for name, count, sample_of, label, what, severity in key_checks:
        if name in selected:
            sample = sample_of(session, spec, tables, scope)[1] if count else []
            yield dg.AssetCheckResult(
                asset_key=key, check_name=name, passed=count == 0, severity=severity,
                description=f"{count} {what} in {where}",
                metadata={"scope": where, label: count, "sample": dg.MetadataValue.md(markdown_table(sample))},
            )
