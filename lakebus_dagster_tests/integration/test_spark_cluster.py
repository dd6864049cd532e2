"""The DWS assets through the stack's Spark Connect server (an application on the standalone master:
its driver in the server, its executor on the worker) give the same rows as an embedded local
session (``LAKEBUS_SPARK_REMOTE=local``, the fallback).

The embedded leg runs in a subprocess configured only through the environment (as a deployment
would be); the DWS table is dropped between the legs, so the Connect leg has to write every row
itself; the master's application list and the worker's executor directory prove where it ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest
import dagster as dg
import requests

from lakebus_dagster.connect import ConnectClient

from lakebus_dagster.defs.lakehouse import build_lakehouse
from lakebus_dagster.defs.lakehouse.schedules import PARTITION_RANGE_END_TAG, PARTITION_RANGE_START_TAG
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster.definitions import defs
from lakebus_dagster.events import EventProducer, GeneratorConfig, generate_events
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.lake.dws import BET_HOUR, LakehouseTables
from lakebus_dagster.settings import REPO_ROOT

from .helpers import TEST_COMMIT_INTERVAL_MS, committed_rows, wait_for

#: any profile: in the cluster stage (a Spark standalone cluster like every profile's) to balance make test's lanes
pytestmark = [pytest.mark.integration, pytest.mark.cluster]

SAMPLE = GeneratorConfig(count=300, seed=424242, days=("2025-11-25",), hours=(9, 10), users=20)
HOURS = ("2025-11-25-09:00", "2025-11-25-10:00")
TAGS = {PARTITION_RANGE_START_TAG: HOURS[0], PARTITION_RANGE_END_TAG: HOURS[1]}

#: a leg in a process of its own: the asset with build_resources() from the environment (the Spark
#: resource included: Spark Connect, or embedded with LAKEBUS_SPARK_REMOTE=local)
_LEG = f"""
import json
import dagster as dg
from lakebus_dagster.defs.lakehouse import build_lakehouse
lakehouse = build_lakehouse()
from lakebus_dagster.defs.environment import build_resources
result = dg.materialize([lakehouse.dws_assets["dws_biz_bet_hour"]], resources=build_resources(), tags={TAGS!r},
                        raise_on_error=False)
checks = [e.passed for e in result.get_asset_check_evaluations()]
errors = [e.event_specific_data.error.to_string()[-2000:] for e in result.all_events if e.is_step_failure]
print("RESULT " + json.dumps({{"success": result.success, "checks": checks, "errors": errors}}))
"""
CONNECT_APP_NAME = "lakebus-spark-connect"
BET_HOUR_ASSET = build_lakehouse().dws_assets["dws_biz_bet_hour"]


def connect_server_app(settings) -> dict:
    """The Spark Connect server's application as the standalone master lists it."""
    apps = requests.get(f"http://{settings.host}:{settings.ports.spark_webui}/json/", timeout=10).json()
    (app,) = [a for a in apps.get("activeapps", []) if a.get("name") == CONNECT_APP_NAME and a.get("state") == "RUNNING"]
    return app


def run_leg(settings, suffix: str, env: dict[str, str] | None = None, *, wait: bool = True):
    """The bet-hour asset in a subprocess; its RESULT dict when ``wait``, else the process."""
    # a process that attached to Spark Connect marks its environment (SPARK_CONNECT_MODE_ENABLED), and
    # pyspark then builds every later session of it and its children as a Connect session: not inherited
    inherited = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")}
    full_env = {**inherited, "LAKEBUS_BUS_SUFFIX": suffix, "LAKEBUS_SINK_COMMIT_INTERVAL_MS": str(TEST_COMMIT_INTERVAL_MS), **(env or {})}
    proc = subprocess.Popen([sys.executable, "-c", _LEG], env=full_env, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    return leg_result(proc) if wait else proc


def leg_result(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=600)
    line = next((ln for ln in out.splitlines() if ln.startswith("RESULT ")), None)
    assert proc.returncode == 0 and line, f"leg failed ({proc.returncode}):\n{out[-3000:]}\n{err[-5000:]}"
    return json.loads(line[len("RESULT "):])


def _dws_rows(catalog, tables: LakehouseTables) -> list[tuple]:
    """Every row of the bet-hour DWS table, read through pyiceberg (no Spark session, no Spark cache in between)."""
    rows = catalog.load_table(tables.dws(BET_HOUR)).scan().to_arrow().to_pylist()
    return sorted(tuple(sorted(r.items())) for r in rows)


def send_and_land(stack, layout, sample: GeneratorConfig) -> list:
    """Send ``sample``'s events to the provisioned bus of ``layout`` and wait until both ODS tables
    hold exactly them; the events."""
    events = list(generate_events(sample))
    with EventProducer(layout.bus_topic.name, stack.kafka.client_config()) as producer:
        for event in events:
            producer.send(event)
    expected = {layout.routes[e]: sum(x.event == e for x in events) for e in ("bet", "recharge")}
    catalog = load_catalog(stack)
    wait_for(lambda: {t: committed_rows(catalog, t) for t in expected} == expected, f"ODS rows {expected}", 180)
    return events


def land_sample(stack, suffix: str) -> tuple[dict, object, list]:
    """Provision a bus with ``suffix`` and land SAMPLE in its ODS tables; (resources, layout, events)."""
    resources = {**build_resources(), "layout": BusLayoutResource(name_suffix=suffix, commit_interval_ms=TEST_COMMIT_INTERVAL_MS)}
    layout = resources["layout"].layout()
    assert defs.resolve_job_def("provision_lakebus").execute_in_process(resources=resources).success
    return resources, layout, send_and_land(stack, layout, SAMPLE)


@pytest.fixture
def ods(stack, spark):
    suffix = uuid.uuid4().hex[:8]
    layout = BusLayoutResource(name_suffix=suffix).layout()
    client = ConnectClient(stack.connect.urls[0])
    try:
        resources, layout, _ = land_sample(stack, suffix)
        yield suffix, resources, LakehouseTables.from_routes(layout.routes)
    finally:
        if client.exists(layout.connector_name):
            client.delete(layout.connector_name)
        client.close()


def test_dws_through_spark_connect_equals_an_embedded_session(ods, stack, spark):
    suffix, resources, tables = ods
    assert stack.spark.remote, "the default configuration attaches to the stack's Spark Connect server"
    server = connect_server_app(stack)
    result = dg.materialize([BET_HOUR_ASSET], resources=resources, tags=TAGS)
    assert result.success and all(e.passed for e in result.get_asset_check_evaluations())
    catalog = load_catalog(stack)
    connect_rows = _dws_rows(catalog, tables)
    bets = [e for e in generate_events(SAMPLE) if e.event == "bet"]
    # every bet of both hours is in exactly one row's count
    assert sum(dict(r)["bet_count"] for r in connect_rows) == len(bets) and len(connect_rows) > 10
    # Spark's own view: the server's application (the same one before and after) ran it on the worker
    assert connect_server_app(stack)["id"] == server["id"]
    assert (stack.data_dir / "spark-worker" / server["id"]).is_dir(), "no executor of the server on the worker"

    # the embedded leg starts from no DWS table at all
    old_uuid = catalog.load_table(tables.dws(BET_HOUR)).metadata.table_uuid
    spark.sql(f"DROP TABLE {tables.qualified(tables.dws(BET_HOUR))}")
    assert not catalog.table_exists(tables.dws(BET_HOUR))
    ran = run_leg(stack, suffix, {"LAKEBUS_SPARK_REMOTE": "local", "LAKEBUS_SPARK_MASTER": "local[2]",
                                  "LAKEBUS_SPARK_DRIVER_MEMORY": "1g"})
    assert ran["success"] and ran["checks"] and all(ran["checks"]), ran
    assert catalog.load_table(tables.dws(BET_HOUR)).metadata.table_uuid != old_uuid
    assert _dws_rows(catalog, tables) == connect_rows
