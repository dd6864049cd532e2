"""Scopes: the half-open UTC time range ``[start, end)`` every DWS write and check works on.

One Dagster partition is a scope, and so is a single-run backfill of many partitions.
:func:`scope_predicate` renders a scope as a ``log_date``/``hour`` predicate, both for the ODS tables
(strings ``'YYYY-MM-DD'``/``'HH'``, which compare correctly as strings because they are zero-padded)
and for the DWS tables (``date``/``int``), so Iceberg prunes data files by partition (DWS) or by
column min/max statistics (ODS).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Literal

Grain = Literal["hour", "day"]

_UTC = timezone.utc


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=_UTC) if value.tzinfo is None else value.astimezone(_UTC)


@dataclass(frozen=True)
class Scope:
    """``[start, end)`` in UTC, aligned to ``grain`` (whole hours or whole days)."""

    start: datetime
    end: datetime
    grain: Grain

    def __post_init__(self) -> None:
        start, end = _utc(self.start), _utc(self.end)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "end", end)
        if self.grain not in ("hour", "day"):
            raise ValueError(f"grain must be 'hour' or 'day', got {self.grain!r}")
        if end <= start:
            raise ValueError(f"empty scope: end {end.isoformat()} is not after start {start.isoformat()}")
        for name, value in (("start", start), ("end", end)):
            if value.minute or value.second or value.microsecond or (self.grain == "day" and value.hour):
                raise ValueError(f"scope {name} {value.isoformat()} is not aligned to whole {self.grain}s")

    @classmethod
    def hours(cls, start: datetime, count: int = 1) -> Scope:
        return cls(start, _utc(start) + timedelta(hours=count), "hour")

    @classmethod
    def days(cls, first: date | str, count: int = 1) -> Scope:
        day = date.fromisoformat(first) if isinstance(first, str) else first
        start = datetime(day.year, day.month, day.day, tzinfo=_UTC)
        return cls(start, start + timedelta(days=count), "day")

    @property
    def last(self) -> datetime:
        """The start of the last hour/day inside the scope."""
        return self.end - (timedelta(hours=1) if self.grain == "hour" else timedelta(days=1))

    def slots(self) -> list[tuple[str, int | None]]:
        """Every ``(log_date, hour)`` of the scope (hour is None for a day grain)."""
        step = timedelta(hours=1) if self.grain == "hour" else timedelta(days=1)
        out, at = [], self.start
        while at < self.end:
            out.append((at.date().isoformat(), at.hour if self.grain == "hour" else None))
            at += step
        return out

    def describe(self) -> str:
        fmt = "%Y-%m-%d %H:00" if self.grain == "hour" else "%Y-%m-%d"
        first, last = self.start.strftime(fmt), self.last.strftime(fmt)
        return first if first == last else f"{first} .. {last}"


def _date_literal(day: date, typed: bool) -> str:
    return f"DATE '{day.isoformat()}'" if typed else f"'{day.isoformat()}'"


def _hour_literal(hour: int, typed: bool) -> str:
    return str(hour) if typed else f"'{hour:02d}'"


def scope_predicate(scope: Scope, *, typed: bool, alias: str | None = None) -> str:
    """SQL predicate selecting the scope's rows by ``log_date`` (and ``hour`` for an hour grain).

    ``typed``: the DWS layout (``log_date date``, ``hour int``); otherwise the ODS layout (zero-padded
    strings, compared as strings). Only comparisons of a column with a literal, joined by AND/OR, so
    Iceberg turns the predicate into a partition / min-max filter.
    """
    col = (lambda c: f"{alias}.{c}") if alias else (lambda c: c)
    d, h = col("log_date"), col("hour")

    def dlit(day: date) -> str:
        return _date_literal(day, typed)

    def hlit(hour: int) -> str:
        return _hour_literal(hour, typed)

    def days(first: date, last: date) -> str:
        return f"{d} = {dlit(first)}" if first == last else f"{d} BETWEEN {dlit(first)} AND {dlit(last)}"

    first, last = scope.start, scope.last
    if scope.grain == "day":
        return f"({days(first.date(), last.date())})"
    d0, h0, dn, hn = first.date(), first.hour, last.date(), last.hour
    if d0 == dn:
        hours = "" if (h0, hn) == (0, 23) else (
            f" AND {h} = {hlit(h0)}" if h0 == hn else f" AND {h} BETWEEN {hlit(h0)} AND {hlit(hn)}"
        )
        return f"({d} = {dlit(d0)}{hours})"
    clauses = []
    full_first = d0 if h0 == 0 else d0 + timedelta(days=1)
    full_last = dn if hn == 23 else dn - timedelta(days=1)
    if h0 != 0:
        clauses.append(f"({d} = {dlit(d0)} AND {h} >= {hlit(h0)})")
    if full_first <= full_last:
        clauses.append(f"({days(full_first, full_last)})")
    if hn != 23:
        clauses.append(f"({d} = {dlit(dn)} AND {h} <= {hlit(hn)})")
    return "(" + " OR ".join(clauses) + ")"
