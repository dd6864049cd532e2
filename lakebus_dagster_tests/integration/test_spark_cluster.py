"""The DWS assets on a Spark standalone cluster: the stack's own master + worker (pyspark's classes),
named by ``LAKEBUS_SPARK_MASTER``, give the same DWS rows as local mode.

A Python process holds one SparkContext, and the session fixture's is local, so the cluster leg
materializes the bet-hour DWS asset in a subprocess configured only through the environment (as a deployment
would be). The DWS table is dropped between the legs, so the cluster leg has to write every row
itself; the executor's directory on the worker and the master's application list prove it ran there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest
import requests

from lakebus_dagster.connect import ConnectClient
import dagster as dg

from lakebus_dagster.defs.lakehouse import lakehouse
from lakebus_dagster.defs.lakehouse.schedules import PARTITION_RANGE_END_TAG, PARTITION_RANGE_START_TAG
from lakebus_dagster.defs.resources import BusLayoutResource, build_resources
from lakebus_dagster.definitions import defs
from lakebus_dagster.events import EventProducer, GeneratorConfig, generate_events
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.lake.dws import BET_HOUR, LakehouseTables
from lakebus_dagster.settings import REPO_ROOT

from .helpers import committed_rows, wait_for

pytestmark = pytest.mark.integration

SAMPLE = GeneratorConfig(count=300, seed=424242, days=("2025-11-25",), hours=(9, 10), users=20)
HOURS = ("2025-11-25-09:00", "2025-11-25-10:00")
TAGS = {PARTITION_RANGE_START_TAG: HOURS[0], PARTITION_RANGE_END_TAG: HOURS[1]}

#: the cluster leg: the same asset with build_resources() from the environment; prints what Spark ran on
_CLUSTER_LEG = f"""
import json
import dagster as dg
from pyspark.sql import SparkSession
from lakebus_dagster.defs.lakehouse import lakehouse
from lakebus_dagster.defs.resources import build_resources
result = dg.materialize([lakehouse.dws_assets["dws_biz_bet_hour"]], resources=build_resources(), tags={TAGS!r})
spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
sc = spark.sparkContext
print("RESULT " + json.dumps({{"success": result.success, "master": sc.master, "app_id": sc.applicationId,
                               "executors": sc._jsc.sc().getExecutorMemoryStatus().size() - 1}}))
spark.stop()
"""
BET_HOUR_ASSET = lakehouse.dws_assets["dws_biz_bet_hour"]


def _dws_rows(catalog, tables: LakehouseTables) -> list[tuple]:
    """Every row of the bet-hour DWS table, read through pyiceberg (no Spark session, no Spark cache in between)."""
    rows = catalog.load_table(tables.dws(BET_HOUR)).scan().to_arrow().to_pylist()
    return sorted(tuple(sorted(r.items())) for r in rows)


def land_sample(stack, suffix: str) -> tuple[dict, object, list]:
    """Provision a bus with ``suffix`` and land SAMPLE in its ODS tables; (resources, layout, events)."""
    resources = {**build_resources(), "layout": BusLayoutResource(name_suffix=suffix, commit_interval_ms=2000)}
    layout = resources["layout"].layout()
    assert defs.resolve_job_def("provision_lakebus").execute_in_process(resources=resources).success
    events = list(generate_events(SAMPLE))
    with EventProducer(layout.bus_topic.name, stack.kafka_client_config()) as producer:
        for event in events:
            producer.send(event)
    expected = {layout.routes[e]: sum(x.event == e for x in events) for e in ("bet", "recharge")}
    catalog = load_catalog(stack)
    wait_for(lambda: {t: committed_rows(catalog, t) for t in expected} == expected, f"ODS rows {expected}", 180)
    return resources, layout, events


@pytest.fixture
def ods(stack, spark):
    suffix = uuid.uuid4().hex[:8]
    layout = BusLayoutResource(name_suffix=suffix).layout()
    client = ConnectClient(stack.connect_url)
    try:
        resources, layout, _ = land_sample(stack, suffix)
        yield suffix, resources, LakehouseTables.from_routes(layout.routes)
    finally:
        if client.exists(layout.connector_name):
            client.delete(layout.connector_name)
        client.close()


def test_dws_on_the_standalone_master_equals_local_mode(ods, stack, spark):
    suffix, resources, tables = ods
    assert spark.sparkContext.master.startswith("local")
    assert dg.materialize([BET_HOUR_ASSET], resources=resources, tags=TAGS).success
    catalog = load_catalog(stack)
    local_rows = _dws_rows(catalog, tables)
    bets = [e for e in generate_events(SAMPLE) if e.event == "bet"]
    # every bet of both hours is in exactly one row's count
    assert sum(dict(r)["bet_count"] for r in local_rows) == len(bets) and len(local_rows) > 10

    # the cluster leg starts from no DWS table at all (dropped through Spark: its table cache forgets it)
    old_uuid = catalog.load_table(tables.dws(BET_HOUR)).metadata.table_uuid
    spark.sql(f"DROP TABLE {tables.qualified(tables.dws(BET_HOUR))}")
    assert not catalog.table_exists(tables.dws(BET_HOUR))

    master = stack.local_spark_master
    env = {**os.environ, "LAKEBUS_SPARK_MASTER": master, "LAKEBUS_BUS_SUFFIX": suffix,
           "LAKEBUS_SINK_COMMIT_INTERVAL_MS": "2000", "LAKEBUS_SPARK_DRIVER_MEMORY": "1g"}
    proc = subprocess.run([sys.executable, "-c", _CLUSTER_LEG], env=env, cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=300)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert proc.returncode == 0 and line, f"cluster leg failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    ran = json.loads(line[len("RESULT "):])
    assert ran["success"] and ran["master"] == master and ran["executors"] >= 1, ran

    # Spark's own view: the master finished the application, the worker ran its executor
    apps = requests.get(f"http://{stack.host}:{stack.ports.spark_webui}/json/", timeout=10).json()
    finished = {a["id"]: a for a in apps.get("completedapps", [])}
    assert ran["app_id"] in finished, sorted(finished)
    assert (stack.data_dir / "spark-worker" / ran["app_id"]).is_dir(), "no executor directory on the worker"

    assert catalog.load_table(tables.dws(BET_HOUR)).metadata.table_uuid != old_uuid
    assert _dws_rows(catalog, tables) == local_rows
