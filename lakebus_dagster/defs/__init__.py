"""Dagster definitions, one sub-package per domain; each registers its own ``defs``."""
