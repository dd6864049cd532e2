"""``lakebus status``: one screen of the whole system, and an exit code for scripts.

The stack's services (:func:`lakebus_dagster.stack.manager.status`), the Dagster UI, every configured
Connect worker (answering, idle or what it runs: :mod:`lakebus_dagster.connect.worker_probe`), the layout's
sink connector and its tasks (Connect REST), the bus lag and the sink's newest Iceberg commit
(:func:`lakebus_dagster.observe.sink_progress.sink_progress`, what the status sensor's stall
watch reads), and the incidents the status sensor holds open, read from its cursor in the local
Dagster instance (``<state>/dagster_home``).

Each part that cannot be read says so on its own line ("unknown (...)") instead of ending the
command: a status screen is most needed when something is down. Exit 0 when every service is
healthy and the connector and all its tasks are RUNNING, 1 otherwise, 2 on bad input.
"""

from __future__ import annotations

import argparse
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from lakebus_dagster.bus.layout import BusLayout
    from lakebus_dagster.connect import ConnectorStatus
    from lakebus_dagster.settings import Settings

DESCRIPTION = """\
One screen of the whole system: the local stack's services, the Dagster UI, each Connect worker
(answering, idle or what it runs), the bus's sink
connector and its tasks, the bus lag (records the sink has not consumed), the sink's last Iceberg
commit and the incidents the connector status sensor holds open.

Exit 0 when every service is healthy and the connector and all its tasks are RUNNING, 1 otherwise
(for scripts: `lakebus status >/dev/null || ...`), 2 on bad input.
"""

EXAMPLES = """\
  lakebus status
  lakebus status > /dev/null && echo all healthy
"""

SENSOR = "connector_status_sensor"
SEE_THE_UI = f"see the UI (Automation → {SENSOR})"


def configure(p: argparse.ArgumentParser) -> None:
    p.set_defaults(func=run)


def _unknown(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"unknown ({text[:160]})"


def open_incidents(home: Path) -> list[str] | None:
    """The summaries of the incidents the status sensor holds open (its cursor in the Dagster
    instance at ``home``); None when the instance or the sensor's state cannot be read."""
    if not ((home / "dagster.yaml").exists() or (home / "schedules").exists()):
        return None  # no instance there yet: opening one would create it
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from dagster import DagsterInstance

            from lakebus_dagster.monitor.incidents import IncidentBook

            with DagsterInstance.from_config(str(home)) as instance:
                # public API only: every instigator's state, picked by the sensor's (unique) name
                states = [s for s in instance.all_instigator_state() if s.instigator_name == SENSOR]
    except Exception:  # noqa: BLE001 - an unreadable instance falls back to pointing at the UI
        return None
    if not states:
        return None
    cursor = getattr(states[0].instigator_data, "cursor", None)
    try:
        book = IncidentBook.from_cursor(cursor)
    except (ValueError, TypeError):
        return None
    now = datetime.now(timezone.utc).timestamp()
    return [f"{inc.summary} (open {_age(now - inc.opened_at)}{', clearing' if inc.cleared_at else ''})"
            for _, inc in sorted(book.open.items(), key=lambda kv: kv[1].opened_at)]


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def read_connector(settings: Settings, layout: BusLayout) -> tuple[ConnectorStatus | None, str]:
    """(the sink's status, a problem) — status None with the reason when it is not readable or not deployed."""
    from lakebus_dagster.cli.connectors import connect_client, connect_problem
    from lakebus_dagster.connect import ConnectError, ConnectorNotFound

    try:
        with connect_client(settings) as client:
            return client.status(layout.connector_name), ""
    except ConnectorNotFound:
        return None, "not deployed (create it: lakebus launch provision_lakebus)"
    except ConnectError as exc:
        return None, f"unknown ({connect_problem(exc, settings)})"


def read_workers(settings: Settings) -> list[str]:
    """One line per configured Connect worker, each asked ``GET /`` on its own: answering or not,
    version, what it runs, idle when it runs nothing (the ``connect/cluster`` asset's worker rows)."""
    from lakebus_dagster.cli.connectors import CONNECT_TIMEOUT_S, connect_client
    from lakebus_dagster.connect import ConnectError
    from lakebus_dagster.connect.worker_probe import probe_workers
    from lakebus_dagster.inventory.connect_view import work_per_worker, worker_rows

    probes = probe_workers(settings.connect.urls, settings.connect.auth(), timeout=CONNECT_TIMEOUT_S,
                           verify=settings.connect.verify())
    per_worker, why = {}, ""
    if any(p.answering for p in probes):
        try:
            with connect_client(settings) as client:
                overview = client.list_connectors(expand_status=True, expand_info=False)
            per_worker = work_per_worker([e.status for e in overview.values() if e.status is not None])
        except ConnectError as exc:
            why = f" (what each runs: {_unknown(exc)})"
    lines = []
    for row in worker_rows(per_worker, probes):
        if row["answering"] == "no":
            lines.append(f"{row['worker']}: not answering ({row['note'][:120]})")
        else:
            runs = "idle" if row["idle"] == "yes" else f"{row['connectors']} connector(s), {row['tasks']} task(s)"
            lines.append(f"{row['worker']}: {runs}{', ' + row['version'] if row['version'] else ''}"
                         f"{' — ' + row['note'] if row['note'] else ''}{why}")
    return lines


def read_progress(settings: Settings, layout: BusLayout) -> tuple[str, str]:
    """(bus lag, last commit) lines from :func:`sink_progress`, or why they are unknown."""
    from lakebus_dagster.cli.connectors import connect_client
    from lakebus_dagster.kafka import KafkaClients
    from lakebus_dagster.observe.sink_progress import sink_progress

    try:
        kafka = KafkaClients(settings.kafka.client_config())
        with connect_client(settings) as client:
            progress = sink_progress(layout, client, kafka, _SettingsCatalog(settings))
    except Exception as exc:  # noqa: BLE001 - one part of the screen unknown, the rest still shown
        return _unknown(exc), _unknown(exc)
    partitions = len(progress.end)
    lag = f"{progress.lag} record(s) not consumed yet ({progress.total_consumed}/{progress.total_end} consumed, " \
          f"{partitions} partition(s) of {layout.bus_topic.name})"
    dual = f"; commit coordinators: {progress.coordinators_text()}" if progress.overlapping_cycles else ""
    return lag, progress.last_commit_text() + dual


@dataclass(frozen=True)
class _SettingsCatalog:
    """The settings' catalog, opened only when the progress read asks for it: an unreachable
    catalog (or missing S3 keys) then leaves the lag line readable and says why on the commit line."""

    settings: Settings

    @property
    def catalog_uri(self) -> str:
        return self.settings.lake.catalog_uri

    def load(self) -> Catalog:
        from lakebus_dagster.lake.catalog import load_catalog

        return load_catalog(self.settings)


def bus_layout(settings: Settings) -> BusLayout:
    """The layout as the code location's ``layout`` resource builds it (suffix, tuning)."""
    from lakebus_dagster.defs.environment import build_resources

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_resources(settings)["layout"].layout()  # type: ignore[attr-defined]


def run(args: argparse.Namespace) -> int:
    from lakebus_dagster.settings import load_local_secrets
    from lakebus_dagster.stack import dagster_ui, manager
    from lakebus_dagster.stack.local_settings import load_stack_settings

    settings = load_stack_settings()  # the stack's services are one section of the screen
    load_local_secrets(settings)
    print(f"lakebus status  (profile {settings.profile}, state {settings.state_dir})")

    states = manager.status(settings)
    print("services")
    for st in states:
        shown = "healthy" if st.healthy else ("starting" if st.pid else "down")
        print(f"  {st.name:<13} {shown:<9} {(':' + str(st.port)) if st.port else ''}".rstrip())
    services_ok = bool(states) and all(st.healthy for st in states)
    if not states:
        print("  none (start them: lakebus stack up)")

    ui = dagster_ui.state(settings)
    url = dagster_ui.ui_url(settings)
    print(f"dagster UI     {'up at ' + url if ui.healthy else 'down (start it: lakebus ui up)'}")

    print("connect workers")
    for line in read_workers(settings):
        print(f"  {line}")

    layout = bus_layout(settings)
    status, problem = read_connector(settings, layout)
    name = layout.connector_name
    connector_ok = False
    if status is None:
        print(f"connector      {name}: {problem}")
        lag = last_commit = "- (no sink connector)"
    else:
        connector_ok = status.in_states({"RUNNING"})
        running = sum(t.state == "RUNNING" for t in status.tasks)
        print(f"connector      {name}: {status.state}, tasks {running}/{len(status.tasks)} RUNNING")
        if status.trace_summary:
            print(f"  error        {status.trace_summary}")
        for task in status.tasks:
            if task.state != "RUNNING":
                print(f"  task {task.id:<7} {task.state} on {task.worker_id}{': ' + task.trace_summary if task.trace_summary else ''}")
        lag, last_commit = read_progress(settings, layout)
    print(f"bus lag        {lag}")
    print(f"last commit    {last_commit}")

    incidents = open_incidents(dagster_ui.dagster_home(settings))
    if incidents is None:
        print(f"incidents      {SEE_THE_UI}")
    elif not incidents:
        print(f"incidents      none open ({SENSOR})")
    else:
        print(f"incidents      {len(incidents)} open ({SENSOR}):")
        for line in incidents:
            print(f"  {line}")

    healthy = services_ok and connector_ok
    print(f"overall        {'healthy' if healthy else 'NOT healthy'}")
    return 0 if healthy else 1
