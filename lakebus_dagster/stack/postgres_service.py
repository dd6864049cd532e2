"""PostgreSQL as an optional service of the local stack (``LAKEBUS_POSTGRES=on``): the operational
database whose changes lakebus captures (issue 30).

Debian's server binaries (``/usr/lib/postgresql/<version>/bin``, installed by ``make test-tools``),
one cluster in ``<state>/data/postgres``, listening on ``LAKEBUS_HOST:LAKEBUS_POSTGRES_PORT`` and on a
private socket directory ``<state>/run/postgres`` (mode 0700). The server refuses to run as root, so
as root it is exec'd as the ``postgres`` system user through ``setpriv`` (no fork: the pid recorded
is the postmaster's). Logical replication is on (``wal_level=logical``), with room for a few slots
and senders, and ``max_slot_wal_keep_size`` bounds what a stopped or lagging slot may keep: past it
PostgreSQL invalidates the slot (``wal_status=lost``) instead of filling the disk.

Authentication: ``trust`` only on the private socket (the stack's own setup and the demo
generator), ``scram-sha-256`` over TCP (the change-capture role, whose password is a local secret in
``secrets.env``). Once healthy, :func:`lakebus_dagster.cdc.demo.ensure_demo_database` creates the
role, the demo database and its schema (idempotent, on every ``up``).
"""

from __future__ import annotations

import glob
import os
import pwd
import signal
import subprocess
from pathlib import Path

from lakebus_dagster.secret_env import POSTGRES_PASSWORD_VAR
from lakebus_dagster.stack.errors import StackError
from lakebus_dagster.stack.local_settings import StackSettings
from lakebus_dagster.stack.process import native_markers
from lakebus_dagster.stack.service import write_file
from lakebus_dagster.stack.spec import Node, ServiceSpec

#: the system user the server runs as when the stack runs as root
SERVER_USER = "postgres"
#: the cluster's superuser (reachable only over the private socket)
SUPERUSER = "postgres"

#: the server's settings beyond port and addresses: logical decoding, and bounded WAL for slots
SERVER_SETTINGS = {
    "wal_level": "logical",
    "max_wal_senders": "10",
    "max_replication_slots": "10",
    # a slot never keeps more than this much WAL: a stopped connector's slot is invalidated
    # (wal_status=lost, the connector then FAILS loudly) instead of filling the disk
    "max_slot_wal_keep_size": "1GB",
    # a small dev server on a 2-core machine that runs JVMs beside it
    "shared_buffers": "64MB",
    "max_connections": "40",
    "fsync": "on",
    "log_min_messages": "warning",
    "log_connections": "off",
}

_HBA = """# written by lakebus's local stack (lakebus_dagster/stack/postgres_service.py) on every start
# the private socket directory (mode 0700): the stack's setup and the demo generator
local   all          all                      trust
# TCP: passwords only (the change-capture role's is a local secret)
host    all          all       127.0.0.1/32   scram-sha-256
host    all          all       ::1/128        scram-sha-256
host    replication  all       127.0.0.1/32   scram-sha-256
host    replication  all       ::1/128        scram-sha-256
"""


def enabled(settings: StackSettings) -> bool:
    return settings.capture.enabled


def bin_dir() -> Path:
    """The newest installed Debian PostgreSQL server's ``bin`` directory, or a clear error."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise StackError("postgres: no PostgreSQL server in /usr/lib/postgresql/*/bin (LAKEBUS_POSTGRES=on); "
                         "install Debian's `postgresql` package (`make test-tools` does) or set LAKEBUS_POSTGRES=off")
    return Path(found[-1]).parent


def data_dir(settings: StackSettings) -> Path:
    return settings.data_dir / "postgres"


def socket_dir(settings: StackSettings) -> Path:
    return settings.run_dir / "postgres"


def _as_server_user() -> list[str]:
    """Exec (no fork) as the server user when running as root; nothing otherwise."""
    if os.geteuid() != 0:
        return []
    return ["setpriv", f"--reuid={SERVER_USER}", f"--regid={SERVER_USER}", "--init-groups", "--"]


def _owned_by_server(path: Path, mode: int) -> None:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        entry = pwd.getpwnam(SERVER_USER)
        os.chown(path, entry.pw_uid, entry.pw_gid)
    path.chmod(mode)


def _prepare(node: Node) -> None:
    settings = node.settings
    data, sock = data_dir(settings), socket_dir(settings)
    if settings.host not in ("127.0.0.1", "localhost", "::1"):
        raise StackError(f"postgres: the local server listens on loopback only; LAKEBUS_HOST={settings.host} is not")
    _owned_by_server(sock, 0o700)
    if not (data / "PG_VERSION").exists():
        _owned_by_server(data, 0o700)
        init = subprocess.run(
            [*_as_server_user(), str(bin_dir() / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth-local=trust",
             "--auth-host=scram-sha-256", "--encoding=UTF8", "--locale=C.UTF-8"],
            capture_output=True, text=True,
        )
        if init.returncode != 0:
            raise StackError(f"postgres: initdb of {data} failed:\n{init.stdout}{init.stderr}")
    hba = write_file(data / "pg_hba.conf", _HBA, mode=0o600)
    if os.geteuid() == 0:
        entry = pwd.getpwnam(SERVER_USER)
        os.chown(hba, entry.pw_uid, entry.pw_gid)


def _args(node: Node) -> list[str]:
    settings = node.settings
    options = {
        **SERVER_SETTINGS,
        "port": str(settings.ports.postgres),
        "listen_addresses": settings.host,
        "unix_socket_directories": str(socket_dir(settings)),
    }
    return [*_as_server_user(), str(bin_dir() / "postgres"), "-D", str(data_dir(settings)),
            *(f"--{key}={value}" for key, value in options.items()),
            *native_markers(settings, "postgres")]


def superuser_dsn(settings: StackSettings, dbname: str = "postgres") -> dict[str, object]:
    """psycopg2 connect() keywords for the superuser over the private socket (the stack's own setup)."""
    return {"host": str(socket_dir(settings)), "port": settings.ports.postgres, "user": SUPERUSER, "dbname": dbname,
            "connect_timeout": 3}


def _probe(node: Node) -> bool:
    import psycopg2

    with psycopg2.connect(**superuser_dsn(node.settings)) as conn, conn.cursor() as cur:
        cur.execute("SELECT current_setting('wal_level')")
        return cur.fetchone()[0] == "logical"


def _setup(node: Node) -> str | None:
    """The change-capture role, the demo database and its schema (idempotent, every ``up``)."""
    from lakebus_dagster.cdc.demo import ensure_demo_database

    password = os.environ.get(POSTGRES_PASSWORD_VAR)
    if not password:
        raise StackError(f"postgres: {POSTGRES_PASSWORD_VAR} is not set (the stack generates it into secrets.env)")
    return ensure_demo_database(superuser_dsn(node.settings), node.settings.capture.db, node.settings.capture.user, password)


POSTGRES = ServiceSpec(
    name="postgres",
    main_class="postgres",
    launcher="exec",
    enabled=enabled,
    port=lambda node: node.settings.ports.postgres,
    heap=lambda node: "",
    args=_args,
    prepare=_prepare,
    probe=_probe,
    probe_text=lambda node: "it accepts connections with wal_level=logical",
    timeout=60,
    on_ready=_setup,
    # SIGTERM is a "smart" shutdown: it waits for every client (a Debezium task) to disconnect
    stop_signal=signal.SIGINT,
)
