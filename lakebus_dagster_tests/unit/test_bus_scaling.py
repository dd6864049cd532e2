"""The bus layout's partitions and tasks, and the topic checks that refuse unsafe changes (no services)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lakebus_dagster.bus.desired import sink_connector_config
from lakebus_dagster.bus.layout import BusLayout, LayoutError, SinkTuning
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster.provision import ProvisioningError
from lakebus_dagster.settings import REPO_ROOT
from lakebus_dagster.provision.topics import LiveTopic, check_topics


class _Lake:
    catalog_uri, warehouse, region, s3_endpoint = "http://c", "s3://w/", "us-east-1", "http://s3"


def test_tasks_follow_the_bus_partitions_unless_declared():
    layout = BusLayout.default()
    assert layout.bus_topic.partitions == 1 and layout.tasks_max == 1
    three = BusLayoutResource(bus_partitions=3).layout()
    assert three.bus_topic.partitions == 3 and three.tasks_max == 3
    assert sink_connector_config(three, _Lake())["tasks.max"] == "3"
    assert BusLayoutResource(bus_partitions=3, tasks_max=2).layout().tasks_max == 2
    assert three.control_topic.partitions == 1


def test_more_tasks_than_partitions_or_zero_tasks_is_refused():
    with pytest.raises(LayoutError, match="tasks_max=4 exceeds the 3 partition"):
        BusLayoutResource(bus_partitions=3, tasks_max=4).layout()
    with pytest.raises(LayoutError, match="tasks_max must be >= 1"):
        replace(BusLayout.default(), tuning=SinkTuning(tasks_max=0))


def test_yaml_layout_declares_partitions_and_tasks(tmp_path):
    path = tmp_path / "layout.yaml"
    path.write_text(
        "bus_topic: {name: events, partitions: 6}\n"
        "control_topic: {name: iceberg-control-events}\n"
        "dlq_topic: {name: dlq-events}\n"
        "tuning: {tasks_max: 4}\n"
    )
    layout = BusLayout.from_yaml(path)
    assert (layout.bus_topic.partitions, layout.tasks_max) == (6, 4)
    path.write_text(path.read_text().replace("tuning: {tasks_max: 4}\n", ""))
    assert BusLayout.from_yaml(path).tasks_max == 6


def _live(name: str, partitions: int, rf: int = 1) -> LiveTopic:
    return LiveTopic(name, partitions, rf, {})


def test_shrinking_a_topic_is_refused_naming_topic_and_counts():
    layout = BusLayoutResource(bus_partitions=2).layout()
    specs = [layout.bus_topic, layout.control_topic]
    with pytest.raises(ProvisioningError) as err:
        check_topics(specs, 1, {"events": _live("events", 3)}, layout.control_topic.name)
    assert "'events' has 3 partitions live, the layout declares 2" in str(err.value)
    check_topics(specs, 1, {"events": _live("events", 2)}, layout.control_topic.name)  # equal: fine
    check_topics(specs, 1, {"events": _live("events", 1)}, layout.control_topic.name)  # grow: fine


def test_replication_factor_above_the_live_brokers_is_refused():
    layout = BusLayout.default()
    spec = replace(layout.bus_topic, replication_factor=3)
    with pytest.raises(ProvisioningError, match="replication_factor 3 exceeds the 1 broker"):
        check_topics([spec], 1, {}, layout.control_topic.name)
    check_topics([spec], 3, {}, layout.control_topic.name)


def test_run_config_naming_one_layout_field_keeps_the_deployments_other_settings(monkeypatch):
    """Issue 21: the Launchpad's ``{"resources": {"layout": {"config": {"bus_partitions": 2}}}}`` on the
    cluster profile turned RF 3 into 1 — Dagster replaces a resource's whole configuration. The
    shipped resource reads its unset fields from the settings when the run uses it."""
    import dagster as dg

    from lakebus_dagster.defs.environment import build_resources
    from lakebus_dagster.defs.resources import BusLayoutResource

    monkeypatch.setenv("LAKEBUS_TOPIC_REPLICATION_FACTOR", "3")
    monkeypatch.setenv("LAKEBUS_TOPIC_MIN_INSYNC_REPLICAS", "2")
    monkeypatch.setenv("LAKEBUS_BUS_SUFFIX", "grow1")
    seen = {}

    @dg.op
    def read_layout(layout: BusLayoutResource) -> None:
        seen["layout"] = layout.layout()

    @dg.job
    def grow() -> None:
        read_layout()

    result = grow.execute_in_process(resources={"layout": build_resources()["layout"]},
                                     run_config={"resources": {"layout": {"config": {"bus_partitions": 2}}}})
    assert result.success
    layout = seen["layout"]
    assert layout.bus_topic.partitions == 2
    assert {t.replication_factor for t in (layout.bus_topic, layout.dlq_topic, layout.control_topic)} == {3}
    assert layout.bus_topic.configs["min.insync.replicas"] == "2"
    assert layout.bus_topic.name == "events-grow1"


def test_growing_the_bus_is_an_edit_of_the_config_file(monkeypatch, tmp_path):
    """Issue 21: ``LAKEBUS_BUS_PARTITIONS`` in the deployment's file grows the bus the next time the
    layout is read (no code, no run config), keeps the file's replication, and the environment wins."""
    from lakebus_dagster.defs.resources import BusLayoutResource

    config = tmp_path / "lakebus.yaml"
    config.write_text("settings:\n  LAKEBUS_TOPIC_REPLICATION_FACTOR: 3\n")
    monkeypatch.setenv("LAKEBUS_CONFIG", str(config))
    for name in ("LAKEBUS_BUS_PARTITIONS", "LAKEBUS_SINK_TASKS_MAX", "LAKEBUS_TOPIC_REPLICATION_FACTOR"):
        monkeypatch.delenv(name, raising=False)
    resource = BusLayoutResource()
    before = resource.layout()
    assert (before.bus_topic.partitions, before.tasks_max, before.bus_topic.replication_factor) == (1, 1, 3)

    config.write_text("settings:\n  LAKEBUS_TOPIC_REPLICATION_FACTOR: 3\n  LAKEBUS_BUS_PARTITIONS: 4\n  LAKEBUS_SINK_TASKS_MAX: 2\n")
    grown = resource.layout()
    assert (grown.bus_topic.partitions, grown.tasks_max) == (4, 2)
    assert {t.replication_factor for t in (grown.bus_topic, grown.dlq_topic, grown.control_topic)} == {3}

    monkeypatch.setenv("LAKEBUS_BUS_PARTITIONS", "6")
    assert resource.layout().bus_topic.partitions == 6
    assert BusLayoutResource(bus_partitions=8).layout().bus_topic.partitions == 8  # the run's own config wins


def test_the_control_clients_session_is_shipped_at_10_s_and_none_leaves_it_to_kafka():
    """Issue 29: the sink's control-topic clients get a 10 s session (a dead coordinator leaves the
    coordinators' group in 10 s, not Kafka's 45 s: BENCHMARKS.md) and a heartbeat a third of it;
    ``control_session_timeout_ms=None`` leaves both to Kafka."""
    cfg = sink_connector_config(BusLayout.default(), _Lake())
    assert (cfg["iceberg.kafka.session.timeout.ms"], cfg["iceberg.kafka.heartbeat.interval.ms"]) == ("10000", "3333")
    left = replace(BusLayout.default(), tuning=SinkTuning(control_session_timeout_ms=None))
    assert not [k for k in sink_connector_config(left, _Lake()) if k.startswith("iceberg.kafka.")]


def test_lakebus_tasks_release_their_coordinator_and_only_lakebus_class_is_told():
    """Issue 29: the shipped sink runs lakebus's task, which stops a coordinator when it closes the
    partition it was elected by; switched off it runs Apache's task. Apache's connector class is not
    given the key (it would only log it as unused)."""
    from lakebus_dagster.bus.layout import ICEBERG_SINK_CLASS, RELEASE_COORDINATOR_PROP, UPSTREAM_ICEBERG_SINK_CLASS

    shipped = BusLayout.default()
    assert shipped.connector_class == ICEBERG_SINK_CLASS
    assert sink_connector_config(shipped, _Lake())[RELEASE_COORDINATOR_PROP] == "true"
    off = replace(shipped, tuning=SinkTuning(release_coordinator_on_close=False))
    assert sink_connector_config(off, _Lake())[RELEASE_COORDINATOR_PROP] == "false"
    upstream = replace(shipped, connector_class=UPSTREAM_ICEBERG_SINK_CLASS)
    assert RELEASE_COORDINATOR_PROP not in sink_connector_config(upstream, _Lake())
    # the key is the Java connector's own constant
    java = (REPO_ROOT / "infra/maven/connect-sink-lakebus/src/main/java/io/lakebus/connect/sink/StableIcebergSinkConnector.java")
    assert f'RELEASE_COORDINATOR_PROP = "{RELEASE_COORDINATOR_PROP}"' in java.read_text()


@pytest.mark.parametrize(("constant", "field"), [
    # the coordinators' group anchored on the control topic before the first cycle (a coordinator
    # elected after a young connector's coordinator died reads the answers in flight)
    ("ANCHOR_CONTROL_OFFSETS_PROP", "anchor_control_offsets"),
    # each task fences its worker transactional id when it starts (a successor does not wait out a
    # killed task's open answer for its offsets)
    ("FENCE_WORKER_TRANSACTION_PROP", "fence_worker_transaction"),
])
def test_lakebus_connector_remedies_ship_on_unless_switched_off(constant: str, field: str):
    """Shipped on; switched off, the connector is told ``false``; Apache's class is not given the
    key. The key is the Java connector's own constant."""
    from lakebus_dagster.bus import layout as layout_module

    key = getattr(layout_module, constant)
    shipped = BusLayout.default()
    assert sink_connector_config(shipped, _Lake())[key] == "true"
    off = replace(shipped, tuning=SinkTuning(**{field: False}))
    assert sink_connector_config(off, _Lake())[key] == "false"
    upstream = replace(shipped, connector_class=layout_module.UPSTREAM_ICEBERG_SINK_CLASS)
    assert key not in sink_connector_config(upstream, _Lake())
    java = (REPO_ROOT / "infra/maven/connect-sink-lakebus/src/main/java/io/lakebus/connect/sink/StableIcebergSinkConnector.java")
    assert f'{constant} = "{key}"' in java.read_text()
