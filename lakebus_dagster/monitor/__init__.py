"""Watching the bus: connector incidents (open once, alert once, clear once), the stall rules, the
restart backoff policy and DLQ record decoding. No Dagster and no I/O: pure logic over plain data
(what :mod:`lakebus_dagster.observe` read); the Dagster sensors and ``lakebus status`` drive it."""
