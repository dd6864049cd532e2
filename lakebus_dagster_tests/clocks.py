"""A clock the tests give the sensors through their ``clock`` resource (the shipped one is wall time)."""

from __future__ import annotations

from lakebus_dagster.defs.clock import ClockResource


class FixedClock(ClockResource):
    """A clock stopped at ``at`` (seconds since the epoch): a test moves time by giving the next tick
    another one."""

    at: float

    def now(self) -> float:
        return self.at
