"""Growing the bus on the cluster profile the way an operator does it (issue 21): edit the
deployment's file (``LAKEBUS_BUS_PARTITIONS`` in ``LAKEBUS_CONFIG``), run ``provision_lakebus``.

Asserted against the 3 brokers and the Connect workers: the bus topic grows from 1 to 2
partitions and the sink's ``tasks.max`` with it; every topic of the bus keeps the profile's
replication factor 3 and min ISR 2, and so does the DLQ setting in the connector config (the
Launchpad's run config once turned it into 1); a rerun changes nothing.
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from lakebus_dagster.bus.desired import topic_specs
from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster_tests.cleanup import remove_suffixed

from .helpers import TEST_COMMIT_INTERVAL_MS, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def _provision(suffix: str):
    """The shipped job as the code location builds it; the layout's unset fields come from the file."""
    resources = {**build_resources(), "layout": BusLayoutResource(name_suffix=suffix, commit_interval_ms=TEST_COMMIT_INTERVAL_MS)}
    result = defs.resolve_job_def("provision_lakebus").execute_in_process(resources=resources)
    assert result.success
    return result, resources["layout"].layout()


def _outcomes(result, op: str) -> dict[str, str]:
    return {o.name: o.action.value for o in result.output_for_node(op)}


def test_edit_the_file_then_provision_grows_the_bus_and_keeps_replication(stack, run_id, tmp_path, monkeypatch):
    assert stack.profile == "cluster", "needs LAKEBUS_PROFILE=cluster (make test's cluster stage)"
    monkeypatch.delenv("LAKEBUS_BUS_PARTITIONS", raising=False)
    monkeypatch.delenv("LAKEBUS_SINK_TASKS_MAX", raising=False)
    config = tmp_path / "lakebus.yaml"
    config.write_text("settings:\n  LAKEBUS_ALERT_SINK: log\n")
    monkeypatch.setenv("LAKEBUS_CONFIG", str(config))
    admin = AdminClient(stack.kafka.client_config())
    client = ConnectClient(stack.connect.urls[0])
    layout = BusLayoutResource(name_suffix=run_id).layout()
    try:
        first, layout = _provision(run_id)
        bus, connector = layout.bus_topic.name, layout.connector_name
        assert _outcomes(first, "ensure_topics")[bus] == "created"

        config.write_text("settings:\n  LAKEBUS_ALERT_SINK: log\n  LAKEBUS_BUS_PARTITIONS: 2\n")  # the operator's edit
        grown, layout = _provision(run_id)
        assert _outcomes(grown, "ensure_topics")[bus] == "updated"
        assert _outcomes(grown, "ensure_connector") == {connector: "updated"}

        # any broker answers the metadata request; each learns of the new partition a moment after the
        # controller (provisioning waited for it; another broker may still be behind): polled, bounded
        topics = wait_for(lambda: (t := admin.list_topics(timeout=10).topics) and len(t[bus].partitions) == 2 and t,
                          f"{bus}: 2 partitions in the brokers' metadata", 30)
        names = [t.name for t in topic_specs(layout)]
        assert {name: {len(p.replicas) for p in topics[name].partitions.values()} for name in names} == {name: {3} for name in names}
        described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name) for name in names])
        assert {r.name: f.result(timeout=10)["min.insync.replicas"].value for r, f in described.items()} == {name: "2" for name in names}
        live = client.get_config(connector)
        assert (live["tasks.max"], live["errors.deadletterqueue.topic.replication.factor"]) == ("2", "3")
        wait_for(lambda: (s := client.status(connector)) and len(s.tasks) == 2 and all(t.state == "RUNNING" for t in s.tasks),
                 f"{connector}: 2 tasks RUNNING", 90)

        again, _ = _provision(run_id)
        for op in ("ensure_topics", "ensure_connector"):
            assert set(_outcomes(again, op).values()) == {"unchanged"}, (op, _outcomes(again, op))
    finally:
        client.close()
        remove_suffixed(stack, {run_id})  # its connector, topics and namespaces
