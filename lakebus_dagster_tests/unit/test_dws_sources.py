"""An absent ODS table is read as an empty view with the event's declared columns (written out here),
and a table without the latest version's columns through a view that adds them as nulls."""

from __future__ import annotations

from lakebus_dagster.lake.dws import USER_DAY, LakehouseTables
from lakebus_dagster.events import default_registry
from lakebus_dagster.lake.dws.sources import empty_source_sql, resolve_sources

#: the columns of an ODS table the sink created from version-2 records, and from version-1 ones only
V2_COLUMNS = {e: [f.name for f in default_registry.get(e).schema.fields] for e in ("bet", "recharge")}
V1_COLUMNS = {e: [f.name for f in default_registry.get(e, 1).schema.fields] for e in ("bet", "recharge")}


class _Catalog:
    def __init__(self, existing: set[str]) -> None:
        self.existing = existing

    def tableExists(self, name: str) -> bool:  # noqa: N802 (pyspark's name)
        return name in self.existing


class _Table:
    def __init__(self, columns: list[str]) -> None:
        self.columns = columns


class _Spark:
    def __init__(self, existing: set[str], columns: dict[str, list[str]] | None = None) -> None:
        self.catalog = _Catalog(existing)
        self.statements: list[str] = []
        self.columns = columns or V2_COLUMNS

    def table(self, name: str) -> _Table:
        return _Table(self.columns[name.rsplit("_", 1)[-1]])

    def sql(self, text: str) -> None:
        self.statements.append(text)


ROUTES = {"bet": "demo.dwd_biz_bet", "recharge": "demo.dwd_biz_recharge"}


def test_empty_recharge_has_the_declared_columns_and_no_rows():
    assert empty_source_sql("recharge") == (
        "SELECT CAST(NULL AS STRING) AS category, CAST(NULL AS STRING) AS event, CAST(NULL AS STRING) AS log_date, "
        "CAST(NULL AS STRING) AS hour, CAST(NULL AS INT) AS plat_id, CAST(NULL AS INT) AS app_id, CAST(NULL AS BIGINT) AS ts, "
        "CAST(NULL AS INT) AS schema_version, CAST(NULL AS STRING) AS status, CAST(NULL AS INT) AS user_id, "
        "CAST(NULL AS STRING) AS order_id, CAST(NULL AS DOUBLE) AS amount, CAST(NULL AS STRING) AS currency, "
        "CAST(NULL AS STRING) AS reason, CAST(NULL AS DECIMAL(38,2)) AS amount_decimal, "
        "CAST(NULL AS TIMESTAMP) AS event_time WHERE false"
    )


def test_a_table_of_version_1_rows_is_read_with_version_2_columns_as_nulls():
    spark = _Spark({"lake.demo.dwd_biz_bet", "lake.demo.dwd_biz_recharge"}, columns=V1_COLUMNS)
    tables, absent = resolve_sources(spark, LakehouseTables.from_routes(ROUTES), USER_DAY)
    assert absent == ()
    assert tables.sources_of(USER_DAY) == {"bet": "_ods_widened_bet", "recharge": "_ods_widened_recharge"}
    assert spark.statements[0] == (
        "CREATE OR REPLACE TEMPORARY VIEW _ods_widened_bet AS SELECT *, CAST(NULL AS DECIMAL(38,2)) AS amount_decimal, "
        "CAST(NULL AS TIMESTAMP) AS event_time FROM lake.demo.dwd_biz_bet"
    )
    again, _ = resolve_sources(spark, tables, USER_DAY)
    assert again is tables and len(spark.statements) == 2


def test_only_the_absent_table_gets_a_stand_in():
    spark = _Spark({"lake.demo.dwd_biz_bet"})
    tables, absent = resolve_sources(spark, LakehouseTables.from_routes(ROUTES), USER_DAY)
    assert absent == ("recharge",)
    assert tables.sources_of(USER_DAY) == {"bet": "lake.demo.dwd_biz_bet", "recharge": "_ods_absent_recharge"}
    assert len(spark.statements) == 1 and spark.statements[0].startswith("CREATE OR REPLACE TEMPORARY VIEW _ods_absent_recharge AS SELECT")
    # resolving again (the checks after the build) keeps the stand-in and creates nothing more
    again, absent_again = resolve_sources(spark, tables, USER_DAY)
    assert absent_again == ("recharge",) and again.sources_of(USER_DAY) == tables.sources_of(USER_DAY)
    assert len(spark.statements) == 1


def test_every_table_present_changes_nothing():
    spark = _Spark({"lake.demo.dwd_biz_bet", "lake.demo.dwd_biz_recharge"})
    original = LakehouseTables.from_routes(ROUTES)
    tables, absent = resolve_sources(spark, original, USER_DAY)
    assert absent == () and tables is original and not spark.statements
