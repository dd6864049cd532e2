import dagster as dg

TOPIC_INVENTORY_KEY = dg.AssetKey(["kafka", "topic_inventory"])
CONNECT_CLUSTER_KEY = dg.AssetKey(["connect", "cluster"])
INVENTORY_SENSOR_INTERVAL_S = 60
#: caps on what one observation shows (the UI stays readable on a big cluster)
MAX_TOPICS_SHOWN = 200
MAX_FIELDS_SHOWN = 60
