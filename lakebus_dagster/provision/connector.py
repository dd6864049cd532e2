"""Ensure the sink connector, Strimzi-style: validate, diff desired vs live, PUT only on a difference,
then bring it to its declared target state (running / paused / stopped, like Strimzi's ``spec.state``).

Connect rewrites (and restarts) a connector on every ``PUT .../config`` even when nothing changed,
so an unconditional apply would restart the sink on every provisioning run. The live config comes
back raw, with ``${env:...}`` placeholders unresolved, so secrets compare as written.
"""

from __future__ import annotations

from collections.abc import Mapping

from lakebus_dagster.connect import ConnectClient, ConnectConflict, ConnectorNotFound, diff_configs
from lakebus_dagster.provision.outcome import Action, Outcome, ProvisioningError

RUNNING, PAUSED, STOPPED = "RUNNING", "PAUSED", "STOPPED"
TARGET_STATES = frozenset({RUNNING, PAUSED, STOPPED})


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
    target: str = RUNNING,
    wait_timeout_s: float = 120.0,
) -> Outcome:
    """Create or update ``name`` to ``desired``, then bring it to its declared ``target`` state.

    ``target`` is a Connect state name (RUNNING / PAUSED / STOPPED), the connector's declared
    target state. A new connector is created directly in it (``initial_state``, KIP-980, Connect
    >= 3.7), so a connector declared stopped never consumes a record. A live one is paused,
    stopped or resumed only when its state differs: provisioning never resumes a connector an
    operator parked on purpose, and reports it as ``unchanged (declared PAUSED)``.
    """
    if target not in TARGET_STATES:
        raise ProvisioningError(f"connector {name!r}: declared state {target!r} is not one of {sorted(TARGET_STATES)}")
    validate_connector(client, name, desired)
    try:
        live = client.get_config(name)
    except ConnectorNotFound:
        live = None
    diff = diff_configs(desired, live or {})
    if live is None:
        _create(client, name, desired, target)
        action, details = Action.CREATED, f"{len(desired)} keys, initial state {target}"
    elif diff.is_empty:
        action, details = Action.UNCHANGED, "live config equals the desired config"
    else:
        client.put_config(name, dict(desired))
        action = Action.UPDATED
        details = f"{len(diff.changed)} changed, {len(diff.added)} added, {len(diff.removed)} removed"

    if live is not None:  # a new connector has no status yet; wait_for_state below covers it
        status = client.status(name)
        verb = _transition_to(target, status.state)
        if verb is not None:
            getattr(client, verb)(name)
            details += f"; {_PAST[verb]} from {status.state} (declared {target})"
            action = Action.UPDATED if action is Action.UNCHANGED else action
        elif target != RUNNING:
            details += f"; unchanged (declared {target})"
    # a STOPPED connector has no tasks; RUNNING and PAUSED ones do
    status = client.wait_for_state(name, {target}, timeout=wait_timeout_s, require_tasks=target != STOPPED)
    details += f"; {status.state} with {len(status.tasks)} task(s)"
    return Outcome(
        "connector",
        name,
        action,
        details,
        diff_markdown="" if live is None or diff.is_empty else diff.as_markdown(),
    )


def _create(client: ConnectClient, name: str, desired: Mapping[str, str], target: str) -> None:
    """``POST /connectors`` with ``initial_state``; a 409 is accepted only if the live config is ours.

    The client retries POSTs, so a first attempt that succeeded with a lost response ends in a
    conflict ("already exists"); anything else (someone else's config, no connector) re-raises.
    """
    try:
        client.create(name, dict(desired), initial_state=target)
    except ConnectConflict as conflict:
        try:
            live = client.get_config(name)
        except ConnectorNotFound:
            raise conflict from None
        if not diff_configs(desired, live).is_empty:
            raise


def _transition_to(target: str, live_state: str) -> str | None:
    """The Connect call that moves a connector in ``live_state`` towards ``target``, or None if none is due.

    Towards RUNNING only a parked (PAUSED/STOPPED) connector is resumed; a FAILED or UNASSIGNED
    one is left to the restart machinery (and the wait reports it).
    """
    if live_state == target:
        return None
    if target == RUNNING:
        return "resume" if live_state in {PAUSED, STOPPED} else None
    return "pause" if target == PAUSED else "stop"


_PAST = {"resume": "resumed", "pause": "paused", "stop": "stopped"}
