"""Metrics a platform team can scrape: the JMX exporter's rules file (what its patterns name a
broker's and a worker's beans), the metrics ports (each node's own, apart from every other port of
every stack ``make test`` runs side by side), the agent on the brokers' and workers' command lines,
``stack status``'s metrics URLs, and ``lakebus metrics``' gauges from fake readers (a source that
fails is ``lakebus_up{source} 0``, never a failed scrape).

The live endpoints are fetched in integration/test_metrics_endpoints.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from lakebus_dagster.cli.metrics import DEFAULT_PORT_OFFSET, LakebusCollector, Readers, registry_for
from lakebus_dagster.connect.models import ConnectorStatus, TaskStatus
from lakebus_dagster.monitor.stall import SinkProgress
from lakebus_dagster.setting_readers import SettingsReader
from lakebus_dagster.stack import jmx_exporter
from lakebus_dagster.stack.local_settings import METRICS_PORT_OFFSET, load_stack_settings
from lakebus_dagster.stack.status_table import ServiceState, print_status
from lakebus_dagster_tests.stages import CDC_PORTS, LAKE_PORTS, PROFILE_PORTS, SECURED_PORTS

RULES = yaml.safe_load(jmx_exporter.RULES_FILE.read_text())


# -- the rules file ------------------------------------------------------------------------------
def _exported(bean: str, attribute: str, value: object = 1.0) -> tuple[str, dict[str, str], object] | None:
    """What the exporter makes of one attribute: its first matching rule's name, labels and value
    (the agent matches ``domain<key=value, ...><>attribute: value`` against ``^.*(?:pattern).*$``,
    substitutes $n, lower-cases the name and makes it a valid metric name; a ``_total`` ending is
    dropped from a metric that is not a counter, as the agent's 1.x exposition does)."""
    domain, props = bean.split(":", 1)
    text = f"{domain}<{', '.join(props.split(','))}><>{attribute}: {value}"
    for rule in RULES["rules"]:
        m = re.match(f"^.*(?:{rule['pattern']}).*$", text)
        if not m:
            continue

        def sub(template: str) -> str:
            return re.sub(r"\$(\d+)", lambda g: m.group(int(g.group(1))), template)

        name = re.sub(r"_+", "_", re.sub(r"[^a-zA-Z0-9:_]", "_", sub(rule["name"]))).lower().removesuffix("_total")
        labels = {sub(k).lower(): sub(v) for k, v in (rule.get("labels") or {}).items()}
        return name, labels, rule.get("value", value)
    return None


def test_rules_file_is_short_and_reads_only_kafka_and_connect_beans():
    assert len(RULES["rules"]) <= 12
    assert sorted(RULES["includeObjectNames"]) == ["kafka.connect:*", "kafka.controller:*", "kafka.network:*", "kafka.server:*"]
    assert RULES["lowercaseOutputName"] is True


@pytest.mark.parametrize("bean, attribute, expected", [
    ("kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=events", "Count",
     ("kafka_server_brokertopicmetrics_messagesinpersec", {"topic": "events"})),
    ("kafka.server:type=ReplicaManager,name=PartitionCount", "Value", ("kafka_server_replicamanager_partitioncount", {})),
    ("kafka.controller:type=KafkaController,name=ActiveControllerCount", "Value",
     ("kafka_controller_kafkacontroller_activecontrollercount", {})),
    ("kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,version=11", "Count",
     ("kafka_network_requestmetrics_requestspersec", {"request": "Produce", "version": "11"})),
    ("kafka.connect:type=sink-task-metrics,connector=events-iceberg-sink,task=0", "sink-record-read-total",
     ("kafka_connect_sink_task_metrics_sink_record_read", {"connector": "events-iceberg-sink", "task": "0"})),
    ("kafka.connect:type=connector-task-metrics,connector=c,task=1", "offset-commit-success-percentage",
     ("kafka_connect_connector_task_metrics_offset_commit_success_percentage", {"connector": "c", "task": "1"})),
    ("kafka.connect:type=connect-worker-metrics", "connector-count", ("kafka_connect_worker_connector_count", {})),
    ("kafka.connect:type=connect-worker-metrics,connector=c", "connector-running-task-count",
     ("kafka_connect_worker_connector_connector_running_task_count", {"connector": "c"})),
])
def test_rules_name_the_beans(bean, attribute, expected):
    found = _exported(bean, attribute)
    assert found is not None and found[:2] == expected


def test_a_task_state_is_a_one_labelled_with_it():
    assert _exported("kafka.connect:type=connector-task-metrics,connector=c,task=0", "status", "running") == (
        "kafka_connect_connector_task_status", {"connector": "c", "task": "0", "status": "running"}, 1)


def test_the_maven_module_fetches_the_agent_into_the_jars_cache():
    from lakebus_dagster.stack.jars import COMPONENTS, MAVEN_DIR

    assert jmx_exporter.COMPONENT in COMPONENTS
    assert "<module>jmx-exporter</module>" in (MAVEN_DIR / "pom.xml").read_text()
    pom = (MAVEN_DIR / "jmx-exporter" / "pom.xml").read_text()
    assert "<artifactId>jmx_prometheus_javaagent</artifactId>" in pom and "maven-dependency-plugin" in pom


# -- ports ---------------------------------------------------------------------------------------
def _settings(env: dict[str, str]):
    return load_stack_settings(SettingsReader(environ=env))


def stack_ports(env: dict[str, str]) -> dict[int, str]:
    """Every port one stack listens on (the metrics ones included), port -> what; a port twice fails."""
    s = _settings(env)
    taken: dict[int, str] = {}

    def take(port: int, what: str) -> None:
        assert port not in taken, f"{what} and {taken.get(port)} on port {port} ({env})"
        taken[port] = what

    for n in range(1, s.brokers + 1):
        take(s.broker_port(n), f"broker {n}")
        take(s.controller_port(n), f"controller {n}")
        take(s.broker_metrics_port(n), f"broker {n} metrics")
    for n in range(1, s.connect_workers + 1):
        take(s.connect_port(n), f"worker {n}")
        take(s.worker_metrics_port(n), f"worker {n} metrics")
    for port, what in ((s.ports.rest_catalog, "catalog"), (s.ports.s3, "s3"), (s.ports.spark_master, "spark master"),
                       (s.ports.spark_master + 1, "spark worker"), (s.ports.spark_webui, "master UI"),
                       (s.ports.spark_webui + 1, "worker UI"), (s.ports.spark_webui + 2, "connect UI"),
                       (s.ports.spark_connect, "spark connect"), (s.dagster_port, "dagster"),
                       (s.dagster_port + DEFAULT_PORT_OFFSET, "lakebus metrics")):
        take(port, what)
    if env.get("LAKEBUS_POSTGRES") == "on":
        take(s.ports.postgres, "postgres")
    return taken


STACKS = {
    "default": {"LAKEBUS_PROFILE": "single"},
    "lake": {**LAKE_PORTS, "LAKEBUS_PROFILE": "single"},
    "cluster": {**PROFILE_PORTS, "LAKEBUS_PROFILE": "cluster"},
    "secured": {**SECURED_PORTS, "LAKEBUS_PROFILE": "secured"},
    "cdc": {**CDC_PORTS, "LAKEBUS_PROFILE": "single", "LAKEBUS_POSTGRES": "on"},
}


def test_metrics_ports_derive_from_each_nodes_port():
    s = _settings(STACKS["cluster"])
    assert [s.broker_metrics_port(n) for n in (1, 2, 3)] == [26097, 26107, 26117]
    assert [s.worker_metrics_port(n) for n in (1, 2)] == [27088, 27098]
    assert METRICS_PORT_OFFSET == 5
    default = _settings(STACKS["default"])
    assert (default.broker_metrics_port(1), default.worker_metrics_port(1)) == (19097, 8088)


def test_every_port_of_every_stack_make_test_runs_is_apart():
    everywhere: dict[int, str] = {}
    for name, env in STACKS.items():
        for port, what in stack_ports(env).items():
            assert port not in everywhere, f"{name}'s {what} and {everywhere.get(port)} on port {port}"
            everywhere[port] = f"{name}'s {what}"


# -- the agent on the command lines, the status rows ----------------------------------------------
@pytest.mark.parametrize("profile, ports", [("single", {}), ("cluster", PROFILE_PORTS)])
def test_brokers_and_workers_start_with_the_agent_on_their_metrics_port(monkeypatch, tmp_path, profile, ports):
    from lakebus_dagster.stack.services import build_services

    for var, value in {**ports, "LAKEBUS_PROFILE": profile, "LAKEBUS_STATE_DIR": str(tmp_path / "state"),
                       "LAKEBUS_S3_ACCESS_KEY_ID": "unit-access", "LAKEBUS_S3_SECRET_ACCESS_KEY": "unit-secret"}.items():
        monkeypatch.setenv(var, value)
    jars = tmp_path / "jars"
    (jars / "jmx-exporter").mkdir(parents=True)
    (jars / "jmx-exporter" / "jmx_prometheus_javaagent-1.0.1.jar").write_bytes(b"")
    settings = load_stack_settings()
    services = {s.name: s for s in build_services(settings, jars, "java")}
    expected = {**{("kafka" if n == 1 else f"kafka-{n}"): settings.broker_metrics_port(n) for n in range(1, settings.brokers + 1)},
                **{("connect" if n == 1 else f"connect-{n}"): settings.worker_metrics_port(n)
                   for n in range(1, settings.connect_workers + 1)}}
    assert {name: s.metrics_port for name, s in services.items() if s.metrics_port} == expected
    for name, port in expected.items():
        agents = [p for p in services[name].jvm_props if p.startswith("-javaagent:")]
        assert agents == [f"-javaagent:{jars / 'jmx-exporter' / 'jmx_prometheus_javaagent-1.0.1.jar'}"
                          f"=127.0.0.1:{port}:{jmx_exporter.RULES_FILE}"]
    assert jmx_exporter.RULES_FILE.exists()


def test_stack_status_prints_each_metrics_url(capsys):
    print_status([ServiceState("kafka", 21092, 1, 2**20, True, Path("k.log"), jmx_exporter.metrics_url("127.0.0.1", 21097)),
                  ServiceState("s3", 22000, 2, 2**20, True, Path("s.log"))])
    out = capsys.readouterr().out
    assert "metrics (Prometheus)" in out and "kafka         http://127.0.0.1:21097/metrics" in out
    assert jmx_exporter.metrics_url("::1", 9) == "http://[::1]:9/metrics"


# -- lakebus's own gauges ------------------------------------------------------------------------
NOW = 1_800_000_000.0


def _scrape(readers: Readers) -> dict[str, list[tuple[dict[str, str], float]]]:
    registry = registry_for(readers, clock=lambda: NOW)
    text = generate_latest(registry).decode()
    return {f.name: [(s.labels, s.value) for s in f.samples] for f in text_string_to_metric_families(text)}


def _readers(connector=None, progress=None, commits=None, verified=None, incidents=None, dws=None) -> Readers:
    def fail(what):
        def read():
            raise ConnectionError(f"{what} refused")
        return read

    return Readers("events-iceberg-sink", "events", connector or fail("connect"), progress or fail("kafka"),
                   commits or fail("catalog"), verified or fail("ledger state"), incidents or fail("dagster"),
                   dws or fail("dagster"))


RUNNING = ConnectorStatus("events-iceberg-sink", "RUNNING", "w1", tasks=[TaskStatus(0, "RUNNING", "w1"), TaskStatus(1, "FAILED", "w1")])
PROGRESS = SinkProgress(consumed={0: 90, 1: 50}, end={0: 100, 1: 50, 2: 7}, uncommitted=12, coordinator_members=1)


def test_gauges_from_the_status_readers():
    got = _scrape(_readers(lambda: RUNNING, lambda: PROGRESS,
                           lambda: {"ods.events_a": int((NOW - 42) * 1000), "ods.events_b": None}))
    assert sorted((lab["source"], v) for lab, v in got["lakebus_up"]) == [("bus", 1), ("catalog", 1), ("connector", 1), ("dws", 0),
                                                                          ("incidents", 0), ("ledger", 0)]
    lag = {lab["partition"]: v for lab, v in got["lakebus_sink_lag_records"]}
    assert lag == {"0": 10, "1": 0, "2": 7}
    assert all(lab["topic"] == "events" and lab["connector"] == "events-iceberg-sink" for lab, _ in got["lakebus_sink_lag_records"])
    assert got["lakebus_sink_uncommitted_records"] == [({"connector": "events-iceberg-sink"}, 12)]
    assert got["lakebus_sink_commit_coordinators"][0][1] == 1
    assert {lab["state"]: v for lab, v in got["lakebus_connector_tasks"]} == {"FAILED": 1, "RUNNING": 1}
    assert got["lakebus_connector_running"][0][1] == 0  # a task failed
    # a table the sink never committed to has no age (not a zero)
    assert got["lakebus_ods_last_commit_age_seconds"] == [({"table": "ods.events_a"}, 42)]


def test_a_failed_read_is_a_zero_never_a_failed_scrape():
    logged: list[str] = []
    collector = LakebusCollector(_readers(), log=logged.append)
    families = {f.name: f for f in collector.collect()}
    assert [(s.labels["source"], s.value) for s in families["lakebus_up"].samples] == [
        ("connector", 0), ("catalog", 0), ("ledger", 0), ("incidents", 0), ("dws", 0)]
    assert "lakebus_sink_lag_records" not in families
    assert any("connector unreadable: ConnectionError: connect refused" in line for line in logged)


def test_no_connector_no_bus_read():
    asked: list[str] = []

    def progress():
        asked.append("bus")
        return PROGRESS

    got = _scrape(_readers(lambda: None, progress, lambda: {}))
    assert asked == [] and got["lakebus_connector_deployed"][0][1] == 0
    assert [lab["source"] for lab, _ in got["lakebus_up"]] == ["connector", "catalog", "ledger", "incidents", "dws"]


def test_the_cli_verb_is_there():
    from lakebus_dagster.cli.main import build_parser

    args = build_parser(["metrics", "--once"]).parse_args(["metrics", "--once", "--port", "9"])
    assert args.once and args.port == 9 and args.func.__module__ == "lakebus_dagster.cli.metrics"


def test_the_ledgers_verified_point_and_the_records_past_it():
    got = _scrape(Readers("events-iceberg-sink", "events", lambda: RUNNING, lambda: PROGRESS, lambda: {},
                          lambda: {0: 95, 1: 50}))
    assert ({"source": "ledger"}, 1) in got["lakebus_up"]
    assert {lab["partition"]: v for lab, v in got["lakebus_ledger_verified_offset"]} == {"0": 95, "1": 50}
    assert {lab["partition"]: v for lab, v in got["lakebus_ledger_unverified_records"]} == {"0": 5, "1": 0}
    no_run_yet = _scrape(Readers("events-iceberg-sink", "events", lambda: RUNNING, lambda: PROGRESS, lambda: {}, lambda: None))
    assert "lakebus_ledger_verified_offset" not in no_run_yet, "before the ledger's first run: no series, not a 0"
    unread_bus = _scrape(Readers("events-iceberg-sink", "events", lambda: None, lambda: PROGRESS, lambda: {}, lambda: {0: 95}))
    assert "lakebus_ledger_unverified_records" not in unread_bus and unread_bus["lakebus_ledger_verified_offset"]



# -- the Dagster instance's sources: open incidents, DWS gaps ------------------------------------------
def _book_cursor(**open_incidents: str | None) -> str:
    """A connector-side book: key -> part_of."""
    from lakebus_dagster.monitor.incidents import IncidentBook, OpenIncident

    return IncidentBook(open={k: OpenIncident("s", "events-iceberg-sink", NOW, part_of=p) for k, p in open_incidents.items()}).to_cursor()


def test_open_incidents_per_sensor_and_kind_from_the_sensors_cursors():
    from lakebus_dagster.cli.metrics_readers import INCIDENT_SENSORS, open_incidents
    from lakebus_dagster.cli.status import SENSOR
    from lakebus_dagster.defs.lakehouse.sensors import LAKE_INCIDENT_SENSOR
    from lakebus_dagster.monitor.incidents import IncidentBook, OpenIncident
    from lakebus_dagster.monitor.lake_incidents import LakeState

    assert INCIDENT_SENSORS == (SENSOR, LAKE_INCIDENT_SENSOR)
    lake = LakeState(IncidentBook(open={"dws:dws_hourly:2026-01-01-01:00": OpenIncident("run failed", None, NOW),
                                        "fresh:ods/bet": OpenIncident("stale", None, NOW)})).to_cursor()
    connector = _book_cursor(**{"connector:events-iceberg-sink:task:0:FAILED": None, "connect:unreachable": None,
                                "connector:events-iceberg-sink:stall": "connector:events-iceberg-sink:task:0:FAILED"})
    counts = open_incidents({SENSOR: connector, LAKE_INCIDENT_SENSOR: lake})
    # the stall is a part of the task's failure: one episode, one incident
    assert counts == {(SENSOR, "connector"): 1, (SENSOR, "connect"): 1, (LAKE_INCIDENT_SENSOR, "dws"): 1,
                      (LAKE_INCIDENT_SENSOR, "fresh"): 1}
    assert open_incidents({SENSOR: None}) == {}, "a sensor that never ticked holds nothing"
    got = _scrape(_readers(lambda: None, None, lambda: {}, lambda: None, lambda: counts, lambda: {}))
    assert ({"source": "incidents"}, 1) in got["lakebus_up"]
    assert ({"sensor": SENSOR, "kind": "connector"}, 1) in got["lakebus_open_incidents"]
    assert len(got["lakebus_open_incidents"]) == 4


def test_an_unreadable_instance_is_a_zero_for_both_of_its_sources(tmp_path):
    from lakebus_dagster.cli.metrics_readers import InstanceReads

    reads = InstanceReads(tmp_path / "nowhere", clock=lambda: NOW)
    logged: list[str] = []
    collector = LakebusCollector(_readers(lambda: None, None, lambda: {}, lambda: None, reads.incidents, reads.dws),
                                 log=logged.append)
    families = {f.name: f for f in collector.collect()}
    ups = {s.labels["source"]: s.value for s in families["lakebus_up"].samples}
    assert (ups["incidents"], ups["dws"], ups["catalog"]) == (0, 0, 1)
    assert "lakebus_open_incidents" not in families and "lakebus_dws_missing_partitions" not in families
    assert any("incidents unreadable: FileNotFoundError: no Dagster instance at" in line for line in logged)
    assert not (tmp_path / "nowhere").exists(), "a scrape never creates an instance"


def test_dws_gaps_are_the_gap_fills_window_and_decision():
    from datetime import datetime, timezone

    import dagster as dg

    from lakebus_dagster.defs.lakehouse.automation import GAP_LOOKBACK, gap_window, gaps
    from lakebus_dagster.defs.lakehouse.partitions import daily_partitions, hourly_partitions

    now = datetime(2026, 3, 10, 12, 30, tzinfo=timezone.utc)
    hours = gap_window(hourly_partitions, now)
    assert len(hours) == GAP_LOOKBACK.total_seconds() / 3600 and (hours[0], hours[-1]) == ("2026-03-08-12:00", "2026-03-10-11:00")
    assert gap_window(daily_partitions, now) == ["2026-03-08", "2026-03-09"]  # today is not complete yet
    status = {hours[0]: dg.AssetPartitionStatus.MATERIALIZED, hours[1]: dg.AssetPartitionStatus.FAILED,
              hours[2]: dg.AssetPartitionStatus.IN_PROGRESS}
    assert gaps(hours[:4], status) == [hours[1], hours[3]], "failed and missing; not built nor in progress"
    assert gaps(hours[:2], None) == hours[:2], "an asset with no event at all: every partition is missing"


def test_dws_gaps_read_from_the_instance_per_asset(tmp_path):
    import dagster as dg

    from lakebus_dagster.cli.metrics_readers import InstanceReads
    from lakebus_dagster.lake.dws import DWS_TABLES

    class FakeInstance:
        def get_status_by_partition(self, key, keys, partitions_def):
            assert isinstance(partitions_def, dg.TimeWindowPartitionsDefinition)
            return {k: dg.AssetPartitionStatus.MATERIALIZED for k in keys[1:]}  # the oldest one is missing

        def all_instigator_state(self):
            return []

    reads = InstanceReads(tmp_path, clock=lambda: NOW)
    reads._instance = FakeInstance()
    missing = reads.dws()
    assert len(missing) == len(DWS_TABLES) and set(missing.values()) == {1}
    assert reads.incidents() == {}
    got = _scrape(_readers(lambda: None, None, lambda: {}, lambda: None, reads.incidents, reads.dws))
    assert sorted(lab["asset"] for lab, _ in got["lakebus_dws_missing_partitions"]) == sorted(missing)
    assert ({"source": "dws"}, 1) in got["lakebus_up"]
