"""The events domain: jobs that put sample events on the bus (``generate_sample_events``)."""

import dagster as dg

from .jobs import generate_sample_events

defs = dg.Definitions(jobs=[generate_sample_events])

__all__ = ["defs", "generate_sample_events"]
