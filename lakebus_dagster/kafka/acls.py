"""The Kafka principals lakebus runs with where Kafka authorizes, and their ACLs, declared once.

The local ``secured`` profile creates them on its broker (:mod:`lakebus_dagster.stack.security`, which
``make test`` proves), and deploy/'s Strimzi ``KafkaUser`` resources are rendered from the same
declaration (:mod:`lakebus_dagster.deployment.access`), so production cannot drift from what is proven:

* ``lakebus`` (:data:`SUPER_USER`) — Dagster's own (provisioning, sensors, ledger): a super user;
* ``connect`` — the Connect worker and the Iceberg sink: may read the bus, read and write the sink's
  control topic, write the DLQ, and use Connect's internal topics and groups — nothing else;
* ``producer`` — what a service sending events gets: may only write (and describe) the bus.

Topic rules are prefixes (``events`` covers the suffixed buses of isolated test runs, ``events-<suffix>``).
"""

from __future__ import annotations

__all__ = ["ACLS", "SUPER_USER"]

SUPER_USER = "lakebus"

#: (resource type, pattern type, name, operations) per principal; names as ``BusLayout.default()`` spells them
ACLS: dict[str, list[tuple[str, str, str, tuple[str, ...]]]] = {
    "connect": [
        ("TOPIC", "PREFIXED", "_connect-", ("READ", "WRITE", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS")),
        ("GROUP", "LITERAL", "lakebus-connect", ("READ",)),
        ("TOPIC", "PREFIXED", "events", ("READ", "DESCRIBE")),
        # the sink task's group connect-<connector> and its coordinator's connect-<connector>-coord
        ("GROUP", "PREFIXED", "connect-", ("READ",)),
        ("TOPIC", "PREFIXED", "iceberg-control-", ("READ", "WRITE", "DESCRIBE")),
        ("GROUP", "PREFIXED", "cg-control-", ("READ",)),
        # the sink commits through transactions: worker-txn-<uuid>-<task>, coordinator-txn-<uuid>-<task>
        ("TRANSACTIONAL_ID", "PREFIXED", "worker-txn-", ("WRITE", "DESCRIBE")),
        ("TRANSACTIONAL_ID", "PREFIXED", "coordinator-txn-", ("WRITE", "DESCRIBE")),
        ("TOPIC", "PREFIXED", "dlq-", ("WRITE", "DESCRIBE")),
    ],
    "producer": [("TOPIC", "PREFIXED", "events", ("WRITE", "DESCRIBE"))],
}
