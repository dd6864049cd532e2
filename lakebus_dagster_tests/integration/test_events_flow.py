"""The event SDK end to end on the real stack: generator -> EventProducer -> Kafka -> Iceberg sink.

(a) a seeded generation lands with exactly the rows counted from the events sent, per table and
per (log_date, hour), without duplicates; (b) a compatible new event version (one optional field)
evolves the live table: the column appears, new rows fill it, old rows read null, and the
connector task never fails.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.types import StringType

from lakebus_dagster.events import (
    Bet,
    EnvelopeEncoder,
    EventBase,
    EventProducer,
    EventRegistry,
    GeneratorConfig,
    day_range,
    generate_events,
)
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster.settings import Settings

from .helpers import SinkConnector, isolated_layout, load_table_or_none, sink_connector, wait_for, wait_for_rows

pytestmark = pytest.mark.integration


def produce(settings: Settings, topic: str, events: Iterable[EventBase], encoder: EnvelopeEncoder | None = None) -> int:
    """Send ``events`` with the SDK producer and its default settings; returns how many were delivered."""
    with EventProducer(topic, {"bootstrap.servers": settings.kafka.bootstrap_servers}, encoder=encoder) as producer:
        for event in events:
            producer.send(event)
    assert producer.failed == 0
    return producer.delivered


def read_table(catalog: Catalog, table_name: str, *columns: str) -> pa.Table:
    return catalog.load_table(table_name).scan(selected_fields=columns).to_arrow()


def assert_exact_rows(sink: SinkConnector, catalog: Catalog, table_name: str, expected: int) -> pa.Table:
    """Wait for ``expected`` committed rows, then check the rows: exactly that many, order_ids unique."""
    committed = wait_for_rows(sink, catalog, table_name, expected)
    assert committed == expected, f"{table_name}: {committed} rows committed, expected {expected}"
    rows = read_table(catalog, table_name, "*")
    assert rows.num_rows == expected, f"{table_name}: scan returned {rows.num_rows} rows, expected {expected}"
    order_ids = rows.column("order_id").to_pylist()
    duplicates = [oid for oid, n in Counter(order_ids).items() if n > 1]
    assert not duplicates, f"{table_name}: duplicate order_ids {duplicates[:10]}"
    return rows


# -- (a) exact counts ---------------------------------------------------------------------------
def test_generated_events_land_with_exact_counts(stack, run_id):
    layout = isolated_layout(run_id)
    config = GeneratorConfig(count=2000, seed=11, days=day_range("2025-11-25", 2), users=200)
    events = list(generate_events(config))
    assert len(events) == config.count
    # the expected rows, counted here from the events sent (not by the SDK's own aggregates)
    per_event = Counter(e.event for e in events)
    per_event_hour = Counter((e.event, e.log_date, e.hour) for e in events)
    assert set(per_event) == set(layout.routes), "the generation must cover every routed event"
    catalog = load_catalog(stack)

    with sink_connector(stack, layout) as sink:
        sink.wait_running()
        assert produce(stack, layout.bus_topic.name, events) == config.count

        tables = {event: assert_exact_rows(sink, catalog, table, per_event[event])
                  for event, table in layout.routes.items()}

        # rows per (log_date, hour) of the bet table, counted by Arrow
        by_hour = tables["bet"].group_by(["log_date", "hour"]).aggregate([("order_id", "count")])
        actual = {(d, h): n for d, h, n in zip(by_hour["log_date"].to_pylist(), by_hour["hour"].to_pylist(),
                                               by_hour["order_id_count"].to_pylist())}
        assert actual == {(d, h): n for (e, d, h), n in per_event_hour.items() if e == "bet"}
        assert sink.running(), "connector left RUNNING state"


# -- (b) schema evolution -----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class BetV2(Bet):
    """Version 2 of ``bet``: version 1 plus one optional field, the only compatible kind of change."""

    channel: str | None = None


CHANNELS = ("web", "ios", "android")


def bet_registry() -> EventRegistry:
    """A private registry (the default one is shared by the whole process and must not change)."""
    registry = EventRegistry()
    registry.register("bet", Bet)
    registry.register("bet", BetV2, version=2)
    return registry


def as_v1(events: Iterable[Bet]) -> list[Bet]:
    """The generator's bets (the SDK's latest version) as version 1 of this test's private registry."""
    names = {f.name for f in dataclasses.fields(Bet)}
    return [Bet(**{**{k: v for k, v in dataclasses.asdict(e).items() if k in names}, "schema_version": 1}) for e in events]


def as_v2(events: Iterable[Bet]) -> list[BetV2]:
    return [BetV2(**{**dataclasses.asdict(e), "schema_version": 2, "channel": CHANNELS[i % len(CHANNELS)]})
            for i, e in enumerate(events)]


def test_new_optional_field_evolves_the_table(stack, run_id):
    registry = bet_registry()
    layout = isolated_layout(run_id, routes=registry.routes("demo"))
    table_name = layout.routes["bet"]
    bets = GeneratorConfig(count=300, seed=12, event_weights={"bet": 1.0})
    v1 = as_v1(generate_events(bets))
    v2 = as_v2(as_v1(generate_events(dataclasses.replace(bets, seed=13, first_order_id=50001))))
    encoder = EnvelopeEncoder(registry)
    catalog = load_catalog(stack)

    # provisioning passes every registered version to the sink's guard: version 2 is known there
    with sink_connector(stack, layout, registry) as sink:
        sink.wait_running()
        assert produce(stack, layout.bus_topic.name, v1, encoder) == len(v1)
        assert_exact_rows(sink, catalog, table_name, len(v1))
        assert "channel" not in catalog.load_table(table_name).schema().column_names

        assert produce(stack, layout.bus_topic.name, v2, encoder) == len(v2)
        wait_for(lambda: sink.running() and (t := load_table_or_none(catalog, table_name))
                 and "channel" in t.schema().column_names,
                 f"column 'channel' in {table_name}")
        rows = assert_exact_rows(sink, catalog, table_name, len(v1) + len(v2))

        column = catalog.load_table(table_name).schema().find_field("channel")
        assert column.field_type == StringType() and not column.required, column
        channel = dict(zip(rows.column("order_id").to_pylist(), rows.column("channel").to_pylist()))
        assert {channel[e.order_id] for e in v1} == {None}, "version-1 rows must read null in the new column"
        assert {e.order_id: channel[e.order_id] for e in v2} == {e.order_id: e.channel for e in v2}
        versions = Counter(rows.column("schema_version").to_pylist())
        assert versions == {1: len(v1), 2: len(v2)}
        assert sink.running(), "connector left RUNNING state"
