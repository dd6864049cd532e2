"""The Kafka principals lakebus runs with where Kafka authorizes, and their ACLs, declared once.

The local ``secured`` profile creates them on its broker (:mod:`lakebus_dagster.stack.security`, which
``make test`` proves), and deploy/'s Strimzi ``KafkaUser`` resources are rendered from the same
declaration (:mod:`lakebus_dagster.deployment.access`), so production cannot drift from what is proven:

* ``lakebus`` (:data:`SUPER_USER`) — Dagster's own (provisioning, sensors, ledger): a super user;
* ``connect`` — the Connect worker and the Iceberg sink: may read the bus, read and write the sink's
  control topic, write the DLQ, and use Connect's internal topics and groups; and change capture's
  (issue 30; the capture :data:`CAPTURE_NAME`): the Debezium source writes its change and heartbeat
  topics and reads its Kafka signal channel (group ``<capture>-signals``), the change-table sink reads
  the change topics, and exactly-once source delivery (KIP-618) uses the transactional ids
  ``connect-cluster-<group.id>`` (the leader) and ``<group.id>-<connector>-<task>`` (each source task)
  — nothing else. (Declared and checked as rendered; capture has not run on the secured profile.)
* ``producer`` — what a service sending events gets: may only write (and describe) the bus.

Topic rules are prefixes (``events`` covers the suffixed buses of isolated test runs, ``events-<suffix>``).
"""

from __future__ import annotations

__all__ = ["ACLS", "CAPTURE_NAME", "CONNECT_GROUP", "SUPER_USER"]

SUPER_USER = "lakebus"
#: the Connect workers' group.id (the secured profile's worker, Strimzi's KafkaConnect)
CONNECT_GROUP = "lakebus-connect"
#: the change capture's name the rules cover (``ChangeCaptureResource``'s default, Debezium's topic.prefix; a
#: prefix, so the tests' ``shop_<run id>`` captures too): its topics are ``<name>.<schema>.<table>``,
#: ``<name>.signals``, ``__debezium-heartbeat.<name>``
CAPTURE_NAME = "shop"

#: (resource type, pattern type, name, operations) per principal; names as ``BusLayout.default()`` spells them
ACLS: dict[str, list[tuple[str, str, str, tuple[str, ...]]]] = {
    "connect": [
        ("TOPIC", "PREFIXED", "_connect-", ("READ", "WRITE", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS")),
        ("GROUP", "LITERAL", CONNECT_GROUP, ("READ",)),
        ("TOPIC", "PREFIXED", "events", ("READ", "DESCRIBE")),
        # the sink task's group connect-<connector> and its coordinator's connect-<connector>-coord
        ("GROUP", "PREFIXED", "connect-", ("READ",)),
        ("TOPIC", "PREFIXED", "iceberg-control-", ("READ", "WRITE", "DESCRIBE")),
        ("GROUP", "PREFIXED", "cg-control-", ("READ",)),
        # the sink commits through transactions: worker-txn-<uuid>-<task>, coordinator-txn-<uuid>-<task>
        ("TRANSACTIONAL_ID", "PREFIXED", "worker-txn-", ("WRITE", "DESCRIBE")),
        ("TRANSACTIONAL_ID", "PREFIXED", "coordinator-txn-", ("WRITE", "DESCRIBE")),
        ("TOPIC", "PREFIXED", "dlq-", ("WRITE", "DESCRIBE")),
        # change capture: the source writes <capture>.<schema>.<table> and reads <capture>.signals, the sink reads
        # the change topics; the signal channel's consumer group <capture>-signals; the source's heartbeats
        ("TOPIC", "PREFIXED", CAPTURE_NAME, ("READ", "WRITE", "DESCRIBE")),
        ("GROUP", "PREFIXED", CAPTURE_NAME, ("READ",)),
        ("TOPIC", "PREFIXED", f"__debezium-heartbeat.{CAPTURE_NAME}", ("WRITE", "DESCRIBE")),
        # exactly-once source delivery (KIP-618): the leader's connect-cluster-<group.id>, each source task's
        # <group.id>-<connector>-<task> (it also writes the offsets topic in its transactions: _connect-, above)
        ("TRANSACTIONAL_ID", "LITERAL", f"connect-cluster-{CONNECT_GROUP}", ("WRITE", "DESCRIBE")),
        ("TRANSACTIONAL_ID", "PREFIXED", f"{CONNECT_GROUP}-", ("WRITE", "DESCRIBE")),
    ],
    "producer": [("TOPIC", "PREFIXED", "events", ("WRITE", "DESCRIBE"))],
}
