"""Watching the bus: connector incidents (open once, alert once, clear once), the restart backoff
policy, and DLQ record decoding. Pure logic over plain data; the Dagster sensors drive it."""
