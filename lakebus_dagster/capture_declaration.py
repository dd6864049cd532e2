"""The declared change capture: the config file's ``capture:`` section (docs/configuration.md).

::

    capture:
      databases:
        - name: shop                  # the capture: Debezium's topic.prefix, slot, publication, connectors
          # host, port, database, user: default LAKEBUS_POSTGRES_HOST/_PORT/_DB/_USER
          # password_var: LAKEBUS_POSTGRES_PASSWORD (the environment variable holding the secret)
          schemas:
            app:
              users:  {key: [id], changed_at: updated_at}
              orders: {key: id, changed_at: updated_at}

Each table gets its change table and a current-state asset. A database with two schemas is two
captures (``<name>_<schema>``: one slot and one source each, the heartbeat table in each schema).
Without a ``capture:`` section the local stack's demo declaration (``lakebus_dagster.cdc.demo.DECLARATION``)
applies. :func:`parse_capture` refuses a bad declaration with one line naming the field; it imports no Dagster.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakebus_dagster.secret_env import POSTGRES_PASSWORD_VAR

_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")
_COLUMN = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_VAR = re.compile(r"^[A-Z_][A-Z0-9_]*$")
class DeclarationError(ValueError):
    """The ``capture:`` section is unusable: the message starts with the field's path."""


DATABASE_KEYS = ("name", "host", "port", "database", "user", "password_var", "heartbeat_table", "namespace", "schemas")
TABLE_KEYS = ("key", "changed_at")


@dataclass(frozen=True)
class DeclaredTable:
    schema: str
    name: str
    key: tuple[str, ...]
    changed_at: str = ""


@dataclass(frozen=True)
class DeclaredDatabase:
    """One captured database; an empty host/port/database/user/namespace takes the settings' value."""

    name: str
    tables: tuple[DeclaredTable, ...]
    host: str = ""
    port: int = 0
    database: str = ""
    user: str = ""
    password_var: str = POSTGRES_PASSWORD_VAR
    heartbeat_table: str = "lakebus_heartbeat"
    namespace: str = ""

    @property
    def schemas(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t.schema for t in self.tables))

    def capture_name(self, schema: str) -> str:
        return self.name if len(self.schemas) == 1 else f"{self.name}_{schema}"


def _fail(where: str, message: str) -> DeclarationError:
    return DeclarationError(f"{where}{'' if message.startswith('=') else ' '}{message}")


def _ident(where: str, value: Any, pattern: re.Pattern = _IDENT) -> str:
    if not isinstance(value, str) or not pattern.match(value):
        raise _fail(where, f"={value!r} must be a lower-case identifier (a-z 0-9 _)")
    return value


def _table(where: str, schema: str, name: str, body: Any) -> DeclaredTable:
    if not isinstance(body, Mapping):
        raise _fail(where, "must be a mapping {key: [columns], changed_at: column}")
    unknown = sorted(set(body) - set(TABLE_KEYS))
    if unknown:
        raise _fail(f"{where}.{unknown[0]}", f"is not a table key (known: {', '.join(TABLE_KEYS)})")
    if "key" not in body:
        raise _fail(f"{where}.key", "is required: the column(s) identifying a row (the table's primary key)")
    key = body["key"]
    columns = [key] if isinstance(key, str) else key
    if not isinstance(columns, list) or not columns:
        raise _fail(f"{where}.key", f"={key!r} must be a column or a non-empty list of columns")
    for i, column in enumerate(columns):
        _ident(f"{where}.key[{i}]", column, _COLUMN)
    if len(set(columns)) != len(columns):
        raise _fail(f"{where}.key", f"={columns!r} names a column twice")
    changed = body.get("changed_at") or ""
    if changed:
        _ident(f"{where}.changed_at", changed, _COLUMN)
    return DeclaredTable(schema, name, tuple(columns), changed)


def _database(where: str, body: Any) -> DeclaredDatabase:
    if not isinstance(body, Mapping):
        raise _fail(where, "must be a mapping with name and schemas")
    unknown = sorted(set(body) - set(DATABASE_KEYS))
    if unknown:
        raise _fail(f"{where}.{unknown[0]}", f"is not a database key (known: {', '.join(DATABASE_KEYS)})")
    for required in ("name", "schemas"):
        if required not in body:
            raise _fail(f"{where}.{required}", "is required")
    name = _ident(f"{where}.name", body["name"])
    fields: dict[str, Any] = {}
    for key in ("database", "user", "heartbeat_table", "namespace"):
        if body.get(key):
            fields[key] = _ident(f"{where}.{key}", body[key], _COLUMN if key != "namespace" else _IDENT)
    if body.get("host"):
        if not isinstance(body["host"], str) or not re.match(r"^[A-Za-z0-9.:\[\]-]+$", body["host"]):
            raise _fail(f"{where}.host", f"={body['host']!r} is not a host name or address")
        fields["host"] = body["host"]
    if body.get("port") is not None:
        port = body["port"]
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise _fail(f"{where}.port", f"={port!r} is not a port (1-65535)")
        fields["port"] = port
    if body.get("password_var"):
        if not isinstance(body["password_var"], str) or not _VAR.match(body["password_var"]):
            raise _fail(f"{where}.password_var", f"={body['password_var']!r} must name an environment variable (A-Z 0-9 _); "
                        "the password itself never goes in the file")
        fields["password_var"] = body["password_var"]
    schemas = body["schemas"]
    if not isinstance(schemas, Mapping) or not schemas:
        raise _fail(f"{where}.schemas", "must map each schema to its tables: {app: {users: {key: [id]}}}")
    tables = []
    for schema, members in schemas.items():
        _ident(f"{where}.schemas", schema)
        here = f"{where}.schemas.{schema}"
        if not isinstance(members, Mapping) or not members:
            raise _fail(here, "must map each table to {key: [columns], changed_at: column}")
        for table, spec in members.items():
            _ident(here, table)
            if table == fields.get("heartbeat_table", "lakebus_heartbeat"):
                raise _fail(f"{here}.{table}", "is the heartbeat table, which is never captured")
            tables.append(_table(f"{here}.{table}", schema, table, spec))
    return DeclaredDatabase(name=name, tables=tuple(tables), **fields)


def parse_capture(body: Any, where: str = "capture") -> tuple[DeclaredDatabase, ...]:
    """The ``capture:`` section's databases, or a :class:`DeclarationError` naming the field."""
    if not isinstance(body, Mapping):
        raise _fail(where, "must be a mapping with databases: [...]")
    unknown = sorted(set(body) - {"databases"})
    if unknown:
        raise _fail(f"{where}.{unknown[0]}", "is not a capture key (known: databases)")
    databases = body.get("databases")
    if not isinstance(databases, list) or not databases:
        raise _fail(f"{where}.databases", "must be a non-empty list of databases")
    out = tuple(_database(f"{where}.databases[{i}]", d) for i, d in enumerate(databases))
    names: dict[str, int] = {}
    tables: dict[tuple[str, str, str], int] = {}
    for i, db in enumerate(out):
        for schema in db.schemas:
            capture = db.capture_name(schema)
            if capture in names:
                raise _fail(f"{where}.databases[{i}].name", f"={db.name!r}: capture {capture!r} is declared twice "
                            f"(also databases[{names[capture]}]); each needs its own name (its slot and connectors)")
            names[capture] = i
        for t in db.tables:
            place = (db.namespace, t.schema, t.name)
            if place in tables and tables[place] != i:
                raise _fail(f"{where}.databases[{i}].schemas.{t.schema}.{t.name}", f"is also declared in databases[{tables[place]}]: "
                            "both would write one change table; give one of them its own namespace")
            tables[place] = i
    return out


def capture_mappings(databases: tuple[DeclaredDatabase, ...], **defaults: Any) -> list[dict[str, Any]]:
    """One :func:`~lakebus_dagster.cdc.capture.capture_from_mapping` mapping per captured (database, schema):
    the declaration's fields over ``defaults`` (host, port, database, user, namespace and the capture
    settings: exactly_once, commit_interval_ms, signal_bootstrap)."""
    out = []
    for db in databases:
        for schema in db.schemas:
            tables = [t for t in db.tables if t.schema == schema]
            out.append({
                **defaults,
                "name": db.capture_name(schema),
                **{k: getattr(db, k) for k in ("host", "port", "database", "user", "namespace") if getattr(db, k)},
                "password_var": db.password_var, "heartbeat_table": db.heartbeat_table, "schema": schema,
                "tables": [t.name for t in tables],
                "keys": {t.name: ",".join(t.key) for t in tables},
                "changed_at": {t.name: t.changed_at for t in tables if t.changed_at},
            })
    return out
