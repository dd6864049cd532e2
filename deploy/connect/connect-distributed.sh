#!/bin/sh
# lakebus's Connect image runs the worker through this script (compose: the image's CMD; Strimzi: the
# operator's kafka_connect_run.sh execs bin/connect-distributed.sh with its generated properties), so
# the REST API is behind HTTP basic auth on both, as on the local `secured` profile
# (lakebus_dagster/stack/security.py): a JAAS file whose PropertyFileLoginModule reads a user file,
# checked by Kafka's JaasBasicAuthFilter — through lakebus's REST extension
# (io.lakebus.connect.rest.BasicAuthRestExtension, in lakebus's plugin), which lets `GET /` and
# `GET /health` through unauthenticated: Strimzi's liveness and readiness probes call them without
# credentials, and Kafka's own BasicAuthSecurityRestExtension would refuse them. Both files are
# written here, mode 0600 in a private directory, from LAKEBUS_CONNECT_USERNAME / LAKEBUS_CONNECT_PASSWORD
# (compose: the environment; Kubernetes: the ConfigMap lakebus-config and the Secret lakebus-secrets,
# the pair lakebus's Connect client sends). Without them the worker does not start: the REST API can
# change every connector. Strimzi refuses `rest.*` keys in KafkaConnect.spec.config, hence the
# properties copy below.
set -eu
if [ "$#" -lt 1 ] || [ ! -r "$1" ]; then
  echo "lakebus connect: usage: connect-distributed.sh <worker.properties> [...]" >&2
  exit 2
fi
if [ -z "${LAKEBUS_CONNECT_USERNAME:-}" ] || [ -z "${LAKEBUS_CONNECT_PASSWORD:-}" ]; then
  echo "lakebus connect: set LAKEBUS_CONNECT_USERNAME and LAKEBUS_CONNECT_PASSWORD: the REST API never runs without basic auth" >&2
  exit 1
fi
case "$LAKEBUS_CONNECT_USERNAME" in
  *[!A-Za-z0-9_.-]*) echo "lakebus connect: LAKEBUS_CONNECT_USERNAME may hold only A-Z a-z 0-9 _ . -" >&2; exit 1 ;;
esac
umask 077
dir=$(mktemp -d "${TMPDIR:-/tmp}/lakebus-connect.XXXXXX")
printf '%s=%s\n' "$LAKEBUS_CONNECT_USERNAME" "$LAKEBUS_CONNECT_PASSWORD" > "$dir/rest-users.properties"
printf 'KafkaConnect {\n  org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required\n  file="%s";\n};\n' \
  "$dir/rest-users.properties" > "$dir/rest-jaas.conf"
properties=$1
shift
grep -v '^[[:space:]]*rest\.extension\.classes[[:space:]]*[=:]' "$properties" > "$dir/worker.properties" || true
echo "rest.extension.classes=io.lakebus.connect.rest.BasicAuthRestExtension" >> "$dir/worker.properties"
KAFKA_OPTS="${KAFKA_OPTS:-} -Djava.security.auth.login.config=$dir/rest-jaas.conf"
export KAFKA_OPTS
# the worker itself needs neither (connector configs never name them)
unset LAKEBUS_CONNECT_PASSWORD
exec "$(dirname "$0")/connect-distributed-kafka.sh" "$dir/worker.properties" "$@"
