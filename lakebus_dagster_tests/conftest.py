"""Shared fixtures. Integration tests run against the real local stack — real Kafka, Connect with the
Iceberg sink, REST catalog, S3 server and Spark; the one fake in that folder is named where it is used
(``test_cli_stack.py``'s error cases use the unit tests' fake Connect server to make Connect answer
what the real one cannot be made to; the same commands against the real worker are in
``test_cli_real_connect.py``) and the gates of ``outage.py`` are real proxies in front of real
services. The ``stack``
fixture brings it up if it is not (a no-op when ``make test`` already did) and never stops it —
``make test`` stops what it started."""

from __future__ import annotations

import os
import time
import uuid

import pytest

from lakebus_dagster.settings import load_local_secrets, load_settings
from lakebus_dagster.stack.local_settings import StackSettings, load_stack_settings


@pytest.fixture(scope="session")
def settings() -> StackSettings:
    """The local stack's settings (a ``Settings`` plus its state layout and ports): what the tests drive."""
    return load_stack_settings()


@pytest.fixture(scope="session")
def stack(settings: StackSettings, remove_what_the_tests_created) -> StackSettings:
    from lakebus_dagster.stack import manager

    remove_what_the_tests_created.stack_used = True

    manager.up(settings)
    load_local_secrets(settings)
    return settings


@pytest.fixture(scope="module")
def spark(stack: StackSettings):
    """A session of the tests' own on the stack's Spark Connect server (what the runs attach to);
    an embedded session only when LAKEBUS_SPARK_REMOTE=local.

    One per test module, not per session: some modules stop and restart the stack's Spark Connect
    server (the Spark-Connect-down tests), and a session attached before that is dead after it —
    make test's lake stage saw every later module's Spark call fail. Attaching costs ~1 s."""
    if stack.spark.remote is None:
        from pyspark.sql import SparkSession

        from lakebus_dagster.lake.catalog import LakeEndpoints
        from lakebus_dagster.lake.spark import prepare_driver_env, spark_conf, spark_jars
        from lakebus_dagster.stack.jars import jars_dir

        prepare_driver_env()
        conf = spark_conf(LakeEndpoints.local(stack), master=stack.spark.master, driver_memory=stack.spark.driver_memory,
                          jars=spark_jars(jars_dir(stack)))
        builder = SparkSession.builder.appName("lakebus-tests")
        for key, value in conf.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
    else:
        from lakebus_dagster.lake.spark import attach

        session = attach(stack.spark.remote)
    yield session
    session.stop()


@pytest.fixture
def run_id() -> str:
    """A short lower-case suffix that keeps each test's topics, connector and namespace apart."""
    return uuid.uuid4().hex[:8]


@pytest.fixture
def wait_for_rows():
    """Poll an Iceberg table until it holds ``n`` rows; fail at once if the connector's task FAILED.

    The by-name variant of ``integration.helpers.wait_for_rows`` (same polling and row count), for
    tests whose connector was made by provisioning rather than by the helpers' ``sink_connector``.
    """
    from lakebus_dagster.connect import ConnectClient
    from lakebus_dagster_tests.integration.helpers import committed_rows, wait_for

    def _wait(catalog, table_name: str, n: int, *, connector: str | None = None, timeout: float = 120.0):
        client = ConnectClient(load_settings().connect.urls[0]) if connector else None

        def landed():
            if client is not None:
                failed = [t for t in client.status(connector).tasks if t.state == "FAILED"]
                assert not failed, f"{connector} task FAILED: {failed[0].trace_summary}"
            count = committed_rows(catalog, table_name)
            return count >= n and count

        return wait_for(landed, f"{n} rows in {table_name}", timeout)

    return _wait


@pytest.fixture(scope="session", autouse=True)
def remove_what_the_tests_created():
    """At the end of the session, drop every namespace, topic and connector a test's suffixed bus
    created (``BusLayout.with_suffix``), then assert none is left: ``make test`` then ``make demo``
    shows only the demo's own bus."""
    from lakebus_dagster_tests.cleanup import SuffixRecorder, leftovers, remove_suffixed

    recorder = SuffixRecorder()
    with pytest.MonkeyPatch.context() as patch:
        recorder.install(patch)
        yield recorder
    if not (recorder.stack_used and recorder.suffixes):
        return  # no service was touched (e.g. the unit tests)
    settings = load_settings()
    load_local_secrets(settings)
    remove_suffixed(settings, recorder.suffixes)
    # Connect stops a deleted connector's tasks asynchronously, and a task starting on another
    # worker meanwhile re-creates its DLQ topic (seen on the cluster profile): remove again until
    # nothing carries a suffix, within a deadline
    deadline = time.monotonic() + 60
    while any((left := leftovers(settings, recorder.suffixes)).values()) and time.monotonic() < deadline:
        time.sleep(2)
        remove_suffixed(settings, recorder.suffixes)
    assert not any(left.values()), f"test resources left behind: {left}"


@pytest.fixture(scope="module", autouse=True)
def stop_the_modules_connectors(remove_what_the_tests_created):
    """When a test module is done, delete the connectors its suffixed buses created (the session's
    end removes their topics and tables). A failure here is printed and left to the session's end,
    which removes everything again and asserts that nothing is left."""
    from lakebus_dagster_tests.cleanup import stop_connectors

    recorder = remove_what_the_tests_created
    before = set(recorder.suffixes)
    yield
    if not recorder.stack_used or not (new := recorder.suffixes - before):
        return
    settings = load_settings()
    load_local_secrets(settings)
    try:
        stop_connectors(settings, new)
    except Exception as error:  # noqa: BLE001 - reported, and retried with an assertion at the session's end
        print(f"[cleanup] the module's connectors were not deleted now ({error!r}); the session's end removes them")


@pytest.fixture
def webhook(request):
    """A local alert webhook ``(url, received)``; the bodies it got are kept in build/alerts/<test>.json."""
    from lakebus_dagster_tests.integration.webhook import alert_webhook

    with alert_webhook(request.node.name) as hook:
        yield hook


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No ``LAKEBUS_*`` variable of the developer's, a state dir of the test's own, and no
    ``./lakebus.yaml`` (the working directory is the test's temp dir): settings as a fresh machine reads them."""
    for name in list(os.environ):
        if name.startswith("LAKEBUS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("LAKEBUS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    return monkeypatch
