"""The Connect cluster beyond the sink, on the real stack: the FileStream file demo provisioned from
declared specs (lines in == lines out), moving the source's start position (re-read and skip, exact
lines on the topic), bulk pause/resume/stop/restart keeping every connector as declared, and bad
input (unknown connector, malformed offset, unreachable Connect) changing nothing.

Each test works on its own suffixed bus (``BusLayoutResource(name_suffix=run_id)``), so the bulk
jobs select only this test's connectors (``config.connectors`` = the suffix) on the shared worker,
and every connector a test makes is deleted at its end.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import TopicPartition

from lakebus_dagster.bus.connector_specs import FILE_SINK_CLASS, STRING_CONVERTER, file_demo
from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.defs.connector_fleet.resources import ConnectorSpecsResource
from lakebus_dagster.provision.target_state_store import read_declared
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import BusLayoutResource, ConnectResource
from lakebus_dagster.definitions import defs
from lakebus_dagster_tests.integration.helpers import wait_for

pytestmark = pytest.mark.integration

WAIT_S = 60.0


@pytest.fixture
def demo(stack, run_id, tmp_path):
    """A suffixed bus whose declared specs are the file demo in ``tmp_path``; deletes its connectors after."""
    resources = {
        **build_resources(),
        "layout": BusLayoutResource(name_suffix=run_id),
        "connector_specs": ConnectorSpecsResource(file_demo_dir=str(tmp_path / "file-demo")),
    }
    layout = resources["layout"].layout()
    fd = file_demo(layout, tmp_path / "file-demo")
    client = ConnectClient(stack.connect.urls[0])
    yield resources, layout, fd, client
    for name in client.list_connectors(expand_status=False, expand_info=False):
        if run_id in name:
            client.delete(name)
    client.close()


def run(job: str, resources: dict, op: str | None = None, *, raise_on_error: bool = True, **config):
    """``job`` with ``config``; the guarded runs (a start position, a prune) get their confirmation."""
    if job == "move_source_start_position" and "connector" in config:
        config = {"confirm": config["connector"], **config}
    if job == "provision_connector_specs" and config.get("prune"):
        config = {"confirm": resources["layout"].layout().bus_topic.name, **config}
    run_config = {"ops": {op: {"config": config}}} if op else {}
    return defs.resolve_job_def(job).execute_in_process(resources=resources, run_config=run_config, raise_on_error=raise_on_error)


def metadata(result) -> dict:
    event = next(e for e in result.all_node_events if e.is_successful_output)
    return {k: v.value for k, v in event.event_specific_data.metadata.items()}


def failure_message(result) -> str:
    assert not result.success
    return "\n".join(str(e.event_specific_data.error.message) for e in result.all_node_events if e.is_failure)


def topic_values(resources: dict, topic: str) -> list[str]:
    """Every record of the (single-partition) topic, as text, read with explicit offsets."""
    consumer = resources["kafka"].consumer("lakebus-test-reader", **{"enable.partition.eof": True})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        if high <= low:
            return []
        consumer.assign([TopicPartition(topic, 0, low)])
        out: list[str] = []
        deadline = time.monotonic() + 30
        while len(out) < high - low and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=1.0):
                if not msg.error():
                    out.append(msg.value().decode())
        return out
    finally:
        consumer.close()


def test_file_demo_lines_in_equal_lines_out_then_start_position_rereads_and_skips(demo):
    resources, layout, fd, client = demo
    lines = [f"line {i:03d} — ünïcødé ok" if i % 10 == 0 else f"line {i:03d}" for i in range(1, 41)]
    fd.input_file.parent.mkdir(parents=True)
    fd.input_file.write_text("".join(f"{line}\n" for line in lines))

    first = metadata(run("provision_connector_specs", resources, "provision_connector_specs_op", wait_timeout_s=WAIT_S))
    assert "**created**" in first["outcomes"] and fd.source_name in first["outcomes"] and fd.sink_name in first["outcomes"]
    wait_for(lambda: fd.output_file.exists() and fd.output_file.read_text().count("\n") >= len(lines),
             f"{len(lines)} lines in {fd.output_file}", timeout=90)
    assert fd.output_file.read_text().splitlines() == lines  # lines in == lines out, in order, nothing extra
    again = metadata(run("provision_connector_specs", resources, "provision_connector_specs_op", wait_timeout_s=WAIT_S))
    assert "**created**" not in again["outcomes"] and "**updated**" not in again["outcomes"], again["outcomes"]

    # start-position moves on an ASCII file (FileStreamSource counts characters: bytes only for ASCII)
    ascii_input = fd.directory / "ascii.txt"
    base = [f"row-{i}" for i in range(1, 6)]
    ascii_input.write_text("".join(f"{r}\n" for r in base))
    # the test points the source at a second file, as an operator might by hand
    client.put_config(fd.source_name, dict(client.get_config(fd.source_name), file=str(ascii_input)))
    topic = fd.topic.name
    wait_for(lambda: topic_values(resources, topic)[len(lines):] == base, "the 5 ASCII rows on the topic", timeout=60)
    wait_for(lambda: client.get_offsets(fd.source_name) and any(
        o["partition"]["filename"] == str(ascii_input) and o["offset"]["position"] == 30 for o in client.get_offsets(fd.source_name)),
        "the source's offset at the end of ascii.txt (30)", timeout=60)

    partition = {"filename": str(ascii_input)}
    # re-read from the start of row-3 (byte 12): exactly rows 3..5 again
    moved = metadata(run("move_source_start_position", resources, "move_source_start_position_op",
                         connector=fd.source_name, offsets=[{"partition": partition, "offset": {"position": 12}}],
                         wait_timeout_s=WAIT_S))
    assert {"partition": partition, "offset": {"position": 12}} in moved["offsets_after"]
    assert {"partition": partition, "offset": {"position": 30}} in moved["offsets_before"]
    assert moved["state_before"] == "RUNNING" and moved["state_after"] == "RUNNING"
    expected = base + ["row-3", "row-4", "row-5"]
    wait_for(lambda: topic_values(resources, topic)[len(lines):] == expected, f"{expected} on the topic", timeout=60)

    # skip ahead: with the source stopped, 5 more rows are appended; start at row-9: only rows 9 and 10 arrive
    client.stop(fd.source_name)
    client.wait_for_state(fd.source_name, {"STOPPED"}, timeout=WAIT_S, require_tasks=False)
    with ascii_input.open("a") as fh:
        fh.write("".join(f"row-{i}\n" for i in range(6, 11)))
    row_9_at = len("".join(f"row-{i}\n" for i in range(1, 9)))  # 48
    end = len(ascii_input.read_text())  # 61
    run("move_source_start_position", resources, "move_source_start_position_op", connector=fd.source_name,
        offsets=[{"partition": partition, "offset": {"position": row_9_at}}], wait_timeout_s=WAIT_S)
    expected += ["row-9", "row-10"]
    wait_for(lambda: topic_values(resources, topic)[len(lines):] == expected, f"{expected} on the topic", timeout=60)
    wait_for(lambda: any(o["offset"]["position"] == end for o in client.get_offsets(fd.source_name)
                         if o["partition"] == partition), f"the source at the end of ascii.txt ({end})", timeout=30)
    assert topic_values(resources, topic)[len(lines):] == expected  # rows 6-8 skipped, nothing else arrived


def test_bad_input_names_the_thing_and_changes_nothing(demo):
    resources, layout, fd, client = demo
    run("provision_connector_specs", resources, "provision_connector_specs_op", wait_timeout_s=WAIT_S)
    wait_for(lambda: client.get_offsets(fd.source_name) is not None and client.status(fd.source_name).state == "RUNNING",
             "the demo source RUNNING")
    before_offsets, before_state = client.get_offsets(fd.source_name), client.status(fd.source_name).state

    unknown = run("move_source_start_position", resources, "move_source_start_position_op", raise_on_error=False,
                  connector=f"no-such-connector-{fd.suffix}", offsets=[{"partition": {"filename": "x"}, "offset": {"position": 1}}])
    assert f"'no-such-connector-{fd.suffix}' does not exist" in failure_message(unknown)

    for bad, says in [
        ({"partition": {"filename": str(fd.input_file)}, "offset": {"position": "ten"}}, "'position': <integer >= 0>"),
        ({"partition": {"filename": "/elsewhere.txt"}, "offset": {"position": 3}}, "the connector's file"),
        ({"partition": {"filename": str(fd.input_file)}, "offset": {"position": -1}}, "'position': <integer >= 0>"),
        ({"offset": {"position": 3}}, "exactly the keys 'partition' and 'offset'"),
    ]:
        result = run("move_source_start_position", resources, "move_source_start_position_op", raise_on_error=False,
                     connector=fd.source_name, offsets=[bad])
        message = failure_message(result)
        assert fd.source_name in message and says in message and "nothing was changed" in message, message
    assert client.get_offsets(fd.source_name) == before_offsets
    assert client.status(fd.source_name).state == before_state == "RUNNING"

    dead = {**resources, "connect": ConnectResource(url="http://127.0.0.1:9", retries=0, timeout_s=2)}
    for job, op, cfg in [
        ("pause_all_connectors", "pause_all_connectors_op", {"connectors": fd.suffix}),
        ("restart_failed_connectors", "restart_failed_connectors_op", {}),
        ("provision_connector_specs", "provision_connector_specs_op", {}),
        ("move_source_start_position", "move_source_start_position_op",
         {"connector": fd.source_name, "offsets": [{"partition": {"filename": "x"}, "offset": {"position": 1}}]}),
    ]:
        message = failure_message(run(job, dead, op, raise_on_error=False, **cfg))
        assert "Kafka Connect at http://127.0.0.1:9 is unreachable" in message, (job, message)
    assert client.status(fd.source_name).state == "RUNNING"


def test_pause_all_resume_all_round_trip_leaves_every_connector_as_declared(demo, run_id):
    resources, layout, fd, client = demo
    run("provision_connector_specs", resources, "provision_connector_specs_op", wait_timeout_s=WAIT_S)
    foreign = f"foreign-file-sink-{run_id}"  # not declared by lakebus: no ownership markers
    client.create(foreign, {"connector.class": FILE_SINK_CLASS, "topics": fd.topic.name, "file": str(fd.directory / "foreign.txt"),
                            "value.converter": STRING_CONVERTER, "key.converter": STRING_CONVERTER})
    client.wait_for_state(foreign, {"RUNNING"}, timeout=WAIT_S)
    # an operator parks the demo sink on purpose: every bulk job must leave it STOPPED
    run("stop_connector", resources, "stop_connector_op", connector=fd.sink_name, wait_timeout_s=WAIT_S)

    def states() -> dict[str, str]:
        return {n: client.status(n).state for n in (fd.source_name, fd.sink_name, foreign)}

    def declared() -> dict[str, str]:
        return {n: d.state.connect_state for n, d in read_declared(resources["kafka"].clients(), layout.state_topic.name).items()}

    select = {"connectors": run_id, "wait_timeout_s": WAIT_S}
    paused = metadata(run("pause_all_connectors", resources, "pause_all_connectors_op", reason="test", **select))
    assert paused["selected"] == 3 and paused["changed"] == 2
    assert states() == {fd.source_name: "PAUSED", fd.sink_name: "STOPPED", foreign: "PAUSED"}
    assert declared() == {fd.source_name: "PAUSED", fd.sink_name: "STOPPED"}  # the foreign one is not lakebus's to declare
    assert metadata(run("pause_all_connectors", resources, "pause_all_connectors_op", **select))["outcome"] == "unchanged"

    resumed = metadata(run("resume_all_connectors", resources, "resume_all_connectors_op", **select))
    assert resumed["changed"] == 2 and "| " + fd.sink_name + " | yes | STOPPED | STOPPED | unchanged |" in resumed["connectors"]
    wait_for(lambda: states() == {fd.source_name: "RUNNING", fd.sink_name: "STOPPED", foreign: "RUNNING"}, "states as declared")
    assert declared() == {fd.source_name: "RUNNING", fd.sink_name: "STOPPED"}
    assert metadata(run("resume_all_connectors", resources, "resume_all_connectors_op", **select))["outcome"] == "unchanged"
    assert metadata(run("restart_failed_connectors", resources, "restart_failed_connectors_op",
                        connectors=run_id, wait_timeout_s=WAIT_S))["outcome"] == "unchanged"

    stopped = metadata(run("stop_all_connectors", resources, "stop_all_connectors_op", **select))
    assert stopped["changed"] == 2 and states() == {fd.source_name: "STOPPED", fd.sink_name: "STOPPED", foreign: "STOPPED"}
    run("resume_all_connectors", resources, "resume_all_connectors_op", **select)
    wait_for(lambda: states() == {fd.source_name: "RUNNING", fd.sink_name: "STOPPED", foreign: "RUNNING"}, "states as declared")

    # prune deletes only what this bus declared and no longer declares: never the foreign connector
    undeclared = {**resources, "connector_specs": ConnectorSpecsResource(file_demo=False, file_demo_dir=str(fd.directory))}
    kept = metadata(run("provision_connector_specs", undeclared, "provision_connector_specs_op"))
    assert "**drift**" in kept["outcomes"] and client.exists(fd.source_name)
    pruned = metadata(run("provision_connector_specs", undeclared, "provision_connector_specs_op", prune=True))
    assert "pruned" in pruned["outcomes"]
    assert not client.exists(fd.source_name) and not client.exists(fd.sink_name) and client.exists(foreign)
