"""Reconcile the declared connector specs (:mod:`lakebus_dagster.bus.connector_specs`) with Connect.

Each spec goes through the sink's own path — validate, diff, PUT only on a difference, then its
declared target state — so a second run reports every spec ``unchanged``. Prune mode (asked for
explicitly) deletes connectors this bus declared earlier and no longer declares; a connector
without this bus's ownership markers is never deleted, whatever its name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from confluent_kafka.admin import AdminClient

from lakebus_dagster.bus.connector_specs import ConnectorSpec, owned_by
from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.bus.target_state import TargetState
from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.provision.connector import reconcile_connector
from lakebus_dagster.provision.outcome import Action, Outcome, ProvisioningError
from lakebus_dagster.provision.topics import reconcile_topics


def ensure_local_files(specs: Sequence[ConnectorSpec]) -> list[Outcome]:
    """Create the (empty) files a spec reads, so a new FileStream source starts on an existing file."""
    outcomes = []
    for spec in specs:
        for path in map(Path, spec.files):
            if path.exists():
                outcomes.append(Outcome("file", str(path), Action.UNCHANGED, f"{path.stat().st_size} bytes"))
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
            outcomes.append(Outcome("file", str(path), Action.CREATED, "empty"))
    return outcomes


def reconcile_specs(
    client: ConnectClient,
    admin: AdminClient,
    layout: BusLayout,
    specs: Sequence[ConnectorSpec],
    declared: Mapping[str, TargetState],
    *,
    prune: bool = False,
    wait_timeout_s: float = 120.0,
) -> list[Outcome]:
    """Topics, then each spec's connector (in ``declared`` state, else the spec's), then optional pruning.

    Refuses, before any change, a spec whose name is taken by a connector lakebus does not own:
    updating it would silently take over somebody else's connector.
    """
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ProvisioningError(f"connector specs: duplicate names in {names}")
    live = client.list_connectors(expand_status=False, expand_info=True)
    for spec in specs:
        entry = live.get(spec.name)
        if entry is not None and entry.info is not None and not owned_by(entry.info.config, layout):
            raise ProvisioningError(
                f"connector {spec.name!r} exists but was not created by this bus's declaration (no {layout.bus_topic.name!r} "
                "ownership markers); refusing to take it over — rename the spec or delete that connector by hand"
            )
    topics = {t.name: t for s in specs for t in s.topics}
    outcomes = reconcile_topics(admin, list(topics.values()), control_topic=layout.control_topic.name) if topics else []
    outcomes += ensure_local_files(specs)
    for spec in specs:
        target = declared.get(spec.name, spec.target_state)
        outcomes.append(
            reconcile_connector(
                client, spec.name, spec.desired_config(layout), target=target.connect_state, wait_timeout_s=wait_timeout_s
            )
        )
    for name in sorted(prunable(live, layout, names)):
        if prune:
            client.delete(name)
            outcomes.append(Outcome("connector", name, Action.UPDATED, "deleted (pruned: no longer declared)"))
        else:
            outcomes.append(Outcome("connector", name, Action.DRIFT, "no longer declared; kept (run with prune=true to delete)"))
    return outcomes


def prunable(live: Mapping, layout: BusLayout, declared_names: Sequence[str]) -> list[str]:
    """Live connectors carrying this bus's ownership markers whose names are no longer declared."""
    return [
        name
        for name, entry in live.items()
        if name not in declared_names and entry.info is not None and owned_by(entry.info.config, layout)
    ]
