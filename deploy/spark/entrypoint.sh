#!/bin/sh
# The Spark Connect server's entrypoint (lakebus/spark-connect image): starts the server with the
# properties file given as `--properties-file PATH` (default: the image's own), after appending the
# Iceberg REST catalog's credential or token from the environment (LAKEBUS_CATALOG_CREDENTIAL /
# LAKEBUS_CATALOG_TOKEN, from the Secret) to a private copy of it. Why: Iceberg's SparkCatalog reads
# them only from its options, and the file itself is a ConfigMap, which must never hold a secret.
set -eu
src=/opt/spark/conf/spark-connect.conf
if [ "${1:-}" = "--properties-file" ]; then src=$2; shift 2; fi
umask 077
conf=$(mktemp /tmp/spark-connect.XXXXXX)
cat "$src" > "$conf"
if [ -n "${LAKEBUS_CATALOG_CREDENTIAL:-}" ]; then printf 'spark.sql.catalog.lake.credential=%s\n' "$LAKEBUS_CATALOG_CREDENTIAL" >> "$conf"; fi
if [ -n "${LAKEBUS_CATALOG_TOKEN:-}" ]; then printf 'spark.sql.catalog.lake.token=%s\n' "$LAKEBUS_CATALOG_TOKEN" >> "$conf"; fi
exec /opt/spark/bin/spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer --properties-file "$conf" "$@"
