"""A table added to a running capture's declaration: ``provision_change_capture`` puts it in the
publication and the source's ``table.include.list`` (the source restarts on the new config), and
then its rows so far come through an incremental snapshot of that table only — Debezium's
``execute-snapshot`` signal on the capture's Kafka signal channel, read-only, beside streaming (the
re-sync's way, :mod:`lakebus_dagster.cdc.resync`). A capture's first provisioning needs no signal:
its initial snapshot reads every table. A table removed from the declaration leaves the publication
and the include list; its change and current-state tables stay (docs/runbooks/cdc-drop-table.md)."""

from __future__ import annotations

import json

from lakebus_dagster.cdc.capture import CaptureSpec
from lakebus_dagster.cdc.resync import full_snapshot
from lakebus_dagster.defs.resources import KafkaResource
from lakebus_dagster.provision.outcome import Action, Outcome


def added_tables(client, spec: CaptureSpec) -> list[str]:
    """The declared tables the deployed source does not include yet ([] when there is no source:
    its initial snapshot will read them all)."""
    if not client.exists(spec.source_name):
        return []
    live = {t.strip() for t in client.get_config(spec.source_name).get("table.include.list", "").split(",") if t.strip()}
    return [t for t in spec.tables if spec.qualified(t) not in live]


def snapshot_added_tables(context, spec: CaptureSpec, tables: list[str], kafka: KafkaResource) -> list[Outcome]:
    """Signal an incremental snapshot of ``tables`` (newly in the source's include list), one outcome."""
    if not tables:
        return []
    names = ", ".join(spec.qualified(t) for t in tables)
    if not spec.signal_bootstrap:
        context.log.warning(f"{spec.source_name}: {names} added without a signal channel: their changes from now on "
                            "are captured, their rows so far are not (no incremental snapshot)")
        return [Outcome("snapshot", f"{spec.source_name}:{names}", Action.DRIFT, "added; no signal channel, no snapshot")]
    from lakebus_dagster.kafka.writing import produce_all

    key, value = full_snapshot(spec, tables)
    ((partition, offset),) = produce_all(kafka.producer(), [(spec.signal_topic.name, key.encode(), value.encode(), [])])
    context.log.info(f"{spec.source_name}: {names} added; execute-snapshot sent ({spec.signal_topic.name}[{partition}]@{offset})")
    return [Outcome("snapshot", f"{spec.source_name}:{names}", Action.CREATED,
                    f"incremental snapshot signalled: {json.dumps(json.loads(value)['data'])}")]


