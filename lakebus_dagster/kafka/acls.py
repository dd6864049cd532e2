"""The Kafka principals where Kafka authorizes (one per role, least privilege), their ACLs and the
environment variables of their secrets, declared once.

The local ``secured`` profile creates them on its broker (:mod:`lakebus_dagster.stack.security`, which
``make test`` proves), and deploy/'s Strimzi ``KafkaUser`` resources are rendered from the same
declaration (:mod:`lakebus_dagster.deployment.access`), so production cannot drift from what is proven:

* ``lakebus`` (:data:`OBSERVER`) — sensors and ordinary runs (status, inventory, ledger, reports): reads
  and describes the topics and groups it watches; writes only its own state (the offset ledger's
  ``<bus>.ledger``, a LITERAL rule, and the connector target states); creates, alters and deletes nothing;
* ``lakebus-ops`` (:data:`OPERATIONS`) — only the jobs that change the bus (provisioning, capture
  provisioning, DLQ replay, re-sync signals, retention's retired offsets): creates, alters, deletes,
  reads and writes lakebus's own topics (by their prefixes) and manages lakebus's consumer groups;
  no cluster-wide right, no ACL management;
* ``connect`` — the Connect worker and the Iceberg sink: may read the bus, read and write the sink's
  control topic, write the DLQ, and use Connect's internal topics and groups; and change capture's
  (the capture :data:`CAPTURE_NAME`): the Debezium source writes its change and heartbeat
  topics and reads its Kafka signal channel (group ``<capture>-signals``), the change-table sink reads
  the change topics, and exactly-once source delivery (KIP-618) uses the transactional ids
  ``connect-cluster-<group.id>`` (the leader) and ``<group.id>-<connector>-<task>`` (each source task)
  — nothing else. (Declared and checked as rendered; capture has not run on the secured profile.)
* ``producer`` — what a service sending events gets: WRITE and DESCRIBE on the bus topic by a LITERAL
  rule, so not on ``<bus>.ledger`` nor any other topic.

No lakebus principal is a super user. The local broker's own inter-broker login :data:`BROKER_USER` is
(with KRaft's anonymous controller listener): the brokers' only, never a run's; it also creates these
ACLs when the stack starts. In Kubernetes the brokers are Strimzi's (their own certificates).

The bus-specific rules (the producer's, the observer's ledger) name one bus: :func:`acls` of that bus;
:data:`ACLS` is the default bus's (``events``). Other rules are prefixes (``events`` covers the
suffixed buses of isolated test runs for reading, ``events-<suffix>``).
"""

from __future__ import annotations

from dataclasses import dataclass

from lakebus_dagster.secret_env import KAFKA_OPS_PASSWORD_VAR, KAFKA_PASSWORD_VAR

__all__ = ["ACLS", "BROKER_USER", "CAPTURE_NAME", "CONNECT_GROUP", "OBSERVER", "OPERATIONS", "OPERATIONS_SECRET", "PRINCIPALS",
           "Principal", "acls"]

Rule = tuple[str, str, str, tuple[str, ...]]

#: the broker's inter-broker user (local secured profile only): a super user, the brokers' alone
BROKER_USER = "broker"
OBSERVER = "lakebus"
OPERATIONS = "lakebus-ops"
#: the Kubernetes Secret holding the operations principal's password: mounted only into the runs of the
#: bus-changing jobs (their ``dagster-k8s/config`` tag), never into the code server or other runs
OPERATIONS_SECRET = "lakebus-kafka-ops"
#: the Connect workers' group.id (the secured profile's worker, Strimzi's KafkaConnect)
CONNECT_GROUP = "lakebus-connect"
#: the change capture's name the rules cover (``ChangeCaptureResource``'s default, Debezium's topic.prefix; a
#: prefix, so the tests' ``shop_<run id>`` captures too): its topics are ``<name>.<schema>.<table>``,
#: ``<name>.signals``, ``__debezium-heartbeat.<name>``
CAPTURE_NAME = "shop"
#: the default bus topic (``BusLayout.default()``'s)
BUS_TOPIC = "events"
#: the prefixes of every topic lakebus declares: bus (and its ledger), DLQ (and its replay ledger), the sink's
#: control topics, the connector target states, change capture's
LAKEBUS_TOPIC_PREFIXES = ("events", "dlq-", "iceberg-control-", "lakebus-connector-states", CAPTURE_NAME,
                          f"__debezium-heartbeat.{CAPTURE_NAME}")


@dataclass(frozen=True)
class Principal:
    """A principal and the environment variables lakebus reads its user name (None: a fixed name, not
    lakebus's client) and password from."""

    name: str
    password_var: str
    username_var: str | None = None
    super_user: bool = False


#: every principal of the secured profile, lakebus's two first
PRINCIPALS: dict[str, Principal] = {p.name: p for p in (
    Principal(OBSERVER, KAFKA_PASSWORD_VAR, "LAKEBUS_KAFKA_SASL_USERNAME"),
    Principal(OPERATIONS, KAFKA_OPS_PASSWORD_VAR, "LAKEBUS_KAFKA_OPS_USERNAME"),
    Principal("connect", "LAKEBUS_CONNECT_KAFKA_PASSWORD"),
    Principal("producer", "LAKEBUS_PRODUCER_KAFKA_PASSWORD"),
    Principal(BROKER_USER, "LAKEBUS_BROKER_KAFKA_PASSWORD", super_user=True),
)}

_READ = ("READ", "DESCRIBE", "DESCRIBE_CONFIGS")
_OWN = ("CREATE", "ALTER", "ALTER_CONFIGS", "DELETE", "READ", "WRITE", "DESCRIBE", "DESCRIBE_CONFIGS")


def acls(bus: str = BUS_TOPIC) -> dict[str, list[Rule]]:
    """(resource type, pattern type, name, operations) per principal (the super user has none), for the bus
    topic ``bus``; names as ``BusLayout.default()`` spells them."""
    return {
        OBSERVER: [
            ("TOPIC", "PREFIXED", "events", _READ),
            ("TOPIC", "LITERAL", f"{bus}.ledger", ("WRITE",)),
            ("TOPIC", "PREFIXED", "dlq-", _READ),
            ("TOPIC", "PREFIXED", "iceberg-control-", _READ),
            # the connector target states (declared by the pause/resume jobs, read by the sensors)
            ("TOPIC", "PREFIXED", "lakebus-connector-states", (*_READ, "WRITE")),
            ("TOPIC", "PREFIXED", CAPTURE_NAME, _READ),
            ("TOPIC", "PREFIXED", "_connect-", ("DESCRIBE", "DESCRIBE_CONFIGS")),
            ("GROUP", "PREFIXED", "lakebus-", ("READ", "DESCRIBE")),
            # the sink's and capture's groups: their committed offsets (lag, progress)
            ("GROUP", "PREFIXED", "connect-", ("DESCRIBE",)),
        ],
        OPERATIONS: [
            *[("TOPIC", "PREFIXED", prefix, _OWN) for prefix in LAKEBUS_TOPIC_PREFIXES],
            ("TOPIC", "PREFIXED", "_connect-", ("DESCRIBE", "DESCRIBE_CONFIGS")),
            ("GROUP", "PREFIXED", "lakebus-", ("READ", "DESCRIBE", "DELETE")),
            ("GROUP", "PREFIXED", "connect-", ("DESCRIBE",)),
        ],
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
        "producer": [("TOPIC", "LITERAL", bus, ("WRITE", "DESCRIBE"))],
    }


#: the default bus's ACLs, per principal
ACLS: dict[str, list[Rule]] = acls()
