"""A PostgreSQL database's change capture, declared: :class:`CaptureSpec` → the Debezium source and
the Iceberg change-table sink as :class:`~lakebus_dagster.bus.connector_specs.ConnectorSpec`\\ s, and
the topics they need (created explicitly: the broker's auto-create is off).

The path of one row change::

    PostgreSQL WAL ─ slot lakebus_<name>, publication lakebus_<name> (pgoutput)
      → Debezium source <name>-postgres-source  (exactly.once.support=required where the worker has
        exactly.once.source.support=enabled; Schema+JSON envelopes, keys and values)
      → topic <name>.<schema>.<table>            (the full Debezium change event: before, after, source, op)
      → Iceberg sink <name>-cdc-iceberg-sink     (read_committed; ExtractNewRecordState: the row image
        plus __op, __lsn, __txId, __source_ts_ms, __table, and __deleted — deletes kept as rows)
      → <namespace>.pg_<schema>_<table>          (append-only change table, typed: see :mod:`.tables`)

Why these settings (the research notes, verified on this stack where marked in the tests):

- ``decimal.handling.mode=string``, ``time.precision.mode=connect``: the sink writes decimal(p,s), timestamptz
  and date correctly only into typed columns: lakebus creates the change tables typed (:mod:`.tables`).
- ``publication.autocreate.mode=disabled``: lakebus creates and checks the publication (:mod:`.database`),
  with the heartbeat table ``heartbeat.action.query`` upserts so an idle slot's ``confirmed_flush_lsn`` advances.
- ``snapshot.mode=initial``: a lost slot FAILS the task loudly instead of silently re-snapshotting.
- ``tombstones.on.delete=false``: a delete is one event, rewritten into a row with ``__deleted=true``.
- the password is ``${env:LAKEBUS_POSTGRES_PASSWORD}`` (the worker's ``EnvVarConfigProvider``): configs show the placeholder only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from lakebus_dagster.bus.connector_specs import ConnectorSpec
from lakebus_dagster.bus.desired import CatalogEndpoints, env_placeholder, sink_catalog_props
from lakebus_dagster.bus.layout import ICEBERG_SINK_CLASS, LayoutError, TopicSpec
from lakebus_dagster.bus.provenance import chain_transforms, provenance_transform
from lakebus_dagster.bus.table_properties import sink_auto_create_props
# one spelling of the class, beside the rule that refuses moving its offsets
from lakebus_dagster.connect.source_offsets import DEBEZIUM_POSTGRES_CLASS
from lakebus_dagster.secret_env import POSTGRES_PASSWORD_VAR

EXTRACT_NEW_RECORD_STATE = "io.debezium.transforms.ExtractNewRecordState"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"

#: the change columns ExtractNewRecordState adds (``add.fields=op,lsn,txId,source.ts_ms,table`` and
#: the rewrite mode's ``__deleted``), in the change table after the row's own columns
OP_COLUMN, LSN_COLUMN, TX_COLUMN, SOURCE_TS_COLUMN, TABLE_COLUMN, DELETED_COLUMN = (
    "__op", "__lsn", "__txId", "__source_ts_ms", "__table", "__deleted")
ADD_FIELDS = "op,lsn,txId,source.ts_ms,table"
#: the change table's property naming the source's primary key (comma-separated), for the current-state MERGE
PRIMARY_KEY_PROPERTY = "lakebus.cdc.primary-key"

_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")


class CaptureError(ValueError):
    """A capture declaration, or the database it names, cannot be captured as declared; the message
    names the capture, table, column or setting."""


@dataclass(frozen=True)
class CaptureSpec:
    """One captured PostgreSQL database: where it is, which tables, and where their changes land.

    ``name`` is the Debezium ``topic.prefix`` and the stem of every other name (connectors, slot,
    publication, topics), so two captures never share a slot (Debezium's slots are one per
    connector)."""

    name: str
    host: str
    port: int
    database: str
    user: str
    schema: str
    tables: tuple[str, ...]
    #: the table ``heartbeat.action.query`` upserts (in the publication, not captured to a topic)
    heartbeat_table: str
    #: the Iceberg namespace of the change tables
    namespace: str
    #: the variable holding the role's password (the worker resolves ``${env:…}`` with it)
    password_var: str = POSTGRES_PASSWORD_VAR
    heartbeat_interval_ms: int = 10_000
    #: ask for exactly-once source delivery (honoured by a worker with exactly.once.source.support=enabled)
    exactly_once: bool = True
    commit_interval_ms: int = 10_000
    commit_timeout_ms: int = 30_000  # how long the sink's coordinator waits for its workers per commit cycle
    partitions: int = 1
    replication_factor: int = 1
    #: the brokers Debezium's Kafka signal channel reads from (as the Connect workers reach them);
    #: "" = no signal channel, so no re-sync (resync_captured_table refuses, naming this)
    signal_bootstrap: str = ""
    #: per table (:mod:`lakebus_dagster.capture_declaration`): key columns (none: the primary key) and change-time column
    keys: tuple[tuple[str, tuple[str, ...]], ...] = ()
    changed_at: tuple[tuple[str, str], ...] = ()

    def key_of(self, table: str) -> tuple[str, ...]:
        return dict(self.keys).get(table, ())

    def __post_init__(self) -> None:
        for what, value in (("name", self.name), ("database", self.database), ("user", self.user),
                            ("schema", self.schema), ("heartbeat_table", self.heartbeat_table), ("namespace", self.namespace)):
            if not _IDENT.match(value):
                raise CaptureError(f"capture {self.name!r}: {what} {value!r} must be a lower-case identifier (a-z 0-9 _, "
                                   "at most 41 characters: it becomes slot, publication and topic names)")
        if not self.tables:
            raise CaptureError(f"capture {self.name!r}: at least one table is required")
        for table in self.tables:
            if not _IDENT.match(table):
                raise CaptureError(f"capture {self.name!r}: table {table!r} must be a lower-case identifier")
        if len(set(self.tables)) != len(self.tables):
            raise CaptureError(f"capture {self.name!r}: tables listed twice in {list(self.tables)}")
        if self.heartbeat_table in self.tables:
            raise CaptureError(f"capture {self.name!r}: the heartbeat table {self.heartbeat_table!r} must not be captured")
        if not 1 <= self.port <= 65535:
            raise CaptureError(f"capture {self.name!r}: port {self.port} is not in 1-65535")
        if self.heartbeat_interval_ms <= 0:
            raise CaptureError(f"capture {self.name!r}: heartbeat_interval_ms must be > 0 (an idle slot must advance)")

    # -- names --------------------------------------------------------------------------------
    @property
    def source_name(self) -> str:
        return f"{self.name}-postgres-source"

    @property
    def sink_name(self) -> str:
        return f"{self.name}-cdc-iceberg-sink"

    @property
    def slot(self) -> str:
        return f"lakebus_{self.name}"

    @property
    def publication(self) -> str:
        return f"lakebus_{self.name}"

    def qualified(self, table: str) -> str:
        return f"{self.schema}.{table}"

    def topic(self, table: str) -> str:
        """Debezium's default topic of a table: ``<topic.prefix>.<schema>.<table>``."""
        return f"{self.name}.{self.schema}.{table}"

    def change_table(self, table: str) -> str:
        """The Iceberg change table of a source table: ``<namespace>.pg_<schema>_<table>``."""
        return f"{self.namespace}.pg_{self.schema}_{table}"

    def current_table(self, table: str) -> str:
        """The current-state table built from the change table: ``<namespace>.pg_<schema>_<table>_current``."""
        return f"{self.change_table(table)}_current"

    @property
    def published_tables(self) -> tuple[str, ...]:
        """What the publication holds (``schema.table``): the captured tables and the heartbeat table."""
        return tuple(self.qualified(t) for t in (*self.tables, self.heartbeat_table))

    # -- topics -------------------------------------------------------------------------------
    def change_topics(self) -> list[TopicSpec]:
        # one partition keeps every key's changes in commit order (Debezium keys by primary key)
        return [TopicSpec(self.topic(t), self.partitions, self.replication_factor) for t in self.tables]

    @property
    def heartbeat_topic(self) -> TopicSpec:
        return TopicSpec(f"__debezium-heartbeat.{self.name}", 1, self.replication_factor)

    @property
    def signal_topic(self) -> TopicSpec:
        """Debezium's Kafka signal channel (execute-snapshot / stop-snapshot, keyed by topic.prefix):
        one partition, so signals are read in the order they were sent."""
        return TopicSpec(f"{self.name}.signals", 1, self.replication_factor)

    @property
    def control_topic(self) -> TopicSpec:
        return TopicSpec(f"iceberg-control-{self.name}", 1, self.replication_factor)

    def ledger_topic(self, table: str) -> TopicSpec:
        """``<change topic>.ledger``: compacted, the offset ledger's state of one change topic (its verified
        point, the problems last alerted), as the events path's ``<bus>.ledger`` is the bus topic's."""
        return TopicSpec(f"{self.topic(table)}.ledger", 1, self.replication_factor, {"cleanup.policy": "compact"})

    @property
    def dlq_topic(self) -> TopicSpec:
        return TopicSpec(f"dlq-{self.name}", 1, self.replication_factor, {"retention.ms": str(30 * 24 * 3600 * 1000)})

    # -- connectors ---------------------------------------------------------------------------
    def heartbeat_query(self) -> str:
        table = self.qualified(self.heartbeat_table)
        return f"INSERT INTO {table} (id, ts) VALUES (1, now()) ON CONFLICT (id) DO UPDATE SET ts = EXCLUDED.ts"

    def source_config(self) -> dict[str, str]:
        cfg = {
            "tasks.max": "1",
            "database.hostname": self.host,
            "database.port": str(self.port),
            "database.user": self.user,
            "database.password": env_placeholder(self.password_var),
            "database.dbname": self.database,
            "topic.prefix": self.name,
            "plugin.name": "pgoutput",
            "slot.name": self.slot,
            "publication.name": self.publication,
            "publication.autocreate.mode": "disabled",
            "table.include.list": ",".join(self.qualified(t) for t in self.tables),
            "snapshot.mode": "initial",
            "decimal.handling.mode": "string",
            "time.precision.mode": "connect",
            "tombstones.on.delete": "false",
            "heartbeat.interval.ms": str(self.heartbeat_interval_ms),
            "heartbeat.action.query": self.heartbeat_query(),
            # the worker's key default is StringConverter: Struct keys would become toString() text
            "key.converter": JSON_CONVERTER,
            "key.converter.schemas.enable": "true",
            "value.converter": JSON_CONVERTER,
            "value.converter.schemas.enable": "true",
        }
        if self.exactly_once:
            cfg["exactly.once.support"] = "required"
        if self.signal_bootstrap:
            cfg.update({
                # re-sync since T (resync_captured_table): incremental snapshots signalled through Kafka,
                # read-only (PostgreSQL >= 13: windows tracked by transaction ids and heartbeats), so lakebus
                # never writes to the operational database
                "read.only": "true",
                "signal.enabled.channels": "kafka",
                "signal.kafka.topic": self.signal_topic.name,
                "signal.kafka.bootstrap.servers": self.signal_bootstrap,
                "signal.kafka.groupId": f"{self.name}-signals",
                "incremental.snapshot.chunk.size": "1024",
            })
        return cfg

    def source_topics(self) -> tuple[TopicSpec, ...]:
        """What the Debezium source writes or reads: change topics, heartbeat, the signal channel if any."""
        signals = (self.signal_topic,) if self.signal_bootstrap else ()
        return (*self.change_topics(), self.heartbeat_topic, *signals)

    def sink_topics(self) -> tuple[TopicSpec, ...]:
        """What the change-table sink and its ledger need: change, ledger state, control and DLQ topics."""
        return (*self.change_topics(), *(self.ledger_topic(t) for t in self.tables), self.control_topic, self.dlq_topic)

    def source_spec(self) -> ConnectorSpec:
        return ConnectorSpec(self.source_name, DEBEZIUM_POSTGRES_CLASS, self.source_config(), topics=self.source_topics())

    def sink_config(self, lake: CatalogEndpoints) -> dict[str, str]:
        cfg: dict[str, str] = {
            "tasks.max": "1",
            "topics": ",".join(self.topic(t) for t in self.tables),
            "consumer.override.auto.offset.reset": "earliest",
            # Connect sets read_committed for its offset consumers only, not a sink's: without it the
            # sink would read records of aborted source transactions
            "consumer.override.isolation.level": "read_committed",
            "iceberg.tables": ",".join(self.change_table(t) for t in self.tables),
            "iceberg.tables.route-field": TABLE_COLUMN,
            # typed change tables are created by lakebus (cdc/tables.py) before the sink starts
            "iceberg.tables.auto-create-enabled": "false",
            "iceberg.tables.evolve-schema-enabled": "true",
            "iceberg.tables.schema-force-optional": "true",
            **sink_auto_create_props(),
            "iceberg.control.topic": self.control_topic.name,
            "iceberg.control.commit.interval-ms": str(self.commit_interval_ms),
            "iceberg.control.commit.timeout-ms": str(self.commit_timeout_ms),
            **sink_catalog_props("lakebus", lake),
            "key.converter": JSON_CONVERTER,
            "key.converter.schemas.enable": "true",
            "value.converter": JSON_CONVERTER,
            "value.converter.schemas.enable": "true",
            "errors.tolerance": "all",
            "errors.log.enable": "true",
            "errors.log.include.messages": "false",
            "errors.deadletterqueue.topic.name": self.dlq_topic.name,
            "errors.deadletterqueue.context.headers.enable": "true",
            "errors.deadletterqueue.topic.replication.factor": str(self.replication_factor),
        }
        unwrap = ("unwrap", {
            "type": EXTRACT_NEW_RECORD_STATE,
            "delete.tombstone.handling.mode": "rewrite",
            "add.fields": ADD_FIELDS,
        })
        # the provenance SMT exactly as the events sink configures it (its config is static per worker)
        chain_transforms(cfg, [unwrap, provenance_transform()])
        for table in self.tables:
            cfg[f"iceberg.table.{self.change_table(table)}.route-regex"] = f"^{table}$"
        return cfg

    def sink_spec(self, lake: CatalogEndpoints) -> ConnectorSpec:
        return ConnectorSpec(self.sink_name, ICEBERG_SINK_CLASS, self.sink_config(lake), topics=self.sink_topics())

    def specs(self, lake: CatalogEndpoints) -> list[ConnectorSpec]:
        """Source first: its topics exist and fill before the sink starts reading them."""
        return [self.source_spec(), self.sink_spec(lake)]


def capture_from_mapping(data: Mapping[str, object]) -> CaptureSpec:
    """A :class:`CaptureSpec` from plain data (a resource's fields), refusing a bad one by name."""
    keys = tuple((t, tuple(k.split(",") if isinstance(k, str) else k)) for t, k in dict(data.get("keys") or {}).items() if k)
    changed = tuple((t, c) for t, c in dict(data.get("changed_at") or {}).items() if c)
    try:
        return CaptureSpec(**{**data, "tables": tuple(data.get("tables") or ()), "keys": keys, "changed_at": changed})  # type: ignore[arg-type]
    except TypeError as exc:
        raise CaptureError(f"capture {data.get('name')!r}: {exc}") from exc
    except LayoutError as exc:
        raise CaptureError(str(exc)) from exc
