"""What the tests create, removed again: every suffixed bus a session made (``with_suffix``).

Integration tests isolate themselves with a random suffix on topics, connector and namespaces
(``BusLayout.with_suffix``). :class:`SuffixRecorder` notes every suffix this session uses;
:func:`remove_suffixed` drops, at the end of the session, the Iceberg namespaces (with their tables)
and the Kafka topics and Connect connectors whose names carry one — and only those, so a developer's
own ``demo`` bus and a concurrent session's buses are left alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lakebus_dagster.bus.layout import BusLayout

#: the suffixes the tests draw: 8 lower-case hex digits (``uuid4().hex[:8]``)
TEST_SUFFIX = re.compile(r"^[0-9a-f]{8}$")


@dataclass
class SuffixRecorder:
    """Wraps ``BusLayout.with_suffix`` for the session and records every test-style suffix."""

    suffixes: set[str] = field(default_factory=set)
    #: set by the ``stack`` fixture: only then did a test reach the services
    stack_used: bool = False

    def install(self, monkeypatch) -> None:
        original = BusLayout.with_suffix
        recorded = self.suffixes

        def with_suffix(layout: BusLayout, suffix: str) -> BusLayout:
            if TEST_SUFFIX.match(suffix):
                recorded.add(suffix)
            return original(layout, suffix)

        monkeypatch.setattr(BusLayout, "with_suffix", with_suffix)


def _carries(name: str, suffixes: set[str]) -> bool:
    return any(re.search(rf"(^|[-_.]){s}($|[-_.])", name) for s in suffixes)


def leftovers(settings, suffixes: set[str]) -> dict[str, list[str]]:
    """Namespaces, topics and connectors that still carry one of ``suffixes``."""
    from confluent_kafka.admin import AdminClient

    from lakebus_dagster.connect import ConnectClient
    from lakebus_dagster.lake.catalog import load_catalog

    catalog = load_catalog(settings)
    namespaces = [".".join(ns) for ns in catalog.list_namespaces() if _carries(".".join(ns), suffixes)]
    topics = sorted(t for t in AdminClient(settings.kafka.client_config()).list_topics(timeout=15).topics
                    if _carries(t, suffixes))
    with ConnectClient(settings.connect.urls, auth=settings.connect.auth(), verify=settings.connect.verify()) as client:
        connectors = sorted(c for c in client.list_connectors(expand_status=False, expand_info=False) if _carries(c, suffixes))
    return {"namespaces": namespaces, "topics": topics, "connectors": connectors}


def stop_connectors(settings, suffixes: set[str]) -> list[str]:
    """Delete the Connect connectors carrying ``suffixes`` (their topics and tables stay for the
    session's end): an idle sink still runs a commit cycle, a Kafka transaction per task, every
    commit interval, and a finished test's connectors would otherwise cost every later test CPU."""
    from lakebus_dagster.connect import ConnectClient

    with ConnectClient(settings.connect.urls, auth=settings.connect.auth(), verify=settings.connect.verify()) as client:
        doomed = sorted(c for c in client.list_connectors(expand_status=False, expand_info=False) if _carries(c, suffixes))
        for name in doomed:
            client.delete(name)
    return doomed


def remove_suffixed(settings, suffixes: set[str]) -> dict[str, list[str]]:
    """Delete connectors, then topics, then namespaces (tables first) carrying ``suffixes``."""
    from confluent_kafka.admin import AdminClient

    from lakebus_dagster.connect import ConnectClient
    from lakebus_dagster.lake.catalog import load_catalog

    from confluent_kafka import KafkaError, KafkaException

    found = leftovers(settings, suffixes)
    with ConnectClient(settings.connect.urls, auth=settings.connect.auth(), verify=settings.connect.verify()) as client:
        for name in found["connectors"]:
            client.delete(name)
    if found["topics"]:
        admin = AdminClient(settings.kafka.ops_client_config())  # kept alive until the futures resolve (deleting: operations)
        futures = admin.delete_topics(found["topics"], operation_timeout=30)
        for future in futures.values():
            try:
                future.result(timeout=60)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:  # already being deleted
                    raise
    catalog = load_catalog(settings)
    for namespace in found["namespaces"]:
        for table in catalog.list_tables(namespace):
            catalog.drop_table(table)
        catalog.drop_namespace(namespace)
    return found


def remove_layouts(settings, layouts, extra_topics=()) -> None:
    """Delete each of ``layouts``' connector, bus / control / DLQ topics, tables and namespaces, and
    ``extra_topics``: for buses whose names carry no suffix of one run (the benchmarks' variants)."""
    from confluent_kafka.admin import AdminClient

    from lakebus_dagster.bus.desired import topic_specs
    from lakebus_dagster.connect import ConnectClient
    from lakebus_dagster.lake.catalog import load_catalog

    with ConnectClient(settings.connect.urls, auth=settings.connect.auth(), verify=settings.connect.verify()) as client:
        for layout in layouts:
            if client.exists(layout.connector_name):
                client.delete(layout.connector_name)
    catalog = load_catalog(settings)
    for layout in layouts:
        for name in layout.tables:
            if catalog.table_exists(name):
                catalog.drop_table(name)
        for namespace in layout.namespaces:
            if catalog.namespace_exists(namespace):
                catalog.drop_namespace(namespace)
    admin = AdminClient(settings.kafka.ops_client_config())  # deleting topics: the operations principal
    existing = set(admin.list_topics(timeout=30).topics)
    doomed = sorted({t.name for layout in layouts for t in topic_specs(layout)} | set(extra_topics))
    doomed = [t for t in doomed if t in existing]
    for future in (admin.delete_topics(doomed, operation_timeout=30).values() if doomed else []):
        future.result(timeout=30)


def remove_capture(stack, spec) -> None:
    """Delete a change capture's connectors, then its slot (once released) and publication (the
    change-capture tests and ``bench_cdc`` share it)."""
    from contextlib import closing

    import psycopg2

    from lakebus_dagster.cdc.database import slot_status
    from lakebus_dagster.connect import ConnectClient
    from lakebus_dagster.stack.postgres_service import superuser_dsn
    from lakebus_dagster_tests.integration.helpers import wait_for

    with ConnectClient(stack.connect.urls[0]) as client:
        for name in (spec.sink_name, spec.source_name):
            if client.exists(name):
                client.delete(name)
    with closing(psycopg2.connect(**superuser_dsn(stack, stack.capture.db))) as conn:
        conn.autocommit = True

        def slot_released():
            found = slot_status(conn, spec.slot)
            return found is None or not found["active"]

        wait_for(slot_released, f"slot {spec.slot} released by the deleted connector", 60)
        with conn.cursor() as cur:
            cur.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s", (spec.slot,))
            cur.execute(f'DROP PUBLICATION IF EXISTS "{spec.publication}"')
