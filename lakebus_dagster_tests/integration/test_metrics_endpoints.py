"""The Prometheus endpoints on the real stack, fetched with plain HTTP GETs as a scraper would: the
broker's and the Connect worker's (the JMX exporter agent, on their metrics ports) and ``lakebus
metrics`` (a real process of the CLI) with a provisioned sink that has committed a few records."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from lakebus_dagster.defs.asset_keys import dws_key
from lakebus_dagster.events import EventProducer, GeneratorConfig, generate_events
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.lake.dws import DWS_TABLES
from lakebus_dagster.stack.jmx_exporter import metrics_url

from .helpers import committed_rows, provisioned_bus, wait_for

pytestmark = pytest.mark.integration
COMMIT_INTERVAL_MS = 2000
EVENTS = 12


def scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """GET ``url`` and parse Prometheus' text format: metric name -> [(labels, value)]."""
    response = requests.get(url, timeout=30)
    response.raise_for_status()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def test_broker_worker_and_lakebus_endpoints(stack, tmp_path):
    host = stack.host
    broker = scrape(metrics_url(host, stack.broker_metrics_port(1)))
    assert broker["kafka_server_replicamanager_partitioncount"][0][1] > 0, "the broker leads the stack's internal topics"
    assert broker["kafka_controller_kafkacontroller_activecontrollercount"][0][1] == 1
    assert any(name.startswith("jvm_memory") for name in broker), "the agent's JVM metrics"

    suffix = uuid.uuid4().hex[:8]
    env = {**os.environ, "LAKEBUS_BUS_SUFFIX": suffix, "LAKEBUS_SINK_COMMIT_INTERVAL_MS": str(COMMIT_INTERVAL_MS)}
    # a Dagster instance of the test's own: no sensor has opened an incident, no DWS partition was built
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env["DAGSTER_HOME"] = str(home)
    port = _free_port(host)
    with provisioned_bus(stack, suffix, commit_interval_ms=COMMIT_INTERVAL_MS) as (_, layout, _client):
        name, topic = layout.connector_name, layout.bus_topic.name
        with EventProducer(topic, {"bootstrap.servers": stack.kafka.bootstrap_servers}) as producer:
            for event in generate_events(GeneratorConfig(count=EVENTS, seed=7, days=("2025-11-21",), hours=(3,))):
                producer.send(event)
        catalog = load_catalog(stack)
        wait_for(lambda: sum(committed_rows(catalog, t) for t in layout.tables) == EVENTS, f"{EVENTS} rows landed")

        def read_by_sink() -> float:
            worker = scrape(metrics_url(host, stack.worker_metrics_port(1)))
            return sum(v for labels, v in worker.get("kafka_connect_sink_task_metrics_sink_record_read", [])
                       if labels.get("connector") == name)

        wait_for(lambda: read_by_sink() >= EVENTS, "the worker's sink-task metrics count the records read")
        worker = scrape(metrics_url(host, stack.worker_metrics_port(1)))
        assert worker["kafka_connect_worker_connector_count"][0][1] >= 1
        assert ({"connector": name, "task": "0", "status": "running"}, 1.0) in worker["kafka_connect_connector_task_status"]

        log = tmp_path / "lakebus-metrics.log"  # a file, not a pipe: a full pipe would block the server
        with log.open("w") as errors:
            server = subprocess.Popen([sys.executable, "-m", "lakebus_dagster.cli", "metrics", "--host", host, "--port", str(port)],
                                      env=env, stdout=subprocess.DEVNULL, stderr=errors, text=True)
        try:
            url = f"http://{host}:{port}/metrics"

            def scraped():
                if server.poll() is not None:
                    raise AssertionError(f"lakebus metrics exited {server.returncode}: {log.read_text()[-2000:]}")
                try:
                    return scrape(url)
                except requests.ConnectionError:
                    return None

            # a fresh interpreter importing Dagster and the readers: slow on a busy machine
            ours = wait_for(scraped, "lakebus metrics answers", timeout=180)
            # the sink commits what it consumed: once every record is in the tables, no lag is left
            ours = wait_for(lambda: (m := scrape(url)) and sum(v for _, v in m.get("lakebus_sink_lag_records", [])) == 0 and m,
                            "no sink lag left", timeout=180)
        finally:
            server.terminate()  # SIGTERM, as a process supervisor stops it: it must exit at once
            try:
                code = server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                raise AssertionError(f"lakebus metrics ignored SIGTERM for 30 s: {log.read_text()[-2000:]}") from None
    assert code == 0, f"lakebus metrics exited {code} on SIGTERM: {log.read_text()[-2000:]}"
    assert {labels["source"]: v for labels, v in ours["lakebus_up"]} == {
        "connector": 1, "bus": 1, "catalog": 1, "ledger": 1, "incidents": 1, "dws": 1}
    assert sum(v for _, v in ours.get("lakebus_open_incidents", [])) == 0
    # nothing built in this instance: every partition of the gap fill's window (48 h) is missing
    expected = {dws_key(spec.name).to_user_string(): 48 if spec.grain == "hour" else 2 for spec in DWS_TABLES}
    assert {labels["asset"]: v for labels, v in ours["lakebus_dws_missing_partitions"]} == expected
    lag = ours["lakebus_sink_lag_records"]
    assert lag and all(labels["topic"] == topic and labels["connector"] == name for labels, _ in lag)
    assert sum(v for _, v in ours["lakebus_bus_end_offset"]) == EVENTS
    assert ours["lakebus_connector_running"] == [({"connector": name}, 1.0)]
    ages = {labels["table"]: v for labels, v in ours["lakebus_ods_last_commit_age_seconds"]}
    assert ages and set(ages) <= set(layout.tables) and all(0 <= age < 600 for age in ages.values()), ages
    assert time.time() - max(v for _, v in ours["lakebus_ods_last_commit_timestamp_seconds"]) < 600
