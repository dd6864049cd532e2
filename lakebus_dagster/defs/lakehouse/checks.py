"""Asset checks: ODS freshness, and per partition of every DWS table: reconciliation with the ODS,
no null dimension keys, no duplicate keys.

The DWS checks are partitioned like their asset (a preview feature in Dagster 1.13), so a result is
recorded per partition and a check can be rerun alone for one partition; in a single-run backfill
they check the whole partition range at once and list the offending slots in their metadata.
"""

import warnings
from collections.abc import Sequence

import dagster as dg

from lakebus_dagster.defs.lakehouse.assets import lakehouse_tables
from lakebus_dagster.defs.lakehouse.constants import ODS_MAX_COMMIT_AGE, dws_key
from lakebus_dagster.defs.lakehouse.partitions import PARTITIONS_BY_GRAIN, scope_of_run
from lakebus_dagster.defs.resources import BusLayoutResource, LakeSparkResource
from lakebus_dagster.lake.dws import DwsTable, duplicate_keys, null_key_rows, reconcile_totals
from lakebus_dagster.markdown import markdown_table

# -- ODS freshness --------------------------------------------------------------------------------
# ``FreshnessPolicy`` (the successor of these checks) only looks at materializations, and the ODS
# tables are never materialized by Dagster — only observed, with ``dagster/last_updated_timestamp``
# set to the snapshot's commit time, which is exactly what these checks read.
def ods_freshness(ods_keys: Sequence[dg.AssetKey]) -> tuple[list[dg.AssetChecksDefinition], dg.SensorDefinition]:
    """Freshness checks of the ODS sources and the sensor that evaluates them."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=dg.SupersessionWarning)
        checks = dg.build_last_update_freshness_checks(
            assets=list(ods_keys), lower_bound_delta=ODS_MAX_COMMIT_AGE, severity=dg.AssetCheckSeverity.WARN
        )
        sensor = dg.build_sensor_for_freshness_checks(
            freshness_checks=checks, name="ods_freshness_checks_sensor", default_status=dg.DefaultSensorStatus.RUNNING
        )
    return list(checks), sensor


# -- DWS partitions -----------------------------------------------------------------------------
def _slot(row: dict) -> str:
    return f"{row['log_date']}" + (f" {row['hour']:02d}h" if row.get("hour") is not None else "")


def dws_checks(spec: DwsTable, specs: Sequence[DwsTable]) -> list[dg.AssetChecksDefinition]:
    """The three partition checks of ``spec``'s asset (``specs``: every DWS table of the location)."""
    key, partitions_def, table = dws_key(spec.name), PARTITIONS_BY_GRAIN[spec.grain], spec.name
    with warnings.catch_warnings():
        # partitioned asset checks are a preview feature in 1.13; they are what makes a result per partition
        warnings.filterwarnings("ignore", category=dg.PreviewWarning)

        @dg.asset_check(
            asset=key,
            name="reconciles_with_ods",
            partitions_def=partitions_def,
            description=f"Per {spec.grain} of the partition, {table}'s counts and amounts equal the ODS totals.",
        )
        def reconciles_with_ods(context: dg.AssetCheckExecutionContext, spark: LakeSparkResource, layout: BusLayoutResource) -> dg.AssetCheckResult:
            scope = scope_of_run(context.op_execution_context, spec.grain)
            result = reconcile_totals(spark.spark_session, spec, lakehouse_tables(layout, specs), scope)
            totals = result.totals()
            return dg.AssetCheckResult(
                passed=result.passed,
                description=(
                    f"{len(result.slots)} {spec.grain}(s) of {scope.describe()} reconcile"
                    if result.passed
                    else f"{len(result.mismatches)} mismatch(es) in {scope.describe()}: "
                    + "; ".join(f"{_slot(m)} {m['measure']} ODS {m['ods']} vs DWS {m['dws']}" for m in result.mismatches[:5])
                ),
                metadata={
                    "scope": scope.describe(),
                    "slots_compared": len(result.slots),
                    "mismatches": len(result.mismatches),
                    **{k: dg.MetadataValue.float(float(v)) for k, v in totals.items()},
                    "mismatch_detail": dg.MetadataValue.md(markdown_table(result.mismatches[:20])),
                },
            )

        @dg.asset_check(
            asset=key,
            name="no_null_keys",
            partitions_def=partitions_def,
            description=f"No row of {table} in the partition has a null key ({', '.join(spec.keys)}).",
        )
        def no_null_keys(context: dg.AssetCheckExecutionContext, spark: LakeSparkResource, layout: BusLayoutResource) -> dg.AssetCheckResult:
            scope = scope_of_run(context.op_execution_context, spec.grain)
            n, sample = null_key_rows(spark.spark_session, spec, lakehouse_tables(layout, specs), scope)
            return dg.AssetCheckResult(
                passed=n == 0,
                severity=dg.AssetCheckSeverity.WARN,
                description=f"{n} row(s) with a null key in {scope.describe()}",
                metadata={"scope": scope.describe(), "rows_with_null_keys": n, "sample": dg.MetadataValue.md(markdown_table(sample))},
            )

        @dg.asset_check(
            asset=key,
            name="no_duplicate_keys",
            partitions_def=partitions_def,
            description=f"Every key ({', '.join(spec.keys)}) of {table} occurs once in the partition.",
        )
        def no_duplicate_keys(context: dg.AssetCheckExecutionContext, spark: LakeSparkResource, layout: BusLayoutResource) -> dg.AssetCheckResult:
            scope = scope_of_run(context.op_execution_context, spec.grain)
            n, sample = duplicate_keys(spark.spark_session, spec, lakehouse_tables(layout, specs), scope)
            return dg.AssetCheckResult(
                passed=n == 0,
                description=f"{n} duplicated key(s) in {scope.describe()}",
                metadata={"scope": scope.describe(), "duplicated_keys": n, "sample": dg.MetadataValue.md(markdown_table(sample))},
            )

    return [reconciles_with_ods, no_null_keys, no_duplicate_keys]
