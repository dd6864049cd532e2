"""The bus inventory and the lake's lineage as DataHub metadata, built with DataHub's own classes
(acryl-datahub), written through its file sink and read back with its file source: what DataHub's
``datahub ingest`` of that file would load. No DataHub server runs here; the REST emitter is the
library's own."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.defs.inventory.datahub import DataHubResource, publish_to_datahub
from lakebus_dagster.defs.inventory.resources import TopicInventoryResource
from lakebus_dagster.defs.resources import BusLayoutResource, KafkaResource
from lakebus_dagster.events import EnvelopeEncoder
from lakebus_dagster.events.samples import GeneratorConfig, generate_events
from lakebus_dagster.inventory.datahub import dataset_urn, lineage_proposals, topic_proposals
from lakebus_dagster.inventory.schema import infer_schema
from lakebus_dagster.inventory.topics import TopicInventory
from lakebus_dagster.lake.dws import DWS_TABLES, LakehouseTables

LAYOUT = BusLayout.default()


def _bus_inventory() -> dict[str, TopicInventory]:
    events = list(generate_events(GeneratorConfig(count=40)))
    values = [EnvelopeEncoder().encode(e) for e in events]
    dlq = [json.dumps({"oops": 1}).encode()]
    return {LAYOUT.bus_topic.name: TopicInventory(LAYOUT.bus_topic.name, 2, 1, {"retention.ms": "604800000"}, {0: 0},
                                                  {0: len(values)}, schema=infer_schema(values)),
            LAYOUT.dlq_topic.name: TopicInventory(LAYOUT.dlq_topic.name, 1, 1, {}, {0: 0}, {0: 1}, schema=infer_schema(dlq))}


def _round_trip(tmp_path, proposals) -> list:
    from datahub.ingestion.sink.file import write_metadata_file
    from datahub.ingestion.source.file import read_metadata_file

    path = tmp_path / "datahub.json"
    write_metadata_file(path, proposals)
    return list(read_metadata_file(path))


def test_each_topic_has_its_properties_and_a_schema_per_event_type(tmp_path):
    from datahub.metadata.schema_classes import DatasetPropertiesClass, NumberTypeClass, SchemaMetadataClass, StringTypeClass

    read = _round_trip(tmp_path, topic_proposals(_bus_inventory()))
    assert all(p.validate() for p in read)
    bus = dataset_urn("kafka", LAYOUT.bus_topic.name)
    aspects = {(p.entityUrn, type(p.aspect).__name__): p.aspect for p in read}
    properties: DatasetPropertiesClass = aspects[(bus, "DatasetPropertiesClass")]
    assert properties.customProperties["event_types"] == "bet, recharge"
    assert properties.customProperties["retention.ms"] == "604800000"
    schema: SchemaMetadataClass = aspects[(bus, "SchemaMetadataClass")]
    fields = {f.fieldPath: f for f in schema.fields}
    assert isinstance(fields["bet.amount"].type.type, NumberTypeClass) and fields["bet.amount"].nativeDataType == "double?"
    assert isinstance(fields["recharge.status"].type.type, StringTypeClass)
    assert "bet.game_id" in fields and "recharge.game_id" not in fields
    dlq = aspects[(dataset_urn("kafka", LAYOUT.dlq_topic.name), "SchemaMetadataClass")]
    assert [f.fieldPath for f in dlq.fields] == ["oops"]  # one inferred schema, no event types


def test_the_lineage_runs_from_the_bus_topic_through_each_ods_table_to_its_dws_tables(tmp_path):
    tables = LakehouseTables.from_routes(LAYOUT.routes, DWS_TABLES)
    dws = {tables.dws(s): [tables.ods_table(e) for e in s.sources] for s in DWS_TABLES}
    read = _round_trip(tmp_path, lineage_proposals(LAYOUT.bus_topic.name, LAYOUT.tables, dws))
    upstream = {p.entityUrn: sorted(u.dataset for u in p.aspect.upstreams) for p in read}
    topic = dataset_urn("kafka", LAYOUT.bus_topic.name)
    assert upstream[dataset_urn("iceberg", "demo.dwd_biz_bet")] == [topic]
    assert upstream[dataset_urn("iceberg", "demo_dws.dws_user_day")] == sorted(
        dataset_urn("iceberg", t) for t in ("demo.dwd_biz_bet", "demo.dwd_biz_recharge"))
    assert upstream[dataset_urn("iceberg", "demo_dws.dws_biz_bet_hour")] == [dataset_urn("iceberg", "demo.dwd_biz_bet")]


def test_publishing_is_off_unless_configured():
    result = publish_to_datahub.execute_in_process(resources={
        "kafka": KafkaResource(bootstrap_servers="127.0.0.1:1"), "topic_inventory": TopicInventoryResource(),
        "layout": BusLayoutResource(), "datahub": DataHubResource()}, raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert "DataHub is off: set LAKEBUS_DATAHUB_URL" in failure.event_specific_data.error.message


def test_the_token_is_an_env_var_and_only_with_a_url(clean_env):
    from lakebus_dagster.defs.inventory.datahub import datahub_resource

    assert datahub_resource().gms_url is None
    clean_env.setenv("LAKEBUS_DATAHUB_URL", "https://datahub.example:8080")
    clean_env.setenv("LAKEBUS_DATAHUB_TOKEN", "s3cr3t")
    resource = datahub_resource()
    assert resource.gms_url == "https://datahub.example:8080"
    assert isinstance(resource.token, dg.EnvVar) and resource.token.env_var_name == "LAKEBUS_DATAHUB_TOKEN"
    clean_env.setenv("LAKEBUS_DATAHUB_URL", "not a url")
    with pytest.raises(ValueError, match="LAKEBUS_DATAHUB_URL"):
        datahub_resource()


def test_money_and_time_are_named_by_their_logical_types_up_to_datahub():
    """Version 2's amount_decimal and event_time: the inventory names Connect's Decimal and Timestamp
    (not their physical bytes / int64), and DataHub gets a number and a time."""
    from datahub.metadata.schema_classes import NumberTypeClass, TimeTypeClass

    from lakebus_dagster.events import EnvelopeEncoder, GeneratorConfig, generate_events
    from lakebus_dagster.inventory.datahub import _field_type
    from lakebus_dagster.inventory.schema import infer_schema

    encoder = EnvelopeEncoder()
    schema = infer_schema([encoder.encode(e) for e in generate_events(GeneratorConfig(count=10, event_weights={"bet": 1.0}))])
    types = {f.path: f.type_text for f in dict(schema.events)["bet"].fields}
    assert (types["amount_decimal"], types["event_time"]) == ("decimal(18,2)?", "timestamp?")
    assert isinstance(_field_type("decimal(18,2)?").type, NumberTypeClass)
    assert isinstance(_field_type("timestamp?").type, TimeTypeClass)
