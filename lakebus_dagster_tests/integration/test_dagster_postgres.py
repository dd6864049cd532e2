"""Dagster on Postgres, for real: the production instance config (``deploy/dagster.yaml``, copied
verbatim) against a real PostgreSQL server started by this module, with the webserver and the daemon
(``dagster dev`` on a DAGSTER_HOME of its own) and the code location on an isolated bus.

Through GraphQL (the Launchpad's path) the test submits ``provision_lakebus`` twice at once and one
``dws_hourly_job`` partition, then reads Postgres itself (SQL, not Dagster's API) to prove where the
state lives: the runs, their event logs, the asset materializations with their partition, and the
sensors' ticks and cursors; and that the run queue's ``lakebus/exclusive`` limit kept the two
provisioning runs from overlapping. DAGSTER_HOME must hold no SQLite storage afterwards.

The Postgres cluster is Debian's server binaries (``initdb`` / ``pg_ctl``) in a temporary directory
on a free port, password-authenticated (scram-sha-256) over TCP; as root it runs as the ``postgres``
system user (the server refuses root). Teardown stops it and deletes the directory.
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg2
import pytest
from dagster import DagsterRunStatus, deserialize_value
# private: the stored rows' types (importing registers them for deserialize_value); Dagster 1.13 has no
# public reader of an instance's instigator states or ticks (DagsterInstance's are not @public)
from dagster._core.scheduler.instigation import InstigatorState, TickData

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.events import EventProducer, GeneratorConfig, generate_events
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.settings import REPO_ROOT, Settings
from lakebus_dagster.stack import launch
from lakebus_dagster_tests.integration.dagster_instance import free_port, running_dagster

from .helpers import committed_rows, wait_for

pytestmark = [
    pytest.mark.integration,
    # a real dagster dev on any default-profile stack: make test's lake stage (which has room; the
    # daemon stage is on the longest lane)
    pytest.mark.lake,
    pytest.mark.filterwarnings("ignore:Using variable_values and operation_name:DeprecationWarning"),
]

INSTANCE_YAML = REPO_ROOT / "deploy" / "dagster.yaml"
VALUES = REPO_ROOT / "deploy" / "values.yaml"
SERVICE = "dagster-pg-test"
RUN_DEADLINE_S = 420.0
#: one process per run instead of one per step (each DWS step would start its own Spark JVM): this test is
#: about where the instance stores things, and a 2-core machine runs the whole suite
#: the shipped run config: the code location's default executor is in-process already
IN_PROCESS: dict = {}
PG_START_S = 60.0
HOUR = "2025-11-24-10:00"
SAMPLE = GeneratorConfig(count=40, seed=1324, days=("2025-11-24",), hours=(10,), users=8)
DWS_HOURLY = ("dws_biz_bet_hour", "dws_biz_recharge_hour")


# -- a real PostgreSQL server --------------------------------------------------------------------------
@dataclass(frozen=True)
class Postgres:
    host: str
    port: int
    user: str
    password: str
    db: str

    def env(self) -> dict[str, str]:
        """What deploy/dagster.yaml reads."""
        return {
            "DAGSTER_PG_HOST": self.host, "DAGSTER_PG_PORT": str(self.port), "DAGSTER_PG_DB": self.db,
            "DAGSTER_PG_USERNAME": self.user, "DAGSTER_PG_PASSWORD": self.password,
        }  # fmt: skip

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        conn = psycopg2.connect(host=self.host, port=self.port, user=self.user, password=self.password, dbname=self.db)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall()
        finally:
            conn.close()


def _pg_bin() -> Path:
    """Debian's server binaries (``make install`` installs the ``postgresql`` package)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[4]))
    if not found:
        pytest.fail("PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin; run `make install`")
    return Path(found[-1]).parent


def _as_server_user(argv: list[str]) -> list[str]:
    """The server refuses to run as root: as root, run it as the ``postgres`` system user."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@pytest.fixture(scope="module")
def postgres(stack: Settings) -> Iterator[Postgres]:
    bin_dir, host = _pg_bin(), "127.0.0.1"
    root = Path(tempfile.mkdtemp(prefix="lakebus-pg-"))
    data, log = root / "data", root / "server.log"
    pg = Postgres(host, free_port(host), "lakebus_dagster", secrets.token_urlsafe(18), "dagster")
    pwfile = root / "pwfile"
    pwfile.write_text(pg.password + "\n")
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        for path in (root, pwfile):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    pg_ctl = [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log)]
    started = False
    try:
        subprocess.run(
            _as_server_user([str(bin_dir / "initdb"), "-D", str(data), "-U", pg.user, f"--pwfile={pwfile}",
                             "--auth=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8"]),  # fmt: skip
            check=True, capture_output=True, text=True, timeout=120,
        )
        options = f"-p {pg.port} -c listen_addresses={host} -k {root} -c max_connections=100 -c fsync=off"
        start = subprocess.run(_as_server_user([*pg_ctl, "-o", options, "-w", "-t", str(int(PG_START_S)), "start"]),
                               capture_output=True, text=True, timeout=PG_START_S + 10)
        started = True
        assert start.returncode == 0, f"pg_ctl start failed: {start.stdout}{start.stderr}\n{log.read_text() if log.exists() else ''}"
        conn = psycopg2.connect(host=host, port=pg.port, user=pg.user, password=pg.password, dbname="postgres")
        try:
            conn.autocommit = True  # CREATE DATABASE cannot run in a transaction
            with conn.cursor() as cur:
                cur.execute(f"CREATE DATABASE {pg.db}")
        finally:
            conn.close()
        yield pg
    except subprocess.CalledProcessError as exc:
        pytest.fail(f"initdb failed: {exc.stdout}{exc.stderr}")
    finally:
        if started:
            subprocess.run(_as_server_user([*pg_ctl, "-m", "fast", "-w", "stop"]), capture_output=True, timeout=60)
        postmaster = data / "postmaster.pid"
        shutil.rmtree(root, ignore_errors=True)
        assert not postmaster.exists(), f"the test's PostgreSQL server in {root} was not stopped"


def test_wrong_password_is_refused(postgres: Postgres):
    """The cluster really authenticates (a test of the fixture: trust auth would hide a wrong secret)."""
    with pytest.raises(psycopg2.OperationalError, match="password authentication failed"):
        psycopg2.connect(host=postgres.host, port=postgres.port, user=postgres.user, password="wrong", dbname=postgres.db).close()


# -- the webserver + daemon with the production instance config ---------------------------------------
@dataclass(frozen=True)
class PgUi:
    settings: Settings
    port: int
    home: Path
    layout: BusLayout


def compute_logs_env(stack: Settings) -> dict[str, str]:
    """What deploy/dagster.yaml's S3 compute log manager reads, pointed at the local stack's S3 (its logs
    bucket, deploy/values.yaml's, created here as compose's minio-init creates it)."""
    from lakebus_dagster.deployment.values import load_values
    from lakebus_dagster.lake.object_store import ensure_bucket, s3_client
    from lakebus_dagster.settings import AWS_SDK_ENV, load_local_secrets
    from lakebus_dagster.secret_env import s3_credentials

    load_local_secrets(stack)
    access, secret = s3_credentials()
    ensure_bucket(s3_client(stack.lake.s3_endpoint, stack.lake.region, access, secret), load_values(VALUES).logs_bucket)
    return {"DAGSTER_COMPUTE_LOGS_ENDPOINT": stack.lake.s3_endpoint, "AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret,
            "AWS_REGION": stack.lake.region, **AWS_SDK_ENV}


@pytest.fixture(scope="module")
def pg_ui(stack: Settings, postgres: Postgres, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgUi]:
    env = {**postgres.env(), **compute_logs_env(stack)}
    with running_dagster(stack, tmp_path_factory, SERVICE, instance_yaml=INSTANCE_YAML.read_text(), env=env) as ui:
        yield PgUi(ui.settings, ui.port, ui.home, ui.layout)


def _wait_success(ui: PgUi, run_id: str) -> None:
    status = launch.wait(run_id, timeout=RUN_DEADLINE_S, port=ui.port)
    assert status == DagsterRunStatus.SUCCESS, (
        f"run {run_id} is {status.value}, wanted SUCCESS within {RUN_DEADLINE_S:.0f}s; its log:\n"
        + "\n".join(launch.log_messages(run_id, port=ui.port)[-40:])
    )


def _compute_log_keys(stack: Settings, run_id: str) -> list[str]:
    """The object keys the S3 compute log manager wrote for ``run_id`` (under deploy/values.yaml's prefix)."""
    from lakebus_dagster.deployment.values import load_values
    from lakebus_dagster.lake.object_store import s3_client
    from lakebus_dagster.secret_env import s3_credentials

    values = load_values(VALUES)
    client = s3_client(stack.lake.s3_endpoint, stack.lake.region, *s3_credentials())
    listed = client.list_objects_v2(Bucket=values.logs_bucket, Prefix=f"{values.logs_prefix}/")
    return [o["Key"] for o in listed.get("Contents", []) if run_id in o["Key"]]


def _event_times(pg: Postgres, run_id: str) -> dict[str, float]:
    """``{dagster_event_type: first timestamp}`` of a run's events, read from Postgres's event log."""
    rows = pg.query(
        "SELECT dagster_event_type, EXTRACT(EPOCH FROM MIN(timestamp)) FROM event_logs "
        "WHERE run_id = %s AND dagster_event_type IS NOT NULL GROUP BY dagster_event_type",
        (run_id,),
    )
    return {kind: float(ts) for kind, ts in rows}


def _produce_sample(stack: Settings, layout: BusLayout) -> int:
    """Send the sample hour to the isolated bus and wait until the sink committed every record."""
    events = list(generate_events(SAMPLE))
    with EventProducer(layout.bus_topic.name, {"bootstrap.servers": stack.kafka.bootstrap_servers}) as producer:
        for event in events:
            producer.send(event)
    expected = {layout.routes[name]: sum(e.event == name for e in events) for name in ("bet", "recharge")}
    assert all(expected.values()), f"the sample should hold both events: {expected}"
    catalog = load_catalog(stack)
    wait_for(lambda: {t: committed_rows(catalog, t) for t in expected} == expected, f"ODS rows {expected}", timeout=120)
    return len(events)


def test_runs_materializations_and_sensor_cursors_live_in_postgres(pg_ui: PgUi, postgres: Postgres, stack: Settings):
    t0 = time.monotonic()
    phase = lambda name: print(f"[pg-test] {name} at {time.monotonic() - t0:.1f}s", flush=True)  # noqa: E731
    # 1. two provisioning runs submitted at once: both succeed, one after the other (tag limit)
    first, second = (launch.submit("provision_lakebus", IN_PROCESS, port=pg_ui.port) for _ in range(2))
    for run_id in (first, second):
        _wait_success(pg_ui, run_id)
    stored = dict(postgres.query("SELECT run_id, status FROM runs WHERE run_id IN (%s, %s)", (first, second)))
    assert stored == {first: "SUCCESS", second: "SUCCESS"}, f"runs table: {stored}"
    times = {run_id: _event_times(postgres, run_id) for run_id in (first, second)}
    for run_id, kinds in times.items():
        assert {"PIPELINE_ENQUEUED", "PIPELINE_STARTING", "PIPELINE_SUCCESS"} <= set(kinds), (run_id, sorted(kinds))
    earlier, later = sorted((first, second), key=lambda r: times[r]["PIPELINE_STARTING"])
    assert times[later]["PIPELINE_STARTING"] >= times[earlier]["PIPELINE_SUCCESS"], (
        "two provision_lakebus runs overlapped: the run queue's lakebus/exclusive=provisioning limit did not hold "
        f"({earlier}: {times[earlier]}, {later}: {times[later]})"
    )
    tags = dict(postgres.query("SELECT key, value FROM run_tags WHERE run_id = %s", (first,)))
    assert tags.get("lakebus/exclusive") == "provisioning", tags

    phase("two provisioning runs done")
    # 2. one DWS partition over real ODS rows
    _produce_sample(stack, pg_ui.layout)
    phase("ODS rows committed")
    dws_run = launch.submit("dws_hourly_job", IN_PROCESS, tags={"dagster/partition": HOUR}, port=pg_ui.port)
    _wait_success(pg_ui, dws_run)
    phase("DWS run done")
    materialized = postgres.query(
        "SELECT asset_key, partition FROM event_logs WHERE run_id = %s AND dagster_event_type = 'ASSET_MATERIALIZATION'",
        (dws_run,),
    )
    assert sorted(materialized) == sorted((json.dumps(["dws", name]), HOUR) for name in DWS_HOURLY), materialized
    latest = dict(postgres.query(
        "SELECT asset_key, last_run_id FROM asset_keys WHERE asset_key IN %s",
        (tuple(json.dumps(["dws", name]) for name in DWS_HOURLY),),
    ))  # fmt: skip
    # the latest materialization of each is tracked in Postgres: this run's, or a later one's of the same
    # asset (the daemon's late-data sensor may rebuild an hour whose ODS got a commit after the run read it)
    for key, last_run in latest.items():
        builders = [r for (r,) in postgres.query(
            "SELECT run_id FROM event_logs WHERE asset_key = %s AND dagster_event_type = 'ASSET_MATERIALIZATION' ORDER BY id", (key,))]
        jobs = dict(postgres.query("SELECT run_id, pipeline_name FROM runs WHERE run_id IN %s", (tuple({*builders, last_run}),)))
        assert dws_run in builders and builders and last_run == builders[-1], \
            f"{key}: last_run_id {last_run} ({jobs.get(last_run)}), materialized by {builders} {jobs} (this run {dws_run})"
    assert set(latest) == {json.dumps(["dws", name]) for name in DWS_HOURLY}, latest
    checks = postgres.query(
        "SELECT COUNT(*) FROM event_logs WHERE run_id = %s AND dagster_event_type = 'ASSET_CHECK_EVALUATION'", (dws_run,)
    )[0][0]
    assert checks == 3 * len(DWS_HOURLY), f"the DWS run {dws_run} stored {checks} asset check evaluations"
    # its steps' stdout/stderr went to the object store (deploy/dagster.yaml's compute_logs)
    logs = _compute_log_keys(stack, dws_run)
    assert logs, f"no compute log of run {dws_run} in the logs bucket"

    # 3. the daemon's sensors: ticks and cursors in Postgres's schedule storage
    def cursors() -> dict[str, str] | None:
        found = {}
        for (body,) in postgres.query("SELECT instigator_body FROM instigators"):
            state = deserialize_value(body, InstigatorState)
            data = state.instigator_data
            if state.name in {"connector_status_sensor", "dlq_sensor"} and getattr(data, "cursor", None):
                found[state.name] = data.cursor
        return found if len(found) == 2 else None

    stored_cursors = wait_for(cursors, "cursors of connector_status_sensor and dlq_sensor in Postgres", timeout=90)
    dlq = json.loads(stored_cursors["dlq_sensor"])
    assert {"offsets", "known_reasons", "total"} <= set(dlq) and dlq["total"] == 0, f"dlq_sensor's stored cursor: {dlq}"
    bodies = [deserialize_value(b, TickData) for (b,) in postgres.query("SELECT tick_body FROM job_ticks")]
    per_instigator = Counter(t.instigator_name for t in bodies)
    assert per_instigator["connector_status_sensor"] >= 1 and per_instigator["dlq_sensor"] >= 1, per_instigator
    assert [t.instigator_name for t in bodies if t.status.value == "FAILURE"] == [], "a tick stored in Postgres failed"

    # 4. nothing went to DAGSTER_HOME's default SQLite storage
    sqlite_files = [str(p.relative_to(pg_ui.home)) for p in pg_ui.home.rglob("*.db")]
    assert not sqlite_files, f"the instance wrote SQLite storage despite deploy/dagster.yaml: {sqlite_files}"
