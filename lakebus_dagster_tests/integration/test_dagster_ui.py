"""The Dagster UI as a user meets it: ``dagster dev`` (webserver + daemon) on a port and a
DAGSTER_HOME of its own, runs submitted over GraphQL and executed by the daemon, pages in Chromium.

The code location runs with ``LAKEBUS_BUS_SUFFIX``, so it provisions an isolated bus
(``events-<suffix>``, connector ``events-iceberg-sink-<suffix>``, namespace ``demo_<suffix>``) on
the shared stack. Teardown stops the instance's whole process group, checks that nothing of it is
left running, and deletes the suffixed connector. Screenshots land in ``build/screenshots/``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import DagsterRunStatus
from playwright.sync_api import BrowserContext, expect, sync_playwright

from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.definitions import defs
from lakebus_dagster.settings import REPO_ROOT, Settings
from lakebus_dagster.stack import launch
from lakebus_dagster_tests.integration.dagster_instance import DagsterInstance, running_dagster

pytestmark = [
    pytest.mark.integration,
    pytest.mark.daemon,
    # dagster-graphql's client calls gql the deprecated way; not ours to fix
    pytest.mark.filterwarnings("ignore:Using variable_values and operation_name:DeprecationWarning"),
]

RUN_DEADLINE_S = 300.0
PAGE_TIMEOUT_MS = 60_000
#: every row's details (last tick, status) loaded: the automation page queries each of its ~30 sensors and
#: schedules, and on a machine at 95 % CPU (make test's three stacks) 57 placeholders were still there at 60 s
LOADED_TIMEOUT_MS = 180_000
SERVICE = "dagster-ui-test"
SCREENSHOTS = REPO_ROOT / "build" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
PROVISION_STEPS = ("ensure_storage", "ensure_topics", "ensure_connector")
UI_JOBS = {
    "provision_lakebus", "connector_status_report", "pause_connector", "resume_connector",
    "stop_connector", "restart_connector", "delete_connector", "set_connector_offsets",
}  # fmt: skip


Ui = DagsterInstance  # settings, port, layout (the suffixed bus its code location provisions), url


@pytest.fixture(scope="module")
def ui(stack: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ui]:
    with running_dagster(stack, tmp_path_factory, SERVICE) as instance:
        yield instance


# -- GraphQL: what the Launchpad does -----------------------------------------------------------------
_OUTCOME_ROW = re.compile(r"^\| (\w+) \| `([^`]+)` \| \*\*(\w+)\*\* \|", re.M)


def _outcomes(metadata: dict, step: str) -> dict[str, str]:
    """``{"kind:name": action}`` from a step's ``outcomes`` table (the markdown the UI renders)."""
    return {f"{kind}:{name}": action for kind, name, action in _OUTCOME_ROW.findall(metadata[step]["outcomes"])}


def _counts(metadata: dict, step: str) -> dict[str, int]:
    return {label: value for label, value in metadata[step].items() if label.startswith("n_")}


def _provision(ui: Ui) -> dict[str, dict]:
    """Submit provision_lakebus, check the daemon dequeues and runs it to SUCCESS; its output metadata."""
    run_id = launch.submit("provision_lakebus", port=ui.port)
    first = launch.client(ui.port).get_run_status(run_id)
    assert first in {DagsterRunStatus.QUEUED, DagsterRunStatus.STARTING}, (
        f"run {run_id} should wait in the queue for the daemon, but its first status was {first.value}"
    )
    status = launch.wait(run_id, timeout=RUN_DEADLINE_S, port=ui.port)
    assert status == DagsterRunStatus.SUCCESS, (
        f"run {run_id} is {status.value}, wanted SUCCESS within {RUN_DEADLINE_S:.0f}s; its log:\n"
        + "\n".join(launch.log_messages(run_id, port=ui.port))
    )
    kinds = {event["__typename"] for event in launch.run_events(run_id, port=ui.port)}
    assert {"RunEnqueuedEvent", "RunStartingEvent"} <= kinds, f"run {run_id} bypassed the run queue: {sorted(kinds)}"
    metadata = launch.output_metadata(run_id, port=ui.port)
    assert set(PROVISION_STEPS) <= set(metadata), f"run {run_id}: output metadata only for {sorted(metadata)}"
    return metadata


def _connector_running(stack: Settings, name: str) -> None:
    with ConnectClient(stack.connect.urls[0]) as client:
        status = client.status(name)
    assert status.in_states({"RUNNING"}), f"connector {name} should be RUNNING with its tasks: {status.describe()}"


def test_provision_lakebus_through_graphql_then_everything_unchanged(ui: Ui, stack: Settings):
    layout = ui.layout
    first = _provision(ui)
    topics = [layout.bus_topic.name, layout.control_topic.name, layout.dlq_topic.name, layout.state_topic.name,
              layout.replay_ledger_topic.name, layout.offset_ledger_topic.name]
    assert _outcomes(first, "ensure_topics") == {f"topic:{t}": "created" for t in topics}, first["ensure_topics"]
    assert _counts(first, "ensure_topics") == {"n_created": 6}
    assert _outcomes(first, "ensure_connector") == {f"connector:{layout.connector_name}": "created"}, first["ensure_connector"]
    storage = _outcomes(first, "ensure_storage")
    for namespace in layout.namespaces:
        assert storage.get(f"namespace:{namespace}") == "created", first["ensure_storage"]
    _connector_running(stack, layout.connector_name)

    second = _provision(ui)
    for step in PROVISION_STEPS:
        outcomes = _outcomes(second, step)
        assert outcomes and set(outcomes.values()) == {"unchanged"}, (step, second[step])
        assert _counts(second, step) == {"n_unchanged": len(outcomes)}, (step, second[step])
    _connector_running(stack, layout.connector_name)


# -- the browser: what a person sees --------------------------------------------------------------------
def _listed(page_name: str) -> list[tuple[str, str]]:
    """(visible name, end of its link) for every item the page should list, read from the definitions."""
    repo = defs.get_repository_def()
    if page_name == "jobs":
        return [(j.name, f"/jobs/{j.name}") for j in repo.get_all_jobs() if not j.name.startswith("__")]
    if page_name == "automation":
        return [(s.name, f"/sensors/{s.name}") for s in repo.sensor_defs] + [
            (s.name, f"/schedules/{s.name}") for s in repo.schedule_defs
        ]
    return [(" / ".join(key.path), "/assets/" + "/".join(key.path)) for key in repo.asset_graph.get_all_asset_keys()]


#: placeholders of rows whose details (last run, ticks, status) are still loading
LOADING = '[class*="Skeleton_"], [class*="Spinner_"], [role="progressbar"]'
#: page -> (path, what the page shows when the definitions have nothing for it)
PAGES = {
    "jobs": ("/jobs", re.compile(r"No jobs")),
    "automation": ("/automation", re.compile(r"no automations", re.I)),  # sensors and schedules
    "assets": ("/assets", re.compile(r"no known materialized assets|No assets", re.I)),
}


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    """Debian's Chromium (``make install``), headless, with a fresh profile; Playwright downloads nothing."""
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: `make install` installs Debian's chromium"
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            tmp_path_factory.mktemp("chromium-profile"), executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        context.set_default_timeout(PAGE_TIMEOUT_MS)
        yield context
        context.close()


def test_the_definitions_offer_the_jobs_the_ui_must_list():
    missing = UI_JOBS - {name for name, _ in _listed("jobs")}
    assert not missing, f"the definitions lost jobs the UI is expected to offer: {sorted(missing)}"


@pytest.mark.parametrize("page_name", list(PAGES))
def test_page_lists_what_the_definitions_contain(ui: Ui, browser: BrowserContext, page_name: str):
    path, empty_state = PAGES[page_name]
    items = _listed(page_name)
    page = browser.new_page()
    # tall enough that a virtualised list renders every row (and the screenshot shows them)
    page.set_viewport_size({"width": 1280, "height": max(720, 240 + 64 * len(items))})
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    try:
        page.goto(f"{ui.url}{path}")
        if not items:
            expect(page.get_by_text(empty_state).first).to_be_visible(timeout=PAGE_TIMEOUT_MS)
        for name, href in items:
            link = page.locator(f'a[href$="{href}"]', has_text=name)
            expect(link.first, f"{page_name} page should list {name!r}").to_be_visible(timeout=PAGE_TIMEOUT_MS)
        expect(page.locator(LOADING), f"{page_name} page still loading").to_have_count(0, timeout=LOADED_TIMEOUT_MS)
    finally:
        page.screenshot(path=str(SCREENSHOTS / f"{page_name}.png"), full_page=True)
        page.close()
