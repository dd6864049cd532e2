"""Watching the bus: connector incidents (open once, alert once, clear once), the restart backoff
policy, DLQ record decoding, and the sink's progress. No Dagster: pure logic over plain data, and
reads through plain clients (``progress``); the Dagster sensors and ``lakebus status`` drive it."""
