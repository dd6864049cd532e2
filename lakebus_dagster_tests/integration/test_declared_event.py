"""A team adds an event type the way the docs say: one entry in the config file's ``events:``
section, then ``provision_lakebus``. The sink is already running with bets; the new route reaches
it, its table is created, and its rows land within two commit intervals, with no incident from the
status sensor and nothing of the running events lost.

The second provisioning runs in a fresh process whose code location is loaded from the config file
(``LAKEBUS_CONFIG``, ``LAKEBUS_BUS_SUFFIX``), as a deployment loads it after the file changed; this
test's own process was imported without the declaration, so it encodes the new events through a
registry built from the same file section.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from dataclasses import replace

import dagster as dg
import pytest
import yaml

from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.alerts import AlertResource
from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource
from lakebus_dagster.defs.environment import build_resources
from lakebus_dagster.defs.resources import BusLayoutResource
from lakebus_dagster.event_declaration import parse_events
from lakebus_dagster.events import Bet, EnvelopeEncoder, EventRegistry, Recharge
from lakebus_dagster.events.declared import register_declared
from lakebus_dagster.lake.catalog import load_catalog
from lakebus_dagster_tests.lake_counts import committed_rows

from .helpers import produce, wait_for
from .test_monitoring_flow import bet, sensor_tick

pytestmark = pytest.mark.integration

DECLARATION = {"withdrawal": {"fields": {"user_id": "int32", "order_id": "string", "amount": "double",
                                         "currency": "string", "approved": "boolean"}}}
BETS, WITHDRAWALS = 40, 30

PROVISION = textwrap.dedent("""
    from lakebus_dagster.definitions import defs
    result = defs.resolve_job_def("provision_lakebus").execute_in_process(raise_on_error=False)
    raise SystemExit(0 if result.success else 1)
""")


class DeclaredLayout(BusLayoutResource):
    """The bus as a code location loaded from the config file sees it: the declared route added."""

    declared_table: str

    def layout(self) -> BusLayout:
        base = super().layout()
        return replace(base, routes={**base.routes, "withdrawal": self.declared_table})


def test_a_declared_event_type_reaches_the_running_sink_with_no_incident(stack, run_id, webhook, tmp_path):
    url, received = webhook
    resources = {**build_resources(), "layout": BusLayoutResource(name_suffix=run_id),
                 "alerts": AlertResource(sink="webhook", webhook_url=url, body_format="generic"),
                 "monitoring_policy": MonitoringPolicyResource()}  # shipped
    layout = resources["layout"].layout()
    assert "withdrawal" not in layout.routes, "this process must not know the declared event yet"
    assert defs.resolve_job_def("provision_lakebus").execute_in_process(resources=resources).success
    catalog, topic = load_catalog(stack), layout.bus_topic.name
    produce(resources, topic, [bet(i) for i in range(BETS // 2)])
    wait_for(lambda: committed_rows(catalog, layout.routes["bet"]) >= BETS // 2, "the running sink's first bets")

    # the declaration, and the code location loaded from it provisions the bus again
    config = tmp_path / "lakebus.yaml"
    config.write_text(yaml.safe_dump({"events": DECLARATION}))
    env = {**os.environ, "LAKEBUS_CONFIG": str(config), "LAKEBUS_BUS_SUFFIX": run_id}
    proc = subprocess.run([sys.executable, "-c", PROVISION], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = layout.routes["bet"].rsplit(".", 1)[0] + ".dwd_biz_withdrawal"  # <namespace>_<suffix>.dwd_biz_<event>
    with ConnectClient(stack.connect.urls[0]) as client:
        cfg = client.get_config(layout.connector_name)
        assert table in cfg["iceberg.tables"].split(","), cfg["iceberg.tables"]
        assert cfg[f"iceberg.table.{table}.route-regex"] == "^withdrawal$"
        client.wait_for_state(layout.connector_name, {"RUNNING"}, timeout=60, fail_states={"FAILED"})

    # the sensor sees the bus as the code location now does (the declared route included)
    watched = {**resources, "layout": DeclaredLayout(name_suffix=run_id, declared_table=table)}

    registry = EventRegistry()
    registry.register("bet", Bet)
    registry.register("recharge", Recharge)
    register_declared(registry, parse_events(DECLARATION))
    withdrawal = registry.get("withdrawal").model
    sent_at = time.monotonic()
    produce(resources, topic, [
        withdrawal(category="biz", event="withdrawal", log_date="2025-11-27", hour="10", plat_id=1, app_id=2,
                   ts=1764237600000 + i, schema_version=1, user_id=100 + i, order_id=f"w{i}", amount=i + 0.5,
                   currency="BRL", approved=i % 2 == 0) for i in range(WITHDRAWALS)], EnvelopeEncoder(registry))
    produce(resources, topic, [bet(i) for i in range(BETS // 2, BETS)])

    instance, cursor = dg.DagsterInstance.ephemeral(), None

    def landed() -> bool:
        nonlocal cursor
        _, cursor = sensor_tick("connector_status_sensor", watched, cursor, instance)
        return (catalog.table_exists(table) and committed_rows(catalog, table) >= WITHDRAWALS
                and committed_rows(catalog, layout.routes["bet"]) >= BETS)

    interval = layout.tuning.commit_interval_ms / 1000
    wait_for(landed, f"{WITHDRAWALS} withdrawals in {table} and every bet", timeout=2 * interval + 5, interval=1.0)
    took = time.monotonic() - sent_at
    rows = catalog.load_table(table).scan().to_arrow()
    assert sorted(rows.column("order_id").to_pylist()) == sorted(f"w{i}" for i in range(WITHDRAWALS))
    assert rows.column("approved").to_pylist().count(True) == WITHDRAWALS // 2
    assert committed_rows(catalog, layout.routes["bet"]) == BETS, "bets lost or duplicated across the update"
    for _ in range(3):  # a few more ticks past the landing: an incident would be raised by now
        _, cursor = sensor_tick("connector_status_sensor", watched, cursor, instance)
    assert received == [], received
    print(f"declared event: {WITHDRAWALS} rows in {table} {took:.1f}s after they were sent "
          f"(commit interval {interval:.0f}s), no alert")
