"""DWS table specs: a table's columns and keys, and — on the spec itself — how it is aggregated
from the ODS and how its totals reconcile with the ODS.

A spec names the events it reads (:attr:`DwsTable.sources`); the ODS table of an event comes from
the bus layout's routes (:class:`~lakebus_dagster.lake.dws.locations.LakehouseTables`), so a spec
never spells a table name. Two kinds cover the tables:

* :class:`EventRollup` — one event's rows grouped by the table's keys, counted and summed
  (``dws_biz_bet_hour``, ``dws_biz_recharge_hour``; a new per-event table is one declaration);
* :class:`UserDayRollup` — bets and successful recharges per user and day, and their difference.

Everything here renders SQL text only; running it is :mod:`~lakebus_dagster.lake.dws.runner`'s job.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass

from lakebus_dagster.events.models import SUCCESS_STATUS
from lakebus_dagster.lake.dws.scope import Grain, Scope, scope_predicate

#: the DWS tables' money type: exact, as the ODS's ``amount_decimal`` (the sink's decimal(38, 2))
MONEY_TYPE = "DECIMAL(38,2)"
#: an ODS row's amount: version 2's exact ``amount_decimal``, else version 1's double ``amount``
#: (rounded to cents once, here; a version-1 producer's amount had no more than that to say)
ODS_AMOUNT = "coalesce(amount_decimal, CAST(amount AS DECIMAL(18,2)))"
#: Spark SQL of a sum of ODS amounts as a DWS decimal (0 for an empty group)
MONEY = f"CAST(coalesce(sum({ODS_AMOUNT}), 0) AS {MONEY_TYPE})"
#: zero, as DWS money
ZERO_MONEY = f"CAST(0 AS {MONEY_TYPE})"

Column = tuple[str, str, str]  # (name, Spark SQL type, comment)


def time_columns(grain: Grain) -> tuple[str, ...]:
    """The time keys of a grain, which are also the DWS partition columns."""
    return ("log_date", "hour") if grain == "hour" else ("log_date",)


def ods_time_select(grain: Grain) -> str:
    """The ODS's string ``log_date``/``hour`` cast to the DWS types."""
    return ", ".join(["CAST(log_date AS DATE) AS log_date"] + (["CAST(hour AS INT) AS hour"] if grain == "hour" else []))


@dataclass(frozen=True, kw_only=True)
class DwsTable(ABC):
    """One DWS table: its columns, its keys (the MERGE keys), its measures, and how it is computed."""

    name: str
    columns: tuple[Column, ...]
    keys: tuple[str, ...]
    measures: tuple[str, ...]
    grain: Grain
    description: str = ""

    def __post_init__(self) -> None:
        names = [c[0] for c in self.columns]
        if sorted(names) != sorted(self.keys + self.measures) or len(set(names)) != len(names):
            raise ValueError(f"{self.name}: columns {names} must be exactly keys + measures")
        if self.keys[: len(self.partition_by)] != self.partition_by:
            raise ValueError(f"{self.name}: keys must start with the time columns {self.partition_by}")

    @property
    def partition_by(self) -> tuple[str, ...]:
        return time_columns(self.grain)

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c[0] for c in self.columns)

    @property
    def dimensions(self) -> tuple[str, ...]:
        """Keys other than the time columns (the ones that may be null in the ODS)."""
        return tuple(k for k in self.keys if k not in self.partition_by)

    @property
    @abstractmethod
    def sources(self) -> tuple[str, ...]:
        """The events whose ODS tables this table is computed from."""

    @abstractmethod
    def aggregate_sql(self, ods: Mapping[str, str], scope: Scope) -> str:
        """The table's rows for ``scope``, from the ODS (``ods``: event -> catalog-qualified table)."""

    @abstractmethod
    def totals_sql(self, ods: Mapping[str, str], scope: Scope) -> tuple[str, dict[str, str]]:
        """ODS totals per time slot of ``scope`` and, per total, the DWS expression that must equal it.

        Returns ``(query, {total: dws_expression})``: the query yields the time columns and one
        column per total; the reconciliation sums each expression over the DWS rows of a slot.
        """


@dataclass(frozen=True, kw_only=True)
class EventRollup(DwsTable):
    """One event's ODS rows of a slot grouped by the dimensions: ``count(*)`` and ``sum(amount)``."""

    event: str
    count_column: str
    amount_column: str | None = "amount"

    def __post_init__(self) -> None:
        super().__post_init__()
        expected = {self.count_column} | ({self.amount_column} if self.amount_column else set())
        if set(self.measures) != expected:
            raise ValueError(f"{self.name}: an event rollup's measures are {sorted(expected)}, got {list(self.measures)}")

    @property
    def sources(self) -> tuple[str, ...]:
        return (self.event,)

    def _measure(self, column: str) -> str:
        return "count(*)" if column == self.count_column else MONEY

    def aggregate_sql(self, ods: Mapping[str, str], scope: Scope) -> str:
        measures = ", ".join(f"{self._measure(m)} AS {m}" for m in self.measures)
        return (
            f"SELECT {ods_time_select(self.grain)}, {', '.join(self.dimensions)},\n"
            f"       {measures}\n"
            f"FROM {ods[self.event]}\nWHERE {scope_predicate(scope, typed=False)}\n"
            f"GROUP BY {', '.join(self.keys)}"
        )

    def totals_sql(self, ods: Mapping[str, str], scope: Scope) -> tuple[str, dict[str, str]]:
        group = ", ".join(str(i + 1) for i in range(len(self.partition_by)))
        totals = {"count": f"sum({self.count_column})"}
        select = "count(*) AS count"
        if self.amount_column:
            totals["amount"] = f"sum({self.amount_column})"
            select += f", {MONEY} AS amount"
        query = (
            f"SELECT {ods_time_select(self.grain)}, {select} FROM {ods[self.event]} "
            f"WHERE {scope_predicate(scope, typed=False)} GROUP BY {group}"
        )
        return query, totals


@dataclass(frozen=True, kw_only=True)
class UserDayRollup(DwsTable):
    """Per user and day: bets, successful recharges and ``net = recharge_amount - bet_amount``."""

    bet_event: str = "bet"
    recharge_event: str = "recharge"
    success_status: str = SUCCESS_STATUS

    @property
    def sources(self) -> tuple[str, ...]:
        return (self.bet_event, self.recharge_event)

    def aggregate_sql(self, ods: Mapping[str, str], scope: Scope) -> str:
        pred = scope_predicate(scope, typed=False)
        bet, recharge = ods[self.bet_event], ods[self.recharge_event]
        return (
            "WITH b AS (\n"
            f"  SELECT log_date, user_id, count(*) AS bet_count, {MONEY} AS bet_amount\n"
            f"  FROM {bet} WHERE {pred} GROUP BY log_date, user_id\n"
            "), r AS (\n"
            f"  SELECT log_date, user_id, count(*) AS recharge_count, {MONEY} AS recharge_amount\n"
            f"  FROM {recharge} WHERE {pred} AND status = '{self.success_status}' GROUP BY log_date, user_id\n"
            ")\n"
            "SELECT CAST(coalesce(b.log_date, r.log_date) AS DATE) AS log_date, coalesce(b.user_id, r.user_id) AS user_id,\n"
            f"       coalesce(b.bet_count, 0) AS bet_count, coalesce(b.bet_amount, {ZERO_MONEY}) AS bet_amount,\n"
            f"       coalesce(r.recharge_count, 0) AS recharge_count, coalesce(r.recharge_amount, {ZERO_MONEY}) AS recharge_amount,\n"
            f"       CAST(coalesce(r.recharge_amount, {ZERO_MONEY}) - coalesce(b.bet_amount, {ZERO_MONEY}) AS {MONEY_TYPE}) AS net\n"
            "FROM b FULL OUTER JOIN r ON b.log_date = r.log_date AND b.user_id <=> r.user_id"
        )

    def totals_sql(self, ods: Mapping[str, str], scope: Scope) -> tuple[str, dict[str, str]]:
        pred, time = scope_predicate(scope, typed=False), ods_time_select(self.grain)
        query = (
            "SELECT log_date, sum(bet_count) AS bet_count, sum(bet_amount) AS bet_amount, "
            "sum(recharge_count) AS recharge_count, sum(recharge_amount) AS recharge_amount FROM ("
            f"SELECT {time}, count(*) AS bet_count, {MONEY} AS bet_amount, 0L AS recharge_count, {ZERO_MONEY} AS recharge_amount "
            f"FROM {ods[self.bet_event]} WHERE {pred} GROUP BY 1 "
            f"UNION ALL SELECT {time}, 0L, {ZERO_MONEY}, count(*), {MONEY} "
            f"FROM {ods[self.recharge_event]} WHERE {pred} AND status = '{self.success_status}' GROUP BY 1"
            ") GROUP BY log_date"
        )
        return query, {m: f"sum({m})" for m in ("bet_count", "bet_amount", "recharge_count", "recharge_amount")}
