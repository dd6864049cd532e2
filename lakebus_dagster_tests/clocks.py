"""A clock the tests give the sensors through their ``clock`` resource (the shipped one is wall time)."""

from __future__ import annotations

from lakebus_dagster.defs.clock import ClockResource


class FixedClock(ClockResource):
    """A clock stopped at ``at`` (seconds since the epoch): a test moves time by giving the next tick
    another one."""

    at: float

    def now(self) -> float:
        return self.at


class ManualTime:
    """Time that passes only when ``sleep`` is called: for code that takes a clock and a sleep (the
    clock as a callable, or as ``monotonic``)."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
