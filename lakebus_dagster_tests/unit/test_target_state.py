"""Declared connector target states: names, record format, latest-wins fold, layout wiring (no services)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from lakebus_dagster.bus.desired import topic_specs
from lakebus_dagster.bus.layout import BusLayout, LayoutError, TopicSpec
from lakebus_dagster.bus.target_state import (
    DeclaredState,
    StateRecord,
    TargetState,
    TargetStateError,
    fold_latest,
    resolve,
)
from lakebus_dagster.provision.connector import _transition_to


@pytest.mark.parametrize("spelling", ["paused", "PAUSED", " Paused "])
def test_state_names_accept_strimzi_and_connect_spellings(spelling):
    assert TargetState.parse(spelling) is TargetState.PAUSED
    assert TargetState.PAUSED.connect_state == "PAUSED"


@pytest.mark.parametrize("bad", ["FAILED", "restarting", "", None, 3])
def test_unknown_state_names_are_refused_by_name(bad):
    with pytest.raises(TargetStateError, match="connector 'x'.*not a target state.*running, paused, stopped"):
        TargetState.parse(bad, where="connector 'x'")


def test_record_round_trips_with_who_when_why():
    record = DeclaredState.now("sink-a", "stopped", run_id="r-1", job="stop_connector", reason="offsets rewind")
    back = DeclaredState.from_json("sink-a", record.to_json(), where="t[0]@5")
    assert back == record
    data = json.loads(record.to_json())
    assert data["state"] == "stopped" and data["run_id"] == "r-1" and data["reason"] == "offsets rewind"
    assert data["recorded_at"].endswith("+00:00")


def _rec(key: str, state: str | None, offset: int, connector: str | None = None) -> StateRecord:
    value = None if state is None else json.dumps(
        {"connector": connector or key, "state": state, "recorded_at": f"2026-01-01T00:00:{offset:02d}+00:00"}
    ).encode()
    return StateRecord(key, value, f"states[0]@{offset}")


def test_fold_latest_wins_per_connector_and_tombstone_restores_default():
    records = [_rec("a", "paused", 0), _rec("b", "stopped", 1), _rec("a", "running", 2), _rec("b", None, 3), _rec("a", "stopped", 4)]
    folded = fold_latest(records)
    assert {k: v.state for k, v in folded.items()} == {"a": TargetState.STOPPED}
    assert folded["a"].recorded_at.endswith(":04+00:00")
    assert resolve(["a", "b", "c"], folded, TargetState.RUNNING) == {
        "a": TargetState.STOPPED,
        "b": TargetState.RUNNING,
        "c": TargetState.RUNNING,
    }


def test_a_malformed_record_superseded_by_a_valid_one_is_history():
    records = [StateRecord("a", b"{not json", "states[0]@0"), _rec("a", "paused", 1)]
    assert fold_latest(records)["a"].state is TargetState.PAUSED


@pytest.mark.parametrize(
    "record, message",
    [
        (StateRecord("a", b"{not json", "states[0]@7"), r"states\[0\]@7: the record for connector 'a' is not JSON"),
        (_rec("a", "sleeping", 7), r"states\[0\]@7: connector 'a': 'sleeping' is not a target state"),
        (_rec("a", "paused", 7, connector="b"), r"states\[0\]@7: record keyed 'a' names connector 'b'"),
        (StateRecord("a", b"[1]", "states[0]@7"), r"not a JSON object"),
    ],
)
def test_a_malformed_latest_record_raises_naming_topic_partition_offset(record, message):
    with pytest.raises(TargetStateError, match=message):
        fold_latest([_rec("a", "running", 1), record])


def test_layout_declares_a_compacted_state_topic_and_running_by_default():
    layout = BusLayout.default()
    assert layout.connector_state is TargetState.RUNNING
    assert layout.state_topic.name == "lakebus-connector-states"
    assert layout.state_topic.configs["cleanup.policy"] == "compact"
    assert layout.state_topic in topic_specs(layout)
    suffixed = layout.with_suffix("1a2b")
    assert suffixed.state_topic.name == "lakebus-connector-states-1a2b"
    assert suffixed.state_topic.configs == layout.state_topic.configs


def test_layout_refuses_a_bad_default_state_or_a_non_compacted_state_topic():
    layout = BusLayout.default()
    assert replace(layout, connector_state="paused").connector_state is TargetState.PAUSED
    with pytest.raises(LayoutError, match="connector_state: 'sleeping' is not a target state"):
        replace(layout, connector_state="sleeping")
    with pytest.raises(LayoutError, match="cleanup.policy=compact"):
        replace(layout, state_topic=TopicSpec("states"))
    with pytest.raises(LayoutError, match="must differ"):
        replace(layout, state_topic=TopicSpec("events", configs={"cleanup.policy": "compact"}))


def test_layout_from_mapping_reads_state_topic_and_default_state():
    base = {"bus_topic": {"name": "ev"}, "control_topic": {"name": "ctl"}, "dlq_topic": {"name": "dlq"}, "routes": {"bet": "demo.bet"}}
    assert BusLayout.from_mapping(base).state_topic.name == "lakebus-connector-states"
    custom = BusLayout.from_mapping(
        {**base, "state_topic": {"name": "st", "configs": {"cleanup.policy": "compact"}}, "connector_state": "stopped"}
    )
    assert custom.state_topic.name == "st" and custom.connector_state is TargetState.STOPPED


@pytest.mark.parametrize(
    "target, live, call",
    [
        ("RUNNING", "RUNNING", None),
        ("RUNNING", "PAUSED", "resume"),
        ("RUNNING", "STOPPED", "resume"),
        ("RUNNING", "FAILED", None),  # left to the restart machinery
        ("PAUSED", "PAUSED", None),
        ("PAUSED", "RUNNING", "pause"),
        ("PAUSED", "STOPPED", "pause"),
        ("STOPPED", "STOPPED", None),
        ("STOPPED", "RUNNING", "stop"),
        ("STOPPED", "PAUSED", "stop"),
    ],
)
def test_provisioning_acts_only_on_a_difference_and_never_resumes_a_parked_connector(target, live, call):
    assert _transition_to(target, live) == call
