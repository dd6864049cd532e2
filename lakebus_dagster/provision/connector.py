"""Ensure the sink connector, Strimzi-style: validate, diff desired vs live, PUT only on a difference.

Connect rewrites (and restarts) a connector on every ``PUT .../config`` even when nothing changed,
so an unconditional apply would restart the sink on every provisioning run. The live config comes
back raw, with ``${env:...}`` placeholders unresolved, so secrets compare as written.
"""

from __future__ import annotations

from collections.abc import Mapping

from lakebus_dagster.connect import ConnectClient, ConnectorNotFound, diff_configs
from lakebus_dagster.provision.outcome import Action, Outcome, ProvisioningError

RUNNING = "RUNNING"


def validate_connector(client: ConnectClient, name: str, desired: Mapping[str, str]) -> None:
    result = client.validate(desired["connector.class"], {**desired, "name": name})
    if result.error_count:
        fields = "; ".join(f"{key}: {' / '.join(msgs)}" for key, msgs in sorted(result.errors.items()))
        raise ProvisioningError(f"connector {name!r}: Connect rejects the desired config ({result.error_count} error(s)): {fields}")


def reconcile_connector(
    client: ConnectClient,
    name: str,
    desired: Mapping[str, str],
    *,
    wait_timeout_s: float = 120.0,
) -> Outcome:
    """Create or update ``name`` to ``desired``, then bring it to RUNNING (resuming a paused or stopped one)."""
    validate_connector(client, name, desired)
    try:
        live = client.get_config(name)
    except ConnectorNotFound:
        live = None
    diff = diff_configs(desired, live or {})
    if live is None:
        client.put_config(name, dict(desired))
        action, details = Action.CREATED, f"{len(desired)} keys"
    elif diff.is_empty:
        action, details = Action.UNCHANGED, "live config equals the desired config"
    else:
        client.put_config(name, dict(desired))
        action = Action.UPDATED
        details = f"{len(diff.changed)} changed, {len(diff.added)} added, {len(diff.removed)} removed"

    if live is not None:  # a new connector has no status yet; wait_for_state below covers it
        status = client.status(name)
        if status.state in {"PAUSED", "STOPPED"}:
            client.resume(name)
            details += f"; resumed from {status.state}"
            action = Action.UPDATED if action is Action.UNCHANGED else action
    status = client.wait_for_state(name, {RUNNING}, timeout=wait_timeout_s)
    details += f"; {status.state} with {len(status.tasks)} task(s)"
    return Outcome(
        "connector",
        name,
        action,
        details,
        diff_markdown="" if live is None or diff.is_empty else diff.as_markdown(),
    )
