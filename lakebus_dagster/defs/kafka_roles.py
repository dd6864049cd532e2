"""Which Kafka principal a run uses (the roles: :mod:`lakebus_dagster.kafka.acls`).

Sensors and ordinary runs take the resource ``kafka``: the observer. Only the jobs that change the bus
take :data:`OPERATIONS_KEY` (the operations principal, ``LAKEBUS_KAFKA_OPS_USERNAME`` /
``LAKEBUS_KAFKA_OPS_PASSWORD``; unset: the observer's) and carry :data:`OPERATIONS_TAGS`. Without SASL
both resources are the same unauthenticated client.
"""

from __future__ import annotations

import json

from lakebus_dagster.kafka.acls import OPERATIONS_SECRET

__all__ = ["OPERATIONS_KEY", "OPERATIONS_TAGS"]

#: the resource key of the bus-changing jobs' Kafka client
OPERATIONS_KEY = "operations"
#: the bus-changing jobs' run tags: on Kubernetes (K8sRunLauncher) only their run pods get the operations
#: principal's Secret (its password); other launchers ignore the tag
OPERATIONS_TAGS = {"dagster-k8s/config": json.dumps(
    {"container_config": {"env_from": [{"secret_ref": {"name": OPERATIONS_SECRET}}]}}, sort_keys=True)}
