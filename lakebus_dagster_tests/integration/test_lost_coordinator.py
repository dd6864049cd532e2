"""A sink that lost its commit coordinator, produced on purpose, caught and healed by the status sensor.

The Iceberg sink 1.11 elects its coordinator in ``CommitterImpl.open(addedPartitions)``: it describes
the connector's consumer group (``connect-<connector>``), takes the smallest topic-partition
assigned to *any member* of that group, and starts a coordinator only if that partition is among
the partitions just *added* to this task. ``close()`` stops a coordinator only when the smallest
partition is among the partitions revoked. Nothing else ever starts one. So a task consumes with no
coordinator whenever, at its ``open()``, the group's smallest partition is not its own — upstream
that happens in rebalance races (apache/iceberg#12372, #14395, #15955, #16016, #17637; 1 in 5 runs
of our failover test) — and it stays so until a rebalance *adds* the smallest partition to a task.

The deterministic recipe used here (no race, no kill):

1. the test's connector uses the cooperative-sticky assignor
   (``consumer.override.partition.assignment.strategy``): a member joining or leaving then moves
   no partition that is not its own, so the sink's tasks get no ``open()`` with their partitions;
2. the connector is stopped (``PUT /stop``: every task closes with an empty set, its coordinator
   stops);
3. a *decoy* consumer joins ``connect-<connector>`` subscribed to a one-partition topic whose name
   sorts before the bus topic (``0-…``): it owns the group's smallest partition;
4. the connector is resumed: each task's ``open()`` sees the decoy's partition as the smallest, so
   no task starts a coordinator;
5. the decoy leaves: with cooperative rebalancing the tasks keep their partitions and get no
   ``open()`` with them, so nobody re-runs the election.

What is left is the upstream state exactly, not a stand-in: tasks RUNNING and consuming, no
coordinator, nothing new on the control topic (past the coordinator's committed offset only what the
last finished cycle left: the worker transaction's marker, CommitToTable, CommitComplete and their
markers — 5 offsets, no cycle under way; measured), the decoy gone — and only a restart (every task
rejoins, the task owning the smallest bus partition is elected) brings commits back. The shipped
layout's eager assignor does not change what the sensor sees; it only makes step 5 heal by itself,
which is why the test switches to cooperative-sticky.

Then, with the shipped 10 s commit interval: records produced in that state must raise exactly one
incident within 3 commit intervals (the status sensor evaluated through Dagster's tick machinery),
the sensor's restart request (run here in-process, as the daemon would launch it) must bring rows
within 5 intervals of the stop, with 0 lost and 0 duplicated, and one recovery notice follows —
with the offset ledger requested at that recovery (issue 29.4: records the stall lost upstream come
back in minutes). A twin sensor ticks beside it on the same sink with that remedy switched off
(``ledger_after_stall``, and ``ledger_after_move`` so no other rule stands in): it sees the same
incident and recovery and requests no ledger.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
import pytest

from lakebus_dagster.bus.layout import BusLayout, TopicSpec
from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.alerts import AlertResource
from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import BusLayoutResource, KafkaResource
from lakebus_dagster.events import EnvelopeEncoder
from lakebus_dagster.kafka import end_offsets
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.monitor.incidents import IncidentBook
from lakebus_dagster_tests.lake_counts import committed_rows

from .helpers import create_topics, wait_for
from .test_monitoring_flow import bet, sensor_tick

# the lake stage's stack (a default-profile stack beside the default one): it balances make test's two lanes
pytestmark = [pytest.mark.integration, pytest.mark.lake]

COOPERATIVE = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
BASELINE = 20
OWED = 50
TICK_SLACK_S = 5.0  # how much later the twin may see what the shipped sensor saw (its tick follows)


@pytest.fixture
def bus(stack, run_id, webhook):
    """An isolated bus provisioned as shipped (10 s commit interval), its connector switched to the
    cooperative-sticky assignor; the connector and the decoy topic are always removed."""
    url, received = webhook
    resources = {
        **build_resources(),
        "layout": BusLayoutResource(name_suffix=run_id),
        "alerts": AlertResource(sink="webhook", webhook_url=url, body_format="slack"),
        # shipped policy (auto-restart on, first restart at once), except a short recovery window
        "monitoring_policy": MonitoringPolicyResource(recovery_stable_s=10.0),
    }
    layout = resources["layout"].layout()
    decoy = TopicSpec(f"0-lakebus-decoy-{run_id}", partitions=1)
    assert decoy.name < layout.bus_topic.name, "the decoy's partition must be the group's smallest"
    assert defs.resolve_job_def("provision_lakebus").execute_in_process(resources=resources).success
    create_topics(stack.kafka.bootstrap_servers, [decoy])
    client = ConnectClient(stack.connect.urls[0])
    try:
        config = {**client.get_config(layout.connector_name),
                  "consumer.override.partition.assignment.strategy": COOPERATIVE}
        client.put_config(layout.connector_name, config)
        client.wait_for_state(layout.connector_name, {"RUNNING"}, timeout=60, fail_states={"FAILED"})
        yield resources, layout, client, received, decoy.name
    finally:
        if client.exists(layout.connector_name):
            client.delete(layout.connector_name)
        client.close()
        admin = resources["kafka"].admin()
        for future in admin.delete_topics([decoy.name]).values():
            future.result(timeout=30)


def sink_group(layout: BusLayout) -> str:
    """Connect's consumer group of the sink's tasks — the group the 1.11 sink elects its leader in."""
    return f"connect-{layout.connector_name}"


def group_members(kafka: KafkaResource, group: str) -> dict[str, list[str]]:
    """member client id -> the topic-partitions it owns, as the sink's own election reads them."""
    admin = kafka.admin()
    described = admin.describe_consumer_groups([group])[group].result(timeout=10)
    return {m.client_id + "/" + m.member_id[-6:]: sorted(f"{tp.topic}-{tp.partition}" for tp in m.assignment.topic_partitions)
            for m in described.members}


@contextmanager
def decoy_member(kafka: KafkaResource, group: str, topic: str) -> Iterator[threading.Event]:
    """A consumer in the sink's group that owns ``topic``'s partition 0 while the block runs; polls
    in a thread (a member that stops polling is evicted), leaves the group on exit. It commits
    nothing and the topic is empty: it never touches a bus record."""
    consumer = kafka.consumer(group, **{"partition.assignment.strategy": "cooperative-sticky", "client.id": "lakebus-decoy"})
    consumer.subscribe([topic])
    stop, owns = threading.Event(), threading.Event()
    problems: list[str] = []

    def poll() -> None:
        while not stop.is_set():
            msg = consumer.poll(0.2)
            if msg is not None and msg.error():
                problems.append(str(msg.error()))
            if any(tp.topic == topic for tp in consumer.assignment()):
                owns.set()

    thread = threading.Thread(target=poll, name="lakebus-decoy", daemon=True)
    thread.start()
    try:
        yield owns
    finally:
        stop.set()
        thread.join(timeout=10)
        consumer.close()  # LeaveGroup: the decoy is gone at once, not after its session timeout
    assert not problems, f"the decoy consumer saw errors: {problems}"


def control_end(kafka: KafkaResource, layout: BusLayout) -> int:
    consumer = kafka.consumer("lakebus-lost-coordinator-test")
    try:
        return sum(end_offsets(consumer, layout.control_topic.name).values())
    finally:
        consumer.close()


def assert_control_topic_silent(kafka: KafkaResource, layout: BusLayout, seconds: float) -> None:
    """No coordinator: nobody sends a StartCommit, so the control topic's end offset does not move.
    An observation window (absence cannot be polled for); it fails the moment anything moves."""
    start, deadline = control_end(kafka, layout), time.monotonic() + seconds
    while time.monotonic() < deadline:
        now = control_end(kafka, layout)
        assert now == start, (f"the control topic moved ({start} -> {now}): the sink elected a coordinator, the "
                              "recipe did not produce the lost-coordinator state")
        time.sleep(1)


def produce(kafka: KafkaResource, topic: str, first: int, n: int) -> None:
    producer = kafka.producer()
    for i in range(first, first + n):
        producer.produce(topic, key=f"u{i}".encode(), value=EnvelopeEncoder().encode(bet(i)))
    assert producer.flush(30) == 0, "records not acknowledged"


def test_a_lost_coordinator_is_one_incident_within_3_intervals_and_a_restart_brings_rows_within_5(bus, stack):
    resources, layout, client, received, decoy_topic = bus
    kafka: KafkaResource = resources["kafka"]
    interval = layout.tuning.commit_interval_ms / 1000
    table = layout.routes["bet"]
    catalog = load_catalog(stack)

    # the baseline lands: the table exists and its snapshot carries the sink's watermark
    produce(kafka, layout.bus_topic.name, 0, BASELINE)
    wait_for(lambda: committed_rows(catalog, table) >= BASELINE, f"{BASELINE} baseline rows in {table}")

    # stop → decoy owns the group's smallest partition → resume: no task is elected
    client.stop(layout.connector_name)
    client.wait_for_state(layout.connector_name, {"STOPPED"}, timeout=60, require_tasks=False)
    group = sink_group(layout)
    with decoy_member(kafka, group, decoy_topic) as owns:
        wait_for(owns.is_set, f"the decoy owning {decoy_topic}-0 in {group}", timeout=60, interval=0.5)
        client.resume(layout.connector_name)
        client.wait_for_state(layout.connector_name, {"RUNNING"}, timeout=60, fail_states={"FAILED"})
        wait_for(lambda: (m := group_members(kafka, group)) and any(layout.bus_topic.name in str(p) for p in m.values())
                 and any(decoy_topic in str(p) for p in m.values()) and m,
                 f"{group}: the sink's task and the decoy both assigned", timeout=60, interval=0.5)
    # the decoy left; the tasks kept their partitions (cooperative) and re-ran no election
    wait_for(lambda: (m := group_members(kafka, group)) and not any(decoy_topic in str(p) for p in m.values()) and m,
             f"{group} without the decoy", timeout=60, interval=0.5)
    assert_control_topic_silent(kafka, layout, 1.5 * interval)
    assert client.status(layout.connector_name).state == "RUNNING"

    instance = dg.DagsterInstance.ephemeral()
    # the remedy switched off: its alerts to the log (the webhook counts the shipped sensor's), its
    # requests only recorded (the shipped sensor's restart heals the sink for both)
    twin = {**resources, "alerts": AlertResource(sink="log"),
            "monitoring_policy": MonitoringPolicyResource(recovery_stable_s=10.0, ledger_after_stall=False,
                                                          ledger_after_move=False)}
    twin_state: dict = {"cursor": None, "requests": []}
    shipped_requests: list[dg.RunRequest] = []

    def tick(cursor):
        result, cursor = sensor_tick("connector_status_sensor", resources, cursor, instance)
        shipped_requests.extend(result.run_requests or [])
        twin_result, twin_state["cursor"] = sensor_tick("connector_status_sensor", twin, twin_state["cursor"], instance)
        twin_state["requests"].extend(twin_result.run_requests or [])
        return result, cursor

    result, cursor = tick(None)
    assert not result.run_requests and received == [], "an incident before any work was owed"

    # the stop: work owed that no coordinator will ever commit
    produce(kafka, layout.bus_topic.name, BASELINE, OWED)
    stopped_at = time.monotonic()
    restart = None
    while restart is None and time.monotonic() < stopped_at + 3 * interval:
        result, cursor = tick(cursor)
        restart = next((r for r in result.run_requests if r.job_name == "restart_connector"), None)
        if restart is None:
            time.sleep(1)
    detected_after = time.monotonic() - stopped_at
    # the twin ticks a moment after the shipped sensor, so under load its windows can close one tick
    # later: it ticks alone (the sink untouched) until it asks for its restart too, within the same bound
    # plus one tick's slack
    twin_deadline = stopped_at + 3 * interval + TICK_SLACK_S
    while (not any(r.job_name == "restart_connector" for r in twin_state["requests"])
           and time.monotonic() < twin_deadline):
        twin_result, twin_state["cursor"] = sensor_tick("connector_status_sensor", twin, twin_state["cursor"], instance)
        twin_state["requests"].extend(twin_result.run_requests or [])
        time.sleep(0.5)
    incidents = [a for a in received if "committed nothing to Iceberg" in a["text"] and "resolved" not in a["text"]]
    assert restart is not None and len(incidents) == 1, (
        f"no restart / not exactly one stall incident within 3 commit intervals ({3 * interval:.0f}s): {received}")
    assert "no commit cycle under way on" in incidents[0]["text"], incidents[0]
    assert restart.run_config["ops"]["restart_connector_op"]["config"]["only_failed"] is False

    # nothing healed by itself: no row of the stop landed in the 2+ intervals before the restart
    assert committed_rows(catalog, table) == BASELINE, "rows landed without a restart: the coordinator was not lost"

    # what the daemon does with the request: a restart_connector run with its config and tags
    run = defs.resolve_job_def(restart.job_name).execute_in_process(
        run_config=restart.run_config, resources=resources, instance=instance, tags=restart.tags)
    assert run.success
    total = BASELINE + OWED
    wait_for(lambda: committed_rows(catalog, table) >= total, f"{total} rows in {table} after the restart",
             timeout=max(1.0, stopped_at + 5 * interval - time.monotonic()), interval=0.5)
    healed_after = time.monotonic() - stopped_at

    rows = catalog.load_table(table).scan().to_arrow()
    order_ids = Counter(rows.column("order_id").to_pylist())
    assert sorted(order_ids) == sorted(f"o{i}" for i in range(total)), "records lost"
    assert max(order_ids.values()) == 1, f"records duplicated: {[k for k, n in order_ids.items() if n > 1]}"

    # one recovery notice once commits flow again, and no second incident on the way
    def recovered() -> bool:
        nonlocal cursor
        _, cursor = tick(cursor)
        return (any(a["text"].startswith("[lakebus] resolved:") for a in received)
                and not IncidentBook.from_cursor(twin_state["cursor"]).open)  # the twin's incident closed too

    wait_for(recovered, "the stall's recovery notice (both sensors)", timeout=120, interval=2)
    kinds = [("recovery" if a["text"].startswith("[lakebus] resolved:") else "incident") for a in received]
    assert kinds == ["incident", "recovery"], json.dumps(received, indent=1)
    # the remedy: the ledger at the recovery, with the stall's grace; switched off: none
    ledgers = [r for r in shipped_requests if r.job_name == "offset_ledger_job"]
    assert len(ledgers) == 1 and ledgers[0].tags.get("lakebus/after_stall"), [r.job_name for r in shipped_requests]
    assert any(r.job_name == "restart_connector" for r in twin_state["requests"]), (
        f"the twin did not see the stall within 3 commit intervals + {TICK_SLACK_S:.0f}s")
    assert not [r for r in twin_state["requests"] if r.job_name == "offset_ledger_job"], "the remedy switched off still ran the ledger"
    print(f"lost coordinator: incident after {detected_after:.1f}s, rows after {healed_after:.1f}s "
          f"(commit interval {interval:.0f}s)")
