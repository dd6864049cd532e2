"""The topic inventory on the real broker: topic_inventory_sensor ticked through Dagster's own
evaluation (``evaluate_tick`` on the code location's sensor, this test's resources), the inventory
restricted to this test's suffixed topics so concurrent tests' topics do not count; alerts received
by a local webhook; the observable assets observed through ``observe_bus_inventory``."""

from __future__ import annotations

import json

import dagster as dg
import pytest
from confluent_kafka.admin import NewTopic

from lakebus_dagster.bus.connector_specs import FILE_SINK_CLASS, STRING_CONVERTER
from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.inventory.resources import TopicInventoryResource
from lakebus_dagster.defs.alerts import AlertResource
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.events import Bet, EnvelopeEncoder
from lakebus_dagster.inventory.schema import DECLARED, INFERRED
from lakebus_dagster_tests.unit.test_kafka_versions import maven_kafka_version

pytestmark = pytest.mark.integration



@pytest.fixture
def scratch(stack, run_id, webhook):
    """Resources whose inventory sees only topics carrying this test's suffix; deletes them after."""
    BusLayout.default().with_suffix(run_id)  # registers the suffix with the session cleanup as well
    url, received = webhook
    resources = {
        **build_resources(),
        "topic_inventory": TopicInventoryResource(include=run_id, sample_per_partition=20, sample_time_s=10),
        "alerts": AlertResource(sink="webhook", webhook_url=url, body_format="generic"),
    }
    admin = resources["kafka"].admin()
    made: list[str] = []

    def create(name: str) -> str:
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=30)
        made.append(name)
        return name

    yield resources, received, create, admin
    existing = admin.list_topics(timeout=15).topics
    gone = [t for t in made if t in existing]
    if gone:
        for fut in admin.delete_topics(gone, operation_timeout=30).values():
            fut.result(timeout=60)


def produce(resources: dict, topic: str, values: list[bytes]) -> None:
    producer = resources["kafka"].producer()
    for v in values:
        producer.produce(topic, value=v)
    assert producer.flush(30) == 0


def tick(resources: dict, cursor: str | None, instance):
    sensor = defs.resolve_sensor_def("topic_inventory_sensor")
    with dg.build_sensor_context(cursor=cursor, instance=instance, definitions=defs, sensor_name=sensor.name,
                                 resources=resources) as ctx:
        result = sensor.evaluate_tick(ctx)
    return result, result.cursor


def test_appear_schema_change_and_disappear_alert_once_each_with_inferred_and_declared_schemas(scratch, run_id):
    resources, received, create, admin = scratch
    instance = dg.DagsterInstance.ephemeral()
    first, cursor = tick(resources, None, instance)
    assert "baseline: 0 topic(s)" in first.skip_message and not received

    plain = create(f"inv-plain-{run_id}")
    produce(resources, plain, [json.dumps({"user": i, "name": f"u{i}", "score": None if i % 2 else 1.5, **({"note": "x"} if i % 2 else {})}).encode()
                            for i in range(10)])
    enveloped = create(f"inv-envelope-{run_id}")
    bet = Bet(category="biz", event="bet", log_date="2025-11-27", hour="10", plat_id=1, app_id=2, ts=1764237600000,
              schema_version=1, user_id=7, order_id="o1", amount=1.5, currency="BRL", game_id=1)
    produce(resources, enveloped, [EnvelopeEncoder().encode(bet)] * 3)

    appeared, cursor = tick(resources, cursor, instance)
    titles = sorted(a["title"] for a in received)
    assert titles == [f"topic {enveloped} appeared", f"topic {plain} appeared"], titles
    known = json.loads(cursor)["topics"]
    assert known[plain]["source"] == INFERRED
    assert known[plain]["shape"] == {"name": "string", "note": "string", "score": "number", "user": "integer"}
    assert known[enveloped]["source"] == DECLARED and known[enveloped]["shape"]["amount"] == "double?"
    inventory = next(e for e in appeared.asset_events if e.asset_key == dg.AssetKey(["kafka", "topic_inventory"]))
    assert f"| {plain} | 1 | 1 |" in inventory.metadata["topics"].value
    schemas = inventory.metadata["schemas"].value
    assert "| note | string | yes | 50% |" in schemas  # missing from half the records
    assert "| score | number | yes | 100% |" in schemas  # in every record, null in half
    assert "| user | integer | no | 100% |" in schemas

    quiet, cursor = tick(resources, cursor, instance)
    assert len(received) == 2 and "no change in 2 topic(s)" in quiet.skip_message

    # the producer changes shape: 'user' becomes a string, 'name' goes away, 'email' appears (whole sample replaced)
    produce(resources, plain, [json.dumps({"user": f"id-{i}", "email": "e", "note": "y", "score": 2.5}).encode() for i in range(20)])
    changed, cursor = tick(resources, cursor, instance)
    assert len(received) == 3, received
    alert = received[-1]
    assert alert["kind"] == "schema" and alert["title"].startswith(f"schema of topic {plain} changed")
    assert alert["text"].splitlines() == ["+ email: string", "- name: string", "~ user: integer → string",
                                          "runbook: docs/runbooks/schema-change.md"]
    again, cursor = tick(resources, cursor, instance)
    assert len(received) == 3, "the same schema change alerted twice"

    for fut in admin.delete_topics([plain], operation_timeout=30).values():
        fut.result(timeout=60)
    gone, cursor = tick(resources, cursor, instance)
    assert [a["title"] for a in received[3:]] == [f"topic {plain} disappeared"]


def test_observe_bus_inventory_records_both_assets(scratch, run_id):
    resources, received, create, admin = scratch
    topic = create(f"inv-observe-{run_id}")
    produce(resources, topic, [b"not json at all"] * 4)
    secret = f"hunter2-{run_id}"
    name = f"inv-secretive-sink-{run_id}"
    with resources["connect"].client() as client:
        client.create(name, {"connector.class": FILE_SINK_CLASS, "topics": topic, "file": "/dev/null",
                             "value.converter": STRING_CONVERTER, "some.password": secret}, initial_state="STOPPED")
        try:
            result = defs.resolve_job_def("observe_bus_inventory").execute_in_process(resources=resources)
        finally:
            client.delete(name)
    assert result.success
    observed = {e.asset_key.to_user_string(): e.event_specific_data.asset_observation.metadata
                for e in result.all_events if e.event_type_value == "ASSET_OBSERVATION"}
    inventory, cluster = observed["kafka/topic_inventory"], observed["connect/cluster"]
    assert inventory["topic_count"].value == 1 and f"| {topic} | 1 | 1 |" in inventory["topics"].value
    assert "| not JSON |" in inventory["topics"].value and "| 4 |" in inventory["topics"].value
    assert cluster["version"].value == maven_kafka_version()  # the stack runs infra/maven/pom.xml's Kafka
    assert "org.apache.kafka.connect.file.FileStreamSourceConnector" in cluster["plugins"].value
    configs = cluster["configs (secrets masked)"].value
    assert f"| {name} | some.password | *** |" in configs and f"| {name} | file | /dev/null |" in configs
    assert all(secret not in str(v.value) for v in cluster.values())
    assert f"| {name} | sink | {FILE_SINK_CLASS} | STOPPED |" in cluster["connectors"].value


def test_publish_to_datahub_writes_each_topic_with_its_event_schemas_and_the_lineage(scratch, run_id, tmp_path):
    """The job as shipped on the real broker, to a file in DataHub's format (no DataHub server runs
    here), read back with DataHub's own file source."""
    from datahub.ingestion.source.file import read_metadata_file

    from lakebus_dagster.defs.resources import BusLayoutResource
    from lakebus_dagster.events import Recharge
    from lakebus_dagster.inventory.datahub import dataset_urn

    resources, _, create, _ = scratch
    layout = BusLayoutResource(name_suffix=run_id)
    bus = create(layout.layout().bus_topic.name)
    bet = Bet(category="biz", event="bet", log_date="2025-11-27", hour="10", plat_id=1, app_id=2, ts=1764237600000,
              schema_version=1, user_id=7, order_id="o1", amount=1.5, currency="BRL", game_id=1)
    recharge = Recharge(category="biz", event="recharge", log_date="2025-11-27", hour="10", plat_id=1, app_id=2,
                        ts=1764237600000, schema_version=1, status="success", user_id=7, order_id="r1", amount=9.0)
    produce(resources, bus, [EnvelopeEncoder().encode(e) for e in (bet, recharge, bet)])
    out = tmp_path / "datahub.json"
    result = defs.resolve_job_def("publish_to_datahub").execute_in_process(
        resources={**resources, "layout": layout}, run_config={"ops": {"publish_catalog_op": {"config": {"to_file": str(out)}}}})
    assert result.success
    read = list(read_metadata_file(out))
    assert read and all(p.validate() for p in read)
    aspects = {(p.entityUrn, type(p.aspect).__name__): p.aspect for p in read}
    topic = dataset_urn("kafka", bus)
    assert aspects[(topic, "DatasetPropertiesClass")].customProperties["event_types"] == "bet, recharge"
    paths = {f.fieldPath for f in aspects[(topic, "SchemaMetadataClass")].fields}
    assert {"bet.amount", "bet.game_id", "recharge.status"} <= paths and "recharge.game_id" not in paths
    ods = dataset_urn("iceberg", layout.layout().routes["bet"])
    assert [u.dataset for u in aspects[(ods, "UpstreamLineageClass")].upstreams] == [topic]
