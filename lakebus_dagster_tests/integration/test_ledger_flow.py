"""The offset ledger on the real stack: good events + a tombstone + a non-JSON record pass with 0
gaps and 0 duplicates; then the guarantee is broken on purpose — an ODS row deleted, the sink's
offsets moved past a record (the shape of the 1.11 sink's upstream loss: offsets passed, no row) —
and the check (run through Dagster) fails naming those offsets and sends one alert naming them.
Then the repair as deployed: ``requeue_after_loss_sensor`` (Dagster's tick evaluation, the shipped
policy) requests ``requeue_lost_records`` for the failing ledger run; the run copies back the record
that never landed and leaves the deleted row's offset alone; the copy lands, the ledger counts it
re-queued; a second re-queue sends nothing; ``include_removed`` re-sends the deleted row; the ledger
passes."""

from __future__ import annotations


import dagster as dg
import pytest
import requests

from lakebus_dagster.bus.provenance import OFFSET_COLUMN, PROVENANCE_COLUMNS
from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.ledger import LEDGER_JOB
from lakebus_dagster.defs.recovery import REQUEUE_JOB
from lakebus_dagster.defs.monitoring.policy import monitoring_policy
from lakebus_dagster.defs.alerts import AlertResource
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster.events import Bet, EventProducer
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.ledger import Ledger, ledger_complete
from lakebus_dagster_tests.integration.helpers import TEST_COMMIT_INTERVAL_MS, isolated_layout, sink_connector, wait_for
from lakebus_dagster_tests.cleanup import remove_suffixed

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def stack(settings):
    """The running local stack, used as it is (overrides the shared fixture for this module): this
    test starts nothing, so it never competes with a Connect worker another session is restarting."""
    from lakebus_dagster.settings import load_local_secrets

    load_local_secrets(settings)
    return settings



def bet(i: int) -> Bet:
    return Bet(category="biz", event="bet", log_date="2025-11-27", hour="10", plat_id=1, app_id=2, ts=1764237600000 + i,
               schema_version=1, user_id=100 + i % 7, order_id=f"ledger-{i}", amount=float(i), currency="BRL", game_id=1)


def sink_up(sink) -> bool:
    """The sink runs; False (keep polling) while the Connect worker restarts (others load plugins)."""
    try:
        return bool(sink.running())
    except requests.ConnectionError:
        return False


def check_run(resources, instance=None) -> tuple[dict, str]:
    """The offset_ledger check through Dagster (its job): ({asset: evaluation}, run id). Grace 0, not
    the shipped 300 s: the test judges a gap it made on purpose at once; the grace only delays a verdict."""
    result = defs.resolve_job_def(LEDGER_JOB).execute_in_process(
        resources=resources, run_config={"ops": {"offset_ledger": {"config": {"grace_s": 0.0}}}}, raise_on_error=True,
        instance=instance,
    )
    evaluations = result.get_asset_check_evaluations()
    assert {e.asset_key.path[-1] for e in evaluations} == {"dwd_biz_bet", "dwd_biz_recharge"}
    return {e.asset_key.path[-1]: e for e in evaluations}, result.run_id


def run_check(resources, instance=None) -> dict:
    return check_run(resources, instance)[0]


def meta(evaluation, key):
    return evaluation.metadata[key].value


def run_requeue(resources, instance, request: dg.RunRequest | None = None, **config) -> dict:
    """requeue_lost_records through Dagster with the run config of ``request`` (the sensor's) plus
    ``config``; returns its output metadata. The tests pass grace_s=0 as run_check does (the gaps are
    seconds old; the shipped 300 s would call them pending)."""
    run_config = dict(request.run_config) if request is not None else {}
    ops = {**run_config.get("ops", {})}
    confirm = resources["layout"].layout().bus_topic.name  # the sensor's request confirms it; by hand, the test does
    ops["requeue_lost_records_op"] = {"config": {"confirm": confirm, **ops.get("requeue_lost_records_op", {}).get("config", {}),
                                                 "grace_s": 0.0, **config}}
    result = defs.resolve_job_def(REQUEUE_JOB).execute_in_process(
        resources=resources, run_config={**run_config, "ops": ops}, instance=instance, raise_on_error=True,
        tags=dict(request.tags) if request is not None else None,
    )
    return _output_metadata(result)


def _output_metadata(result) -> dict:
    (event,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    return {k: v.value for k, v in event.event_specific_data.metadata.items()}


def rows_of(catalog, table_name: str) -> list[dict]:
    return catalog.load_table(table_name).scan(selected_fields=(OFFSET_COLUMN, "order_id")).to_arrow().to_pylist()


def test_ledger_passes_then_fails_naming_a_deleted_row_and_a_skipped_offset(stack, spark, run_id, webhook):
    url, received = webhook
    layout = isolated_layout(run_id)
    resources = {
        **build_resources(),
        "layout": BusLayoutResource(name_suffix=run_id, commit_interval_ms=TEST_COMMIT_INTERVAL_MS),
        "alerts": AlertResource(sink="webhook", webhook_url=url),
    }
    assert resources["layout"].layout().bus_topic.name == layout.bus_topic.name
    topic, bet_table = layout.bus_topic.name, layout.routes["bet"]
    catalog = load_catalog(stack)
    connect = ConnectClient(stack.connect.urls[0], timeout=30)
    kafka_config = {"bootstrap.servers": stack.kafka.bootstrap_servers}
    try:
        with sink_connector(stack, layout) as sink:
            wait_for(lambda: sink_up(sink), 'sink connector RUNNING')
            raw = resources["kafka"].producer()
            with EventProducer(topic, kafka_config) as producer:  # offsets 0-4
                for i in range(5):
                    producer.send(bet(i))
            raw.produce(topic, key=b"gone", value=None)  # 5: tombstone
            raw.produce(topic, key=b"bad", value=b"{not json")  # 6: converter error -> DLQ
            assert raw.flush(30) == 0
            with EventProducer(topic, kafka_config) as producer:  # 7-11
                for i in range(5, 10):
                    producer.send(bet(i))

            # the waiting loop's question: is every offset up to the end accounted for?
            ledger = Ledger.from_kafka_config(layout, kafka_config, catalog, connect)
            run = wait_for(lambda: sink_up(sink) and (r := ledger_complete(ledger)).complete and r,
                           "every offset of the bus accounted for by the ledger")
            assert run.verdict.partitions[0].window.end == 12

            # the check through Dagster: 0 lost, 0 duplicated, every place counted
            first = run_check(resources)
            for evaluation in first.values():
                assert evaluation.passed, evaluation.description
                assert meta(evaluation, "lost_count") == 0 and meta(evaluation, "duplicate_count") == 0
            row = meta(first["dwd_biz_bet"], "partitions").records[0].data
            assert (row["ods"], row["dlq"], row["tombstone"], row["verified_to"], row["lost"]) == (10, 1, 1, 12, "-")
            assert received == []
            table = catalog.load_table(bet_table)
            assert set(PROVENANCE_COLUMNS) <= {f.name for f in table.schema().fields}
            provenance = table.scan(selected_fields=(OFFSET_COLUMN, "order_id")).to_arrow().to_pylist()
            assert sorted(r[OFFSET_COLUMN] for r in provenance) == [0, 1, 2, 3, 4, 7, 8, 9, 10, 11]

            # break it 1: delete the row of offset 3 (already verified: the delete snapshot forces re-verification)
            # (with Spark: pyiceberg's multipart upload fails against the local S3Proxy)
            spark.sql(f"DELETE FROM {bet_table} WHERE {OFFSET_COLUMN} = 3")
            second = run_check(resources)
            for evaluation in second.values():
                assert not evaluation.passed
                assert meta(evaluation, "lost_offsets") == "[0] 3", meta(evaluation, "lost_offsets")
            assert len(received) == 1 and "lost 3" in received[0]["text"], received

            # break it 2: stop the sink, send 3 records (12-14), move its offsets past 12, resume
            connect.stop(layout.connector_name)
            connect.wait_for_state(layout.connector_name, {"STOPPED"}, timeout=60, require_tasks=False)
            with EventProducer(topic, kafka_config) as producer:
                for i in range(10, 13):
                    producer.send(bet(i))
            connect.patch_offsets(layout.connector_name, [
                {"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 13}}])
            connect.resume(layout.connector_name)
            wait_for(lambda: sink_up(sink), 'sink connector RUNNING')
            wait_for(lambda: sink_up(sink) and {13, 14} <= {
                r[OFFSET_COLUMN] for r in catalog.load_table(bet_table).scan(selected_fields=(OFFSET_COLUMN,)).to_arrow().to_pylist()
            }, "offsets 13 and 14 in the ODS after the skip")
            third = run_check(resources)
            for evaluation in third.values():
                assert not evaluation.passed
                assert meta(evaluation, "lost_offsets") == "[0] 3, 12", meta(evaluation, "lost_offsets")
            assert len(received) == 2 and "lost 3, 12" in received[1]["text"], received
            # the same problems again: no second alert for them
            run_check(resources)
            assert len(received) == 2

            # the repair, as the daemon runs it: the sensor sees the failing ledger run, requests the re-queue
            policy = monitoring_policy(stack)
            assert policy.auto_requeue_lost, "the shipped policy re-queues lost records"
            requeue_sensor = defs.resolve_sensor_def("requeue_after_loss_sensor")
            after_sensor = defs.resolve_sensor_def("ledger_after_recovery_sensor")
            assert requeue_sensor.job_name == REQUEUE_JOB and after_sensor.job_name == LEDGER_JOB

            def tick(sensor, instance, cursor):
                return sensor.evaluate_tick(dg.build_sensor_context(
                    instance=instance, definitions=defs, cursor=cursor,
                    # the re-queue's confirmation names this test's bus topic, from its layout
                    resources={"monitoring_policy": policy, "layout": resources["layout"]}))

            with dg.instance_for_test() as instance:
                cursors = {s.name: tick(s, instance, None).cursor for s in (requeue_sensor, after_sensor)}
                failing, ledger_run_id = check_run(resources, instance)
                assert meta(failing["dwd_biz_bet"], "lost_count") == 2
                ticked = tick(requeue_sensor, instance, cursors[requeue_sensor.name])
                (request,) = ticked.run_requests
                assert request.run_key == f"requeue-after-{ledger_run_id}" and request.tags["lakebus/lost"] == "2", request
                dg.validate_run_config(defs.resolve_job_def(REQUEUE_JOB), request.run_config)
                cursors[requeue_sensor.name] = ticked.cursor

                # the run: 12 never landed -> copied back; 3 was in the table and deleted -> left alone
                first_repair = run_requeue(resources, instance, request)
                assert (first_repair["requeue_offsets"], first_repair["left_removed_offsets"]) == (f"{topic}[0]: 12", f"{topic}[0]: 3"), first_repair
                assert first_repair["copies"] == f"{topic}[0]: 15", first_repair
                assert received[-1]["kind"] == "requeued" and f"{topic}[0]: 12" in received[-1]["text"], received[-1]
                (after,) = tick(after_sensor, instance, cursors[after_sensor.name]).run_requests
                assert after.tags["lakebus/after_job"] == REQUEUE_JOB, after

                wait_for(lambda: any(r["order_id"] == "ledger-10" for r in rows_of(catalog, bet_table)),
                         "the re-queued copy of offset 12 (order ledger-10) in the ODS")
                assert sorted(r[OFFSET_COLUMN] for r in rows_of(catalog, bet_table) if r["order_id"] == "ledger-10") == [15]
                fourth = run_check(resources, instance)
                for evaluation in fourth.values():
                    assert meta(evaluation, "lost_offsets") == "[0] 3", meta(evaluation, "lost_offsets")
                row = meta(fourth["dwd_biz_bet"], "partitions").records[0].data
                assert row["requeued"] == 1, row

                # a second re-queue finds nothing new: the copy claims its original
                again = run_requeue(resources, instance)
                assert (again["requeue_count"], again["copies"], again["left_removed_count"]) == (0, "-", 1), again
                # the deleted row, re-sent on purpose; then every offset is in exactly one place
                removed = run_requeue(resources, instance, include_removed=True)
                assert (removed["requeue_offsets"], removed["copies"]) == (f"{topic}[0]: 3", f"{topic}[0]: 16"), removed
                wait_for(lambda: any(r["order_id"] == "ledger-3" for r in rows_of(catalog, bet_table)),
                         "the re-queued copy of offset 3 in the ODS")
                fifth = run_check(resources, instance)
                for evaluation in fifth.values():
                    assert evaluation.passed and meta(evaluation, "lost_count") == 0, evaluation.description
                orders = sorted(r["order_id"] for r in rows_of(catalog, bet_table))
                assert orders == sorted(f"ledger-{i}" for i in range(13)), orders  # every event once
                assert [a["kind"] for a in received] == ["offset_ledger", "offset_ledger", "requeued", "offset_ledger", "requeued"], received
    finally:
        connect.close()
        remove_suffixed(stack, {run_id})  # the bus's topics (the ledger's state topic too), tables and namespaces
