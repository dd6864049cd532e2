import dagster as dg

DLQ_ASSET_KEY = dg.AssetKey(["kafka", "dlq_events"])
#: every alert the sensors deliver is also an observation of this asset (the UI's alert history)
ALERTS_ASSET_KEY = dg.AssetKey(["lakebus", "alerts"])
STATUS_SENSOR_INTERVAL_S = 30
DLQ_SENSOR_INTERVAL_S = 30
DLQ_MAX_RECORDS_PER_TICK = 5000
DLQ_SAMPLES_PER_CLASS = 3
#: a DLQ reason not seen for this long alerts again when it comes back
DLQ_REASON_QUIET_S = 24 * 3600
