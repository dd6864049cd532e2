"""The declared change capture of this deployment (``LAKEBUS_POSTGRES=on``): which databases, which
tables, where their change tables go — the config file's ``capture:`` section
(:mod:`lakebus_dagster.capture_declaration`; without one, the local stack's demo declaration), over the
settings. The fields are the first capture; ``more`` holds the others. The Launchpad may override
any of them (a test's capture of its own: another ``name`` and ``namespace``)."""

from __future__ import annotations

import json

import dagster as dg
from pydantic import Field

from lakebus_dagster.cdc import demo
from lakebus_dagster.cdc.capture import CaptureError, CaptureSpec, capture_from_mapping
from lakebus_dagster.capture_declaration import capture_mappings, parse_capture
from lakebus_dagster.settings import Settings
from lakebus_dagster.secret_env import POSTGRES_PASSWORD_VAR


class ChangeCaptureResource(dg.ConfigurableResource):
    """One captured PostgreSQL database (the password is read from ``password_var`` when used)."""

    enabled: bool = Field(default=False, description="LAKEBUS_POSTGRES=on: this deployment captures a database")
    name: str = Field(default="shop", description="the capture's name: Debezium's topic.prefix, the stem of the slot, "
                      "publication, connector and topic names")
    host: str = Field(default="127.0.0.1", description="PostgreSQL host, as the Connect workers and lakebus reach it")
    port: int = Field(default=15432, description="PostgreSQL port")
    database: str = Field(default="shop", description="the captured database")
    user: str = Field(default="lakebus_cdc", description="the change-capture role (LOGIN REPLICATION)")
    password_var: str = Field(default=POSTGRES_PASSWORD_VAR, description="the environment variable holding its password")
    db_schema: str = Field(default=demo.SCHEMA, description="the schema of the captured tables")
    tables: list[str] = Field(default_factory=lambda: list(demo.TABLES), description="the captured tables")
    heartbeat_table: str = Field(default=demo.HEARTBEAT_TABLE, description="the heartbeat table (in the publication)")
    namespace: str = Field(default="demo_cdc", description="the Iceberg namespace of the change tables")
    exactly_once: bool = Field(default=True, description="ask for exactly-once source delivery (exactly.once.support=required)")
    commit_interval_ms: int = Field(default=10_000, description="the change-table sink's commit interval")
    signal_bootstrap: str = Field(default="", description="the brokers Debezium's Kafka signal channel reads (as the "
                                  "Connect workers reach them); empty: no signal channel, no re-sync")
    table_keys: dict[str, str] = Field(default_factory=dict, description="table -> its key columns, comma-separated "
                                 "(a table not named: its primary key in the database)")
    changed_at: dict[str, str] = Field(default_factory=dict, description="table -> its change-time column (re-sync's default)")
    more: list[str] = Field(default_factory=list, description="the other declared captures, each a JSON object of these fields")

    def spec(self) -> CaptureSpec:
        return capture_from_mapping({
            "name": self.name, "host": self.host, "port": self.port, "database": self.database, "user": self.user,
            "password_var": self.password_var, "schema": self.db_schema, "tables": self.tables,
            "heartbeat_table": self.heartbeat_table, "namespace": self.namespace, "exactly_once": self.exactly_once,
            "commit_interval_ms": self.commit_interval_ms, "signal_bootstrap": self.signal_bootstrap,
            "keys": self.table_keys, "changed_at": self.changed_at,
        })

    def specs(self) -> list[CaptureSpec]:
        """Every declared capture, the fields' first."""
        return [self.spec(), *(capture_from_mapping(json.loads(text)) for text in self.more)]

    def spec_for(self, schema: str, table: str) -> CaptureSpec:
        """The capture of ``schema.table``, or a :class:`CaptureError` naming the declared ones."""
        specs = self.specs()
        found = next((s for s in specs if s.schema == schema and table in s.tables), None)
        if found is None:
            declared = ", ".join(s.qualified(t) for s in specs for t in s.tables)
            raise CaptureError(f"{schema}.{table} is not a captured table (declared: {declared})")
        return found

    def connector_names(self, log=None) -> tuple[str, ...]:
        """The source and sink the status sensor watches (none when capture is off, or declared wrong)."""
        if not self.enabled:
            return ()
        try:
            specs = self.specs()
        except CaptureError as exc:
            if log is not None:
                log.warning(f"change capture declared but not watched: {exc}")
            return ()
        return tuple(name for spec in specs for name in (spec.source_name, spec.sink_name))

    @classmethod
    def from_settings(cls, settings: Settings) -> ChangeCaptureResource:
        """The file's ``capture:`` declaration (else the demo's) over the settings' database and capture settings."""
        loaded = settings.deployment_file
        declared = loaded.capture if loaded is not None and loaded.capture is not None else parse_capture(demo.DECLARATION)
        mappings = capture_mappings(
            declared, host=settings.capture.host, port=settings.ports.postgres, database=settings.capture.db,
            user=settings.capture.user, namespace=f"{settings.lake.namespace}_cdc", exactly_once=settings.exactly_once_sources,
            commit_interval_ms=settings.bus.sink_commit_interval_ms or 10_000,
            # the signal channel's consumer speaks PLAINTEXT only here (no SASL settings are passed to it yet)
            signal_bootstrap=settings.kafka.bootstrap_servers if settings.kafka.security_protocol == "PLAINTEXT" else "")
        first, *others = mappings
        first["db_schema"], first["table_keys"] = first.pop("schema"), first.pop("keys")
        return cls(enabled=settings.capture.enabled, more=[json.dumps(m) for m in others], **first)
