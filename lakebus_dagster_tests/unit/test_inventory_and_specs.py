"""Pure parts of issue 11: schema inference and its hash, the field diff, the sensor's change logic,
source-offset checks, connector-spec ownership and what prune may delete."""

from __future__ import annotations

import json

import pytest

from lakebus_dagster.bus.connector_specs import BUS_KEY, FILE_SOURCE_CLASS, OWNER_KEY, ConnectorSpec, file_demo, owned_by
from lakebus_dagster.bus.layout import BusLayout, LayoutError
from lakebus_dagster.connect.models import ConnectorInfo, ConnectorOverview
from lakebus_dagster.connect.source_offsets import OffsetFormatError, validate_source_offsets
from lakebus_dagster.defs.inventory.sensors import inventory_changes
from lakebus_dagster.inventory.schema import DECLARED, EMPTY, INFERRED, NOT_JSON, diff_shapes, infer_schema
from lakebus_dagster.provision.specs import prunable


def test_inferred_schema_types_nullability_share_and_a_hash_independent_of_order_and_shares():
    records = [{"a": 1, "b": "x", "n": {"k": True}}, {"a": 2, "b": None, "l": [1, 2.5]}]
    schema = infer_schema(json.dumps(r).encode() for r in records)
    assert schema.source == INFERRED
    assert schema.shape == {"a": "integer", "b": "string", "l": "array", "l[]": "integer|number", "n": "object", "n.k": "boolean"}
    rows = {r["field"]: r for r in schema.rows()}
    assert rows["b"]["nullable"] == "yes" and rows["b"]["share of records"] == "100%"
    assert rows["n.k"]["nullable"] == "yes" and rows["n.k"]["share of records"] == "50%"
    assert rows["a"]["nullable"] == "no"
    reordered = infer_schema(json.dumps(r).encode() for r in reversed(records + records))
    assert reordered.hash == schema.hash  # shares and order do not move the hash
    assert infer_schema([json.dumps({"a": "1"}).encode()]).hash != infer_schema([json.dumps({"a": 1}).encode()]).hash


def test_envelopes_give_the_declared_schema_text_is_not_json_and_nothing_is_empty():
    env = {"schema": {"type": "struct", "name": "bet", "version": 1, "fields": [
        {"field": "id", "type": "int64", "optional": False}, {"field": "amount", "type": "double", "optional": True}]},
        "payload": {"id": 1, "amount": None}}
    declared = infer_schema([json.dumps(env).encode()])
    assert declared.source == DECLARED and declared.shape == {"amount": "double?", "id": "int64"}
    assert declared.schema_names == ("bet v1",)
    assert infer_schema([b"hello", b"\xff"]).source == NOT_JSON
    assert infer_schema([]).source == EMPTY


def test_field_diff_lists_added_removed_and_changed():
    diff = diff_shapes({"a": "integer", "b": "string"}, {"a": "string", "c": "boolean"})
    assert diff.lines() == ["+ c: boolean", "- b: string", "~ a: integer → string"]


def test_sensor_changes_alert_once_and_ignore_empty_samples():
    known = {"t1": {"source": INFERRED, "hash": "h1", "shape": {"a": "integer"}}, "gone": {"source": INFERRED, "hash": "g", "shape": {}}}
    seen = {"t1": {"source": INFERRED, "hash": "h2", "shape": {"a": "string"}}, "new": {"source": EMPTY, "hash": "e", "shape": {}}}
    alerts, after = inventory_changes(known, seen)
    assert [a["title"].split(" (")[0] for a in alerts] == ["topic new appeared", "topic gone disappeared", "schema of topic t1 changed"]
    assert alerts[2]["text"].splitlines()[0] == "~ a: integer → string"
    assert inventory_changes(after, seen) == ([], after)  # the next tick with the same view: nothing
    emptied = {**seen, "t1": {"source": EMPTY, "hash": "e", "shape": {}}}
    assert inventory_changes(after, emptied)[0] == []  # retention emptied it: not a schema change
    first_data = {**seen, "new": {"source": INFERRED, "hash": "x", "shape": {"a": "integer"}}}
    assert inventory_changes(after, first_data)[0] == []  # a new topic's first records are not a change


def test_topics_lakebus_creates_are_known_not_news():
    """Issue 21: the first start sent 'topic … appeared' for every topic provisioning created.
    Declared topics are recorded silently when they appear; a stranger's topic still alerts, and a
    declared topic that disappears alerts too."""
    from lakebus_dagster.bus.desired import topic_specs
    from lakebus_dagster.bus.layout import BusLayout
    from lakebus_dagster.inventory.own_topics import own_topics

    own = own_topics(BusLayout.default())
    assert {t.name for t in topic_specs(BusLayout.default())} <= own.expected
    assert {"events", "dlq-events", "iceberg-control-events"} <= own.expected
    shape = {"source": INFERRED, "hash": "h", "shape": {"a": "integer"}}
    seen = {**{name: shape for name in own.expected}, "stranger": shape}
    alerts, after = inventory_changes({}, seen, own)
    assert [a["title"] for a in alerts] == ["topic stranger appeared"]
    assert set(after) == set(seen)
    gone = {k: v for k, v in seen.items() if k != "dlq-events"}
    assert [a["title"] for a in inventory_changes(after, gone, own)[0]] == ["topic dlq-events disappeared"]


CFG = {"file": "/data/in.txt"}


@pytest.mark.parametrize(("offsets", "says"), [
    ([], "no offsets given"),
    ([{"partition": {"filename": "/data/in.txt"}}], "exactly the keys"),
    ([{"partition": {"filename": "/other"}, "offset": {"position": 1}}], "the connector's file"),
    ([{"partition": {"filename": "/data/in.txt"}, "offset": {"position": "1"}}], "integer >= 0"),
    ([{"partition": {"filename": "/data/in.txt"}, "offset": {"position": True}}], "integer >= 0"),
    ([{"partition": {"filename": "/data/in.txt"}, "offset": {"position": 1, "x": 2}}], "integer >= 0"),
    (["position=1"], "exactly the keys"),
])
def test_malformed_file_source_offsets_are_refused_naming_the_connector(offsets, says):
    with pytest.raises(OffsetFormatError, match=says) as err:
        validate_source_offsets("src", FILE_SOURCE_CLASS, CFG, offsets, [])
    assert "'src'" in str(err.value)


def test_good_offsets_pass_and_unknown_classes_are_checked_against_their_stored_format():
    good = [{"partition": {"filename": "/data/in.txt"}, "offset": {"position": 0}}]
    assert validate_source_offsets("src", FILE_SOURCE_CLASS, CFG, good, []) == good
    stored = [{"partition": {"table": "t"}, "offset": {"ts": 1700000000000}}]
    ok = [{"partition": {"table": "t"}, "offset": {"ts": 1600000000000}}]
    assert validate_source_offsets("jdbc", "io.confluent.JdbcSource", {}, ok, stored) == ok
    with pytest.raises(OffsetFormatError, match="keys/types"):
        validate_source_offsets("jdbc", "io.confluent.JdbcSource", {}, [{"partition": {"table": "t"}, "offset": {"ts": "2024"}}], stored)


def test_specs_carry_ownership_markers_per_bus_and_prune_only_touches_owned_undeclared_connectors():
    layout = BusLayout.default(routes={"bet": "demo.dwd_biz_bet"})
    other = layout.with_suffix("ffffffff")
    source, sink = file_demo(layout, "/tmp/fd").specs()
    cfg = source.desired_config(layout)
    assert cfg[OWNER_KEY] == "lakebus" and cfg[BUS_KEY] == "events" and owned_by(cfg, layout) and not owned_by(cfg, other)
    live = {
        "file-demo-source": ConnectorOverview(info=ConnectorInfo("file-demo-source", cfg)),
        "old-owned": ConnectorOverview(info=ConnectorInfo("old-owned", {**cfg})),
        "other-bus": ConnectorOverview(info=ConnectorInfo("other-bus", source.desired_config(other))),
        "foreign": ConnectorOverview(info=ConnectorInfo("foreign", {"connector.class": "x"})),
    }
    assert prunable(live, layout, [source.name, sink.name]) == ["old-owned"]
    with pytest.raises(LayoutError, match="lakebus sets them"):
        ConnectorSpec("x", FILE_SOURCE_CLASS, {OWNER_KEY: "me"})
    with pytest.raises(LayoutError, match="not a target state"):
        ConnectorSpec("x", FILE_SOURCE_CLASS, {}, target_state="sleeping")
    assert file_demo(other, "/tmp/fd").source_name == "file-demo-source-ffffffff"
