"""Intervals and display caps of the inventory domain (its assets' keys: :mod:`lakebus_dagster.defs.asset_keys`)."""

INVENTORY_SENSOR_INTERVAL_S = 60
#: caps on what one observation shows (the UI stays readable on a big cluster)
MAX_TOPICS_SHOWN = 200
MAX_FIELDS_SHOWN = 60
