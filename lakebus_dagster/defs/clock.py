"""The sensors' clock, a resource (``clock``): wall time as shipped.

Why a resource and not ``time.time`` in each sensor module: a sensor's rules depend on how long
things have lasted (an outage, a stall, a ping's age), and a test must be able to move time between
ticks. Given through the same resource key as everything else a sensor reads, a test's clock reaches
the sensor the way the deployment's does, through Dagster's own tick evaluation, with no module
global replaced under the code.
"""

from __future__ import annotations

import time

import dagster as dg

#: the resource key every time-dependent sensor reads its clock from
CLOCK_KEY = "clock"


class ClockResource(dg.ConfigurableResource):
    """Seconds since the epoch, as ``time.time()``; a subclass answers another time."""

    def now(self) -> float:
        return time.time()
