"""Intervals and limits of the monitoring sensors (the DLQ asset's key: :mod:`lakebus_dagster.defs.asset_keys`)."""

#: one shipped commit interval (10 s): the lost-coordinator rule alerts after 2 intervals without a
#: commit, so ticking every interval keeps the alert within 3 intervals of the sink's last commit
#: (a 30 s tick alone would spend the whole budget waiting for the next evaluation)
STATUS_SENSOR_INTERVAL_S = 10
DLQ_SENSOR_INTERVAL_S = 30
DLQ_MAX_RECORDS_PER_TICK = 5000
DLQ_SAMPLES_PER_CLASS = 3
#: a DLQ reason not seen for this long alerts again when it comes back
DLQ_REASON_QUIET_S = 24 * 3600
