"""The demo operational database (``LAKEBUS_POSTGRES=on``): a shop's ``users`` and ``orders`` in
schema ``app``, and a small generator of inserts, updates and deletes against it.

:func:`ensure_demo_database` is the DBA's part, run by the local stack as the superuser once the
server answers (idempotent): the change-capture role (``LOGIN REPLICATION``, password from the
stack's secrets), the database, a ``NOLOGIN`` owner role of the schema and its tables of which the
capture role is a member (PostgreSQL lets only a table's owner add it to a publication: Debezium's
"replication group" setup), and the heartbeat table Debezium's ``heartbeat.action.query`` upserts
into so an idle slot still advances. The publication itself is lakebus's (:mod:`.database`).

``python -m lakebus_dagster.stack.cdc_demo --changes 200`` runs the generator against the local
stack's server (over its private socket), printing its progress.
"""

from __future__ import annotations

import random
from contextlib import closing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

#: the schema of the demo tables, and the tables change capture covers
SCHEMA = "app"
TABLES = ("users", "orders")
#: the heartbeat table (in the publication, not captured to a topic)
HEARTBEAT_TABLE = "lakebus_heartbeat"
OWNER_ROLE = "shop_owner"
#: the local stack's declared capture: what applies when the config file has no ``capture:`` section
#: (:mod:`lakebus_dagster.capture_declaration`; lakebus.example.yaml shows the same declaration)
DECLARATION = {"databases": [{"name": "shop", "schemas": {
    SCHEMA: {table: {"key": ["id"], "changed_at": "updated_at"} for table in TABLES}}}]}

DDL = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA} AUTHORIZATION {OWNER_ROLE};
CREATE TABLE IF NOT EXISTS {SCHEMA}.users (
    id          bigint PRIMARY KEY,
    email       text NOT NULL,
    name        text NOT NULL,
    country     char(2),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS {SCHEMA}.orders (
    id          bigint PRIMARY KEY,
    user_id     bigint NOT NULL,
    amount      numeric(12,2) NOT NULL,
    currency    char(3) NOT NULL DEFAULT 'EUR',
    status      text NOT NULL,
    order_date  date NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS {SCHEMA}.{HEARTBEAT_TABLE} (
    id  int PRIMARY KEY,
    ts  timestamptz NOT NULL
);
ALTER TABLE {SCHEMA}.users OWNER TO {OWNER_ROLE};
ALTER TABLE {SCHEMA}.orders OWNER TO {OWNER_ROLE};
ALTER TABLE {SCHEMA}.{HEARTBEAT_TABLE} OWNER TO {OWNER_ROLE};
"""


def _connect(dsn: Mapping[str, Any], *, autocommit: bool = False):
    import psycopg2

    conn = psycopg2.connect(**dsn)
    conn.autocommit = autocommit
    return conn


def ensure_demo_database(admin_dsn: Mapping[str, Any], database: str, role: str, password: str) -> str | None:
    """As the superuser (``admin_dsn``, any database): the capture role (its password kept in sync),
    ``database``, the owner role, schema, tables and grants. Returns a line saying what was created,
    or None when everything was there."""
    from psycopg2 import sql

    created = []
    # closing(), not `with conn`: psycopg2 2.9 opens a transaction block even on an autocommit connection
    with closing(_connect(admin_dsn, autocommit=True)) as conn, conn.cursor() as cur:
        for name, options in ((role, "LOGIN REPLICATION"), (OWNER_ROLE, "NOLOGIN")):
            cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,))
            if cur.fetchone() is None:
                cur.execute(sql.SQL("CREATE ROLE {} " + options).format(sql.Identifier(name)))
                created.append(f"role {name}")
        # the password is a parameter of the statement, never part of a logged text
        cur.execute(sql.SQL("ALTER ROLE {} WITH LOGIN REPLICATION PASSWORD %s").format(sql.Identifier(role)), (password,))
        cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
        if cur.fetchone() is None:
            cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
            created.append(f"database {database}")
    with closing(_connect({**admin_dsn, "dbname": database})) as conn, conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = %s", (SCHEMA,))
        before = cur.fetchone()[0]
        cur.execute(DDL)
        cur.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(OWNER_ROLE), sql.Identifier(role)))
        # CREATE PUBLICATION needs CREATE on the database
        cur.execute(sql.SQL("GRANT CONNECT, CREATE ON DATABASE {} TO {}").format(sql.Identifier(database), sql.Identifier(role)))
        cur.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(SCHEMA), sql.Identifier(role)))
        cur.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(sql.Identifier(SCHEMA), sql.Identifier(role)))
        cur.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = %s", (SCHEMA,))
        if cur.fetchone()[0] > before:
            created.append(f"schema {SCHEMA} ({', '.join(TABLES)}, {HEARTBEAT_TABLE})")
    return f"created {', '.join(created)}" if created else None


# -- the generator -------------------------------------------------------------------------------
_FIRST = ("ada", "alan", "grace", "edsger", "barbara", "ken", "dennis", "margaret", "linus", "frances")
_COUNTRIES = ("DE", "FR", "NL", "ES", "IT", "PL", "SE")
_STATUSES = ("new", "paid", "shipped", "delivered", "cancelled")


@dataclass
class ChangeCounts:
    """What a generator run did, per table and operation."""

    inserts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    updates: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    deletes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))

    @property
    def total(self) -> int:
        return sum(sum(d.values()) for d in (self.inserts, self.updates, self.deletes))

    def describe(self) -> str:
        return "; ".join(f"{t}: +{self.inserts[t]} ~{self.updates[t]} -{self.deletes[t]}" for t in TABLES)


def _next_id(cur, table: str) -> int:
    cur.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {SCHEMA}.{table}")
    return int(cur.fetchone()[0])


def _some_id(cur, table: str, rng: random.Random) -> int | None:
    cur.execute(f"SELECT id FROM {SCHEMA}.{table} ORDER BY id")
    ids = [row[0] for row in cur.fetchall()]
    return rng.choice(ids) if ids else None


def generate_changes(
    dsn: Mapping[str, Any],
    changes: int,
    *,
    seed: int | None = None,
    mix: tuple[float, float, float] = (0.6, 0.3, 0.1),
    progress: Callable[[str], None] | None = print,
    every: int = 50,
) -> ChangeCounts:
    """Make ``changes`` row changes in the demo tables, one transaction each: inserts, updates and
    deletes in the ``mix`` proportions (an update or delete on an empty table inserts instead).
    Every change sets ``updated_at``; amounts are decimals with cents, order dates dates."""
    if changes < 0:
        raise ValueError(f"changes must be >= 0, got {changes}")
    rng = random.Random(seed)
    counts = ChangeCounts()
    now = datetime.now(timezone.utc)
    with closing(_connect(dsn)) as conn, conn.cursor() as cur:
        for n in range(1, changes + 1):
            table = rng.choice(TABLES)
            op = rng.choices(("insert", "update", "delete"), weights=mix)[0]
            target = _some_id(cur, table, rng) if op != "insert" else None
            if target is None:
                op = "insert"
            if op == "insert":
                new_id = _next_id(cur, table)
                if table == "users":
                    first = rng.choice(_FIRST)
                    cur.execute(
                        f"INSERT INTO {SCHEMA}.users (id, email, name, country, created_at, updated_at) "
                        "VALUES (%s, %s, %s, %s, %s, %s)",
                        (new_id, f"{first}{new_id}@example.com", first.title(), rng.choice(_COUNTRIES), now, now),
                    )
                else:
                    cur.execute(
                        f"INSERT INTO {SCHEMA}.orders (id, user_id, amount, currency, status, order_date, created_at, updated_at) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                        (new_id, rng.randint(1, 50), Decimal(rng.randint(100, 999_999)) / 100, "EUR", "new",
                         date(2026, 11, 1) + timedelta(days=rng.randint(0, 26)), now, now),
                    )
            elif op == "update":
                if table == "users":
                    cur.execute(f"UPDATE {SCHEMA}.users SET country = %s, updated_at = now() WHERE id = %s",
                                (rng.choice(_COUNTRIES), target))
                else:
                    cur.execute(f"UPDATE {SCHEMA}.orders SET status = %s, amount = amount + %s, updated_at = now() WHERE id = %s",
                                (rng.choice(_STATUSES), Decimal(rng.randint(1, 999)) / 100, target))
            else:
                cur.execute(f"DELETE FROM {SCHEMA}.{table} WHERE id = %s", (target,))
            conn.commit()
            getattr(counts, op + "s")[table] += 1
            if progress and (n % every == 0 or n == changes):
                progress(f"[cdc-demo] {n}/{changes} changes ({counts.describe()})")
    return counts
