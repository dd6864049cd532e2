"""Typed views of Kafka Connect REST responses (Apache Kafka 4.3).

Only the fields the control plane acts on are typed; everything else stays in Connect's JSON.
Connector configs are kept out of ``repr`` because their values may be secrets.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any


class _Traced:
    trace: str | None

    @property
    def trace_summary(self) -> str | None:
        """First line of the Java stack trace (the exception and its message), for alerts and metadata."""
        if not self.trace:
            return None
        return self.trace.strip().splitlines()[0]


@dataclass(frozen=True)
class TaskStatus(_Traced):
    id: int
    state: str
    worker_id: str
    trace: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskStatus:
        return cls(id=data["id"], state=data["state"], worker_id=data["worker_id"], trace=data.get("trace"))


@dataclass(frozen=True)
class ConnectorStatus(_Traced):
    """``GET /connectors/{name}/status``. A STOPPED connector reports no tasks."""

    name: str
    state: str
    worker_id: str
    trace: str | None = None
    tasks: list[TaskStatus] = field(default_factory=list)
    type: str | None = None

    @property
    def failed_tasks(self) -> list[TaskStatus]:
        return [task for task in self.tasks if task.state == "FAILED"]

    def in_states(self, states: Collection[str], *, require_tasks: bool = True, listed_tasks_too: bool = False) -> bool:
        """Connector in ``states`` and, with ``require_tasks``, at least one task and all tasks too;
        without, ``listed_tasks_too`` still wants every task listed (there may be none) in ``states``."""
        if self.state not in states:
            return False
        if not require_tasks:
            return not listed_tasks_too or all(task.state in states for task in self.tasks)
        return bool(self.tasks) and all(task.state in states for task in self.tasks)

    def describe(self) -> str:
        """States only, e.g. ``RUNNING; tasks 0=RUNNING 1=FAILED`` (traces may quote config values)."""
        tasks = " ".join(f"{task.id}={task.state}" for task in self.tasks) or "none"
        return f"{self.state}; tasks {tasks}"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ConnectorStatus:
        connector = data["connector"]
        return cls(
            name=data["name"],
            state=connector["state"],
            worker_id=connector["worker_id"],
            trace=connector.get("trace"),
            tasks=[TaskStatus.from_json(task) for task in data.get("tasks", [])],
            type=data.get("type"),
        )


@dataclass(frozen=True)
class ConnectorInfo:
    """``GET /connectors/{name}`` (also returned by create and PUT config); ``tasks`` are task ids."""

    name: str
    config: dict[str, str] = field(repr=False)
    tasks: list[int] = field(default_factory=list)
    type: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ConnectorInfo:
        return cls(
            name=data["name"],
            config=dict(data.get("config", {})),
            tasks=[task["task"] for task in data.get("tasks", [])],
            type=data.get("type"),
        )


@dataclass(frozen=True)
class ConnectorOverview:
    """One entry of ``GET /connectors?expand=...``; a part not asked for is None."""

    status: ConnectorStatus | None = None
    info: ConnectorInfo | None = None


@dataclass(frozen=True)
class ValidationResult:
    """``PUT /connector-plugins/{class}/config/validate``: error messages per config key, no values."""

    name: str
    error_count: int
    errors: dict[str, list[str]] = field(default_factory=dict)

    @property
    def is_valid(self) -> bool:
        return self.error_count == 0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ValidationResult:
        errors: dict[str, list[str]] = {}
        for entry in data.get("configs", []):
            value = entry.get("value") or {}  # Debezium's validation answers some entries with "value": null
            if value.get("errors"):
                errors[value["name"]] = list(value["errors"])
        return cls(name=data["name"], error_count=data["error_count"], errors=errors)
