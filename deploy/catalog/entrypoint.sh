#!/bin/bash
# Start the Iceberg REST catalog in the foreground with its settings from the environment (the same
# GRAVITINO_* names as the upstream image; every one is required, so a missing setting stops the
# container at once, naming it). The configuration file is written inside the container at start,
# never baked into the image: the JDBC password and the S3 key pair arrive as environment variables.
set -euo pipefail
home="${GRAVITINO_SERVER_HOME:-/root/gravitino-iceberg-rest-server}"
conf="$home/conf/gravitino-iceberg-rest-server.conf"
p=gravitino.iceberg-rest.
{
  echo
  echo "# written by lakebus's entrypoint.sh"
  echo "${p}host = 0.0.0.0"
  echo "${p}httpPort = 9001"
  echo "${p}catalog-backend = jdbc"
  echo "${p}jdbc-driver = ${GRAVITINO_JDBC_DRIVER:?set GRAVITINO_JDBC_DRIVER}"
  echo "${p}uri = ${GRAVITINO_URI:?set GRAVITINO_URI (jdbc:postgresql://host:5432/db)}"
  echo "${p}jdbc-user = ${GRAVITINO_JDBC_USER:?set GRAVITINO_JDBC_USER}"
  echo "${p}jdbc-password = ${GRAVITINO_JDBC_PASSWORD:?set GRAVITINO_JDBC_PASSWORD}"
  echo "${p}jdbc-initialize = true"
  echo "${p}warehouse = ${GRAVITINO_WAREHOUSE:?set GRAVITINO_WAREHOUSE (s3://bucket/)}"
  echo "${p}io-impl = ${GRAVITINO_IO_IMPL:?set GRAVITINO_IO_IMPL}"
  echo "${p}s3-endpoint = ${GRAVITINO_S3_ENDPOINT:?set GRAVITINO_S3_ENDPOINT}"
  echo "${p}s3-region = ${GRAVITINO_S3_REGION:?set GRAVITINO_S3_REGION}"
  echo "${p}s3-access-key-id = ${GRAVITINO_S3_ACCESS_KEY:?set GRAVITINO_S3_ACCESS_KEY}"
  echo "${p}s3-secret-access-key = ${GRAVITINO_S3_SECRET_KEY:?set GRAVITINO_S3_SECRET_KEY}"
  # MinIO serves buckets path-style
  echo "${p}s3-path-style-access = true"
} >> "$conf"
chmod 600 "$conf"
cd "$home"
exec bin/gravitino-iceberg-rest-server.sh run
