"""A connector's declared target state (running / paused / stopped), like Strimzi's ``spec.state``.

The bus layout declares the default (``running``). An operator who parks a connector through the
``pause_connector`` / ``stop_connector`` jobs, or brings it back with ``resume_connector``,
changes the *declared* state, and that declaration is recorded durably — with who, when and why —
as one JSON record per change in a compacted Kafka topic keyed by the connector name. Provisioning,
the maintenance jobs and the status sensor then all compare the live state with the same
declaration, so a parked connector is neither "repaired" by the next provisioning run nor reported
as an incident.

This module is the pure part: state names, the record format and the latest-wins fold over the
topic's records. Reading and writing the topic lives in
:mod:`lakebus_dagster.provision.target_state_store`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from enum import Enum


class TargetStateError(ValueError):
    """A target-state name or record is invalid; the message names the connector/record and why."""


class TargetState(str, Enum):
    """The declared states, spelled as in Strimzi's ``spec.state``; :attr:`connect_state` as Connect shows them."""

    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"

    @property
    def connect_state(self) -> str:
        """The state name Connect's REST status reports (and ``initial_state`` accepts)."""
        return self.value.upper()

    @classmethod
    def parse(cls, value: object, *, where: str = "target state") -> TargetState:
        """Accept ``running`` / ``RUNNING`` (Strimzi's or Connect's spelling); refuse anything else by name."""
        if isinstance(value, TargetState):
            return value
        if isinstance(value, str):
            try:
                return cls(value.strip().lower())
            except ValueError:
                pass
        allowed = ", ".join(s.value for s in cls)
        raise TargetStateError(f"{where}: {value!r} is not a target state; expected one of {allowed}")


@dataclass(frozen=True)
class DeclaredState:
    """One recorded declaration: the connector's target state, and who set it, when and why.

    ``run_id`` is the Dagster run that recorded it (its logs show the operator's launch),
    ``job`` the job name, ``reason`` the operator's optional free text.
    """

    connector: str
    state: TargetState
    recorded_at: str
    run_id: str = ""
    job: str = ""
    reason: str = ""

    @classmethod
    def now(cls, connector: str, state: TargetState | str, *, run_id: str = "", job: str = "", reason: str = "") -> DeclaredState:
        if not connector:
            raise TargetStateError("a declared state needs a connector name")
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        return cls(connector, TargetState.parse(state, where=f"connector {connector!r}"), stamp, run_id, job, reason)

    def to_json(self) -> bytes:
        return json.dumps({**asdict(self), "state": self.state.value}, sort_keys=True).encode()

    def as_dict(self) -> dict[str, str]:
        return {**asdict(self), "state": self.state.value}

    @classmethod
    def from_json(cls, key: str, value: bytes | str, *, where: str) -> DeclaredState:
        """Decode one record; ``where`` (topic/partition/offset) names it in any error."""
        try:
            data = json.loads(value)
        except (ValueError, UnicodeDecodeError) as exc:
            raise TargetStateError(f"{where}: the record for connector {key!r} is not JSON ({exc})") from exc
        if not isinstance(data, dict):
            raise TargetStateError(f"{where}: the record for connector {key!r} is not a JSON object")
        if data.get("connector") != key:
            raise TargetStateError(f"{where}: record keyed {key!r} names connector {data.get('connector')!r}")
        if not isinstance(data.get("recorded_at"), str):
            raise TargetStateError(f"{where}: the record for connector {key!r} has no recorded_at")
        return cls(
            connector=key,
            state=TargetState.parse(data.get("state"), where=f"{where}: connector {key!r}"),
            recorded_at=data["recorded_at"],
            run_id=str(data.get("run_id", "")),
            job=str(data.get("job", "")),
            reason=str(data.get("reason", "")),
        )


@dataclass(frozen=True)
class StateRecord:
    """One raw record of the state topic, as read: ``value`` None is a tombstone (back to the default)."""

    key: str
    value: bytes | None
    where: str


def fold_latest(records: Iterable[StateRecord]) -> dict[str, DeclaredState]:
    """Latest wins per connector, in the order given (the topic's offset order).

    A tombstone removes the declaration. Only the *latest* record of a connector is decoded
    strictly: an older malformed record superseded by a valid one is history, but a malformed
    latest record raises (naming topic, partition and offset), since guessing the operator's
    intent would be worse than stopping.
    """
    latest: dict[str, StateRecord] = {}
    for record in records:
        latest[record.key] = record
    return {
        key: DeclaredState.from_json(key, record.value, where=record.where)
        for key, record in latest.items()
        if record.value is not None
    }


def resolve(connectors: Iterable[str], recorded: Mapping[str, DeclaredState], default: TargetState) -> dict[str, TargetState]:
    """Each managed connector's declared state: the recorded one, else the layout's default."""
    return {name: recorded[name].state if name in recorded else default for name in connectors}
