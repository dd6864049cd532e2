"""The DWS tables, declared once: adding a table is one more spec in :data:`DWS_TABLES` (the Dagster
assets, jobs, schedules and checks are generated from this tuple)."""

from __future__ import annotations

from lakebus_dagster.lake.dws.spec import DwsTable, EventRollup, UserDayRollup

BET_HOUR = EventRollup(
    name="dws_biz_bet_hour",
    event="bet",
    count_column="bet_count",
    columns=(
        ("log_date", "date", "UTC day of the bets"),
        ("hour", "int", "UTC hour of the bets, 0-23"),
        ("plat_id", "int", "platform"),
        ("app_id", "int", "application"),
        ("currency", "string", "currency of the amounts"),
        ("game_id", "int", "game"),
        ("amount", "decimal(38,2)", "sum of bet amounts"),
        ("bet_count", "bigint", "number of bets"),
    ),
    keys=("log_date", "hour", "plat_id", "app_id", "currency", "game_id"),
    measures=("amount", "bet_count"),
    grain="hour",
    description="Bets per hour, platform, app, currency and game.",
)

RECHARGE_HOUR = EventRollup(
    name="dws_biz_recharge_hour",
    event="recharge",
    count_column="recharge_count",
    columns=(
        ("log_date", "date", "UTC day of the recharges"),
        ("hour", "int", "UTC hour of the recharges, 0-23"),
        ("plat_id", "int", "platform"),
        ("app_id", "int", "application"),
        ("currency", "string", "currency of the amounts"),
        ("status", "string", "recharge status (success, failed, ...)"),
        ("recharge_count", "bigint", "number of recharges"),
        ("amount", "decimal(38,2)", "sum of recharge amounts"),
    ),
    keys=("log_date", "hour", "plat_id", "app_id", "currency", "status"),
    measures=("recharge_count", "amount"),
    grain="hour",
    description="Recharges per hour, platform, app, currency and status (every status).",
)

USER_DAY = UserDayRollup(
    name="dws_user_day",
    columns=(
        ("log_date", "date", "UTC day"),
        ("user_id", "int", "user"),
        ("bet_count", "bigint", "number of bets"),
        ("bet_amount", "decimal(38,2)", "sum of bet amounts"),
        ("recharge_count", "bigint", "number of successful recharges"),
        ("recharge_amount", "decimal(38,2)", "sum of successful recharge amounts"),
        ("net", "decimal(38,2)", "recharge_amount - bet_amount"),
    ),
    keys=("log_date", "user_id"),
    measures=("bet_count", "bet_amount", "recharge_count", "recharge_amount", "net"),
    grain="day",
    description="Per user and day: bets, successful recharges and net = recharge_amount - bet_amount.",
)

DWS_TABLES: tuple[DwsTable, ...] = (BET_HOUR, RECHARGE_HOUR, USER_DAY)
