"""What lakebus checks and manages in a captured PostgreSQL database, as the change-capture role.

- :func:`check_database`: logical decoding on, the role able to log in and replicate, every
  captured table present with a primary key (a table without one emits no update or delete under
  ``REPLICA IDENTITY DEFAULT``) and the heartbeat table present — each failure names what is wrong.
- :func:`reconcile_publication`: the capture's publication ``FOR TABLE`` the captured tables and the
  heartbeat table; created when missing, its table list set when it differs, else unchanged.
  (Debezium's ``publication.autocreate.mode=disabled``: the connector never creates one.)
- :func:`slot_status`: the replication slot as ``pg_replication_slots`` shows it (active, WAL
  status, bytes retained and not yet confirmed). Debezium creates the slot on its first start.
- :func:`table_columns`: each captured table's columns and types, for the typed change tables.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from lakebus_dagster.cdc.capture import CaptureError, CaptureSpec
from lakebus_dagster.provision.outcome import Action, Outcome


@dataclass(frozen=True)
class Column:
    name: str
    #: ``information_schema.columns.data_type`` (``numeric``, ``timestamp with time zone``, ...)
    data_type: str
    numeric_precision: int | None
    numeric_scale: int | None
    primary_key: bool


def connect(spec: CaptureSpec, password: str | None = None):
    """A psycopg2 connection as the capture role (its password from ``spec.password_var``)."""
    import psycopg2

    password = password if password is not None else os.environ.get(spec.password_var)
    if not password:
        raise CaptureError(f"capture {spec.name!r}: {spec.password_var} is not set (the role {spec.user!r}'s password; "
                           "the local stack generates it into secrets.env)")
    try:
        return psycopg2.connect(host=spec.host, port=spec.port, user=spec.user, password=password, dbname=spec.database,
                                connect_timeout=5, application_name="lakebus-cdc")
    except psycopg2.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CaptureError(f"capture {spec.name!r}: cannot connect to PostgreSQL {spec.host}:{spec.port}/{spec.database} "
                           f"as {spec.user!r}: {first}") from exc


def _rows(conn, query: str, params: Sequence[Any] = ()) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(query, params)
        return cur.fetchall()


def check_database(conn, spec: CaptureSpec) -> dict[str, str]:
    """Refuse, naming the problem, a database this capture cannot work on; returns what was checked."""
    problems = []
    wal_level = _rows(conn, "SELECT current_setting('wal_level')")[0][0]
    if wal_level != "logical":
        problems.append(f"wal_level is {wal_level!r}, change capture needs 'logical' (set it and restart the server)")
    keep = _rows(conn, "SELECT current_setting('max_slot_wal_keep_size')")[0][0]
    if keep in ("-1", "-1MB"):
        problems.append("max_slot_wal_keep_size is unlimited (-1): a stopped connector's slot could fill the disk; bound it")
    login, replication = _rows(conn, "SELECT rolcanlogin, rolreplication FROM pg_roles WHERE rolname = current_user")[0]
    if not (login and replication):
        problems.append(f"role {spec.user!r} needs LOGIN and REPLICATION")
    for table in (*spec.tables, spec.heartbeat_table):
        found = _rows(conn, "SELECT c.relreplident FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                            "WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')", (spec.schema, table))
        if not found:
            problems.append(f"table {spec.qualified(table)} does not exist in database {spec.database!r}")
            continue
        primary = _primary_key(conn, spec.schema, table) if table in spec.tables else []
        if table in spec.tables and found[0][0] == "d" and not primary:
            problems.append(f"table {spec.qualified(table)} has no primary key: under REPLICA IDENTITY DEFAULT its updates "
                            "and deletes carry no key (add one, or set REPLICA IDENTITY FULL)")
        declared = list(spec.key_of(table)) if table in spec.tables else []
        if declared and primary and found[0][0] == "d" and declared != primary:
            # a delete's row image holds only the primary key: the current state could not find the row
            problems.append(f"table {spec.qualified(table)}: declared key {','.join(declared)} is not its primary key "
                            f"{','.join(primary)} (declare that, or set REPLICA IDENTITY FULL)")
    if problems:
        raise CaptureError(f"capture {spec.name!r} on {spec.host}:{spec.port}/{spec.database}: " + "; ".join(problems))
    return {"wal_level": wal_level, "max_slot_wal_keep_size": keep, "role": f"{spec.user} (LOGIN REPLICATION)"}


def _primary_key(conn, schema: str, table: str) -> list[str]:
    return [r[0] for r in _rows(
        conn,
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
        "WHERE i.indrelid = %s::regclass AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)",
        (f'"{schema}"."{table}"',),
    )]


def table_columns(conn, spec: CaptureSpec) -> dict[str, list[Column]]:
    """Each captured table's columns in order (name, type, precision, scale, part of the key)."""
    out: dict[str, list[Column]] = {}
    for table in spec.tables:
        keys = set(_primary_key(conn, spec.schema, table))
        rows = _rows(conn, "SELECT column_name, data_type, numeric_precision, numeric_scale FROM information_schema.columns "
                           "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position", (spec.schema, table))
        if not rows:
            raise CaptureError(f"capture {spec.name!r}: table {spec.qualified(table)} has no columns the role {spec.user!r} can see")
        out[table] = [Column(name, data_type, precision, scale, name in keys) for name, data_type, precision, scale in rows]
    return out


def published_tables(conn, publication: str) -> set[str] | None:
    """``schema.table`` of every table in ``publication``, or None when it does not exist."""
    if not _rows(conn, "SELECT 1 FROM pg_publication WHERE pubname = %s", (publication,)):
        return None
    return {f"{s}.{t}" for s, t in _rows(conn, "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s",
                                          (publication,))}


def reconcile_publication(conn, spec: CaptureSpec) -> Outcome:
    """Create the capture's publication, or set its tables when they differ (one transaction)."""
    from psycopg2 import sql

    wanted = set(spec.published_tables)
    tables = sql.SQL(", ").join(sql.Identifier(*t.split(".", 1)) for t in sorted(wanted))
    live = published_tables(conn, spec.publication)
    with conn.cursor() as cur:
        if live is None:
            cur.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLE ").format(sql.Identifier(spec.publication)) + tables)
            outcome = Outcome("publication", spec.publication, Action.CREATED, f"FOR TABLE {', '.join(sorted(wanted))}")
        elif live != wanted:
            cur.execute(sql.SQL("ALTER PUBLICATION {} SET TABLE ").format(sql.Identifier(spec.publication)) + tables)
            added, removed = sorted(wanted - live), sorted(live - wanted)
            outcome = Outcome("publication", spec.publication, Action.UPDATED,
                              f"added {', '.join(added) or '-'}; removed {', '.join(removed) or '-'}")
        else:
            outcome = Outcome("publication", spec.publication, Action.UNCHANGED, f"FOR TABLE {', '.join(sorted(wanted))}")
    conn.commit()
    return outcome


def slot_status(conn, slot: str) -> dict[str, Any] | None:
    """The slot's row of ``pg_replication_slots`` (None before the connector's first start)."""
    rows = _rows(
        conn,
        "SELECT plugin, active, wal_status, safe_wal_size, "
        "pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint, "
        "pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint, confirmed_flush_lsn::text "
        "FROM pg_replication_slots WHERE slot_name = %s",
        (slot,),
    )
    if not rows:
        return None
    plugin, active, wal_status, safe, unconfirmed, retained, confirmed = rows[0]
    return {"slot": slot, "plugin": plugin, "active": active, "wal_status": wal_status, "safe_wal_size": safe,
            "unconfirmed_bytes": unconfirmed, "retained_bytes": retained, "confirmed_flush_lsn": confirmed}


def prepare_database(spec: CaptureSpec, password: str | None = None) -> tuple[list[Outcome], dict[str, Any]]:
    """Check the database, reconcile the publication, read the slot and the captured tables' columns:
    (outcomes, {"checks", "slot", "columns"})."""
    with closing(connect(spec, password)) as conn:
        checks = check_database(conn, spec)
        conn.rollback()
        outcome = reconcile_publication(conn, spec)
        columns = table_columns(conn, spec)
        slot = slot_status(conn, spec.slot)
        conn.rollback()
    return [outcome], {"checks": checks, "slot": slot, "columns": columns}


def describe_slot(slot: Mapping[str, Any] | None) -> str:
    if slot is None:
        return "not created yet (Debezium creates it on its first start)"
    return (f"{'active' if slot['active'] else 'INACTIVE'}, wal_status {slot['wal_status']}, "
            f"{slot['retained_bytes']} bytes retained, {slot['unconfirmed_bytes']} not confirmed")
