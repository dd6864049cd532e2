"""A typed client for the Kafka Connect REST API (Apache Kafka 4.3): one method per endpoint
(connectors, status, lifecycle, offsets, plugins, validation), each a few lines over the transport's
one request helper (:mod:`~lakebus_dagster.connect.transport`: the URL, the retries and failover
between workers, the typed errors), and the waits built on the status.
Config values are never logged or put into exceptions: error messages carry keys and names only,
and secret values that Connect echoes back are masked.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from typing import Any, Literal
from urllib.parse import quote

from lakebus_dagster.connect.errors import ConnectorNotFound, ConnectStateFailed, ConnectStateTimeout
from lakebus_dagster.connect.models import ConnectorInfo, ConnectorOverview, ConnectorStatus, ValidationResult
from lakebus_dagster.connect.transport import ConnectTransport, connector_path

InitialState = Literal["RUNNING", "PAUSED", "STOPPED"]


class ConnectClient(ConnectTransport):
    """Kafka Connect REST client: one method per endpoint (connectors, status, lifecycle, offsets,
    plugins, validation) and the waits built on the status, over :class:`ConnectTransport`'s one
    retry, failover and error policy (see there)."""

    def server_info(self) -> dict[str, Any]:
        """``GET /``: the worker's version, commit and the Kafka cluster id it belongs to."""
        return dict(self._request("GET", "/").json())

    # -- connectors ------------------------------------------------------------------------------
    def list_connectors(
        self, expand_status: bool = True, expand_info: bool = True
    ) -> dict[str, ConnectorOverview]:
        """``GET /connectors?expand=status&expand=info``: every connector with the parts asked for."""
        expand = [part for part, wanted in (("status", expand_status), ("info", expand_info)) if wanted]
        payload = self._request("GET", "/connectors", params={"expand": expand}).json()
        if isinstance(payload, list):  # no expand: Connect returns bare names
            return {name: ConnectorOverview() for name in payload}
        return {
            name: ConnectorOverview(
                status=ConnectorStatus.from_json(entry["status"]) if "status" in entry else None,
                info=ConnectorInfo.from_json(entry["info"]) if "info" in entry else None,
            )
            for name, entry in payload.items()
        }

    def info(self, name: str) -> ConnectorInfo:
        """``GET /connectors/{name}``."""
        return ConnectorInfo.from_json(self._request("GET", connector_path(name), connector=name).json())

    def exists(self, name: str) -> bool:
        try:
            self.info(name)
        except ConnectorNotFound:
            return False
        return True

    def get_config(self, name: str) -> dict[str, str]:
        """``GET /connectors/{name}/config``: the raw config, provider placeholders unresolved."""
        return dict(self._request("GET", connector_path(name, "config"), connector=name).json())

    def put_config(self, name: str, config: Mapping[str, str]) -> tuple[bool, ConnectorInfo]:
        """``PUT /connectors/{name}/config`` (create or update); returns ``(created, info)``.

        Connect restarts the connector on every PUT, changed or not: diff first
        (:func:`~lakebus_dagster.connect.diff.diff_configs`).
        """
        response = self._request(
            "PUT", connector_path(name, "config"), connector=name, body=dict(config), sent_config=config
        )
        return response.status_code == 201, ConnectorInfo.from_json(response.json())

    def create(
        self, name: str, config: Mapping[str, str], initial_state: InitialState | None = None
    ) -> ConnectorInfo:
        """``POST /connectors``; fails with :class:`ConnectConflict` if the name exists.

        ``initial_state`` (Connect >= 3.7) lets a connector start STOPPED, so offsets can be set
        before it consumes anything.
        """
        body: dict[str, Any] = {"name": name, "config": dict(config)}
        if initial_state is not None:
            body["initial_state"] = initial_state
        response = self._request("POST", "/connectors", connector=name, body=body, sent_config=config)
        return ConnectorInfo.from_json(response.json())

    def delete(self, name: str) -> None:
        self._request("DELETE", connector_path(name), connector=name)

    def validate(self, connector_class: str, config: Mapping[str, str]) -> ValidationResult:
        """``PUT /connector-plugins/{class}/config/validate``; ``connector_class`` may be the full name.

        ``connector.class`` is added to the body when missing (Connect requires it). Include
        ``name`` in ``config``, or the result reports it as missing.
        """
        path = f"/connector-plugins/{quote(connector_class, safe='')}/config/validate"
        body = {"connector.class": connector_class, **config}
        return ValidationResult.from_json(self._request("PUT", path, body=body, sent_config=config).json())

    def plugins(self, connectors_only: bool = True) -> list[dict[str, Any]]:
        """``GET /connector-plugins``; with ``connectors_only=False`` also converters, SMTs, predicates."""
        params = {"connectorsOnly": _flag(connectors_only)}
        return list(self._request("GET", "/connector-plugins", params=params).json())

    def tasks(self, name: str) -> list[dict[str, Any]]:
        """``GET /connectors/{name}/tasks``: task ids and task configs (may hold secrets)."""
        return list(self._request("GET", connector_path(name, "tasks"), connector=name).json())

    # -- state -----------------------------------------------------------------------------------
    def status(self, name: str) -> ConnectorStatus:
        return ConnectorStatus.from_json(self._request("GET", connector_path(name, "status"), connector=name).json())

    def pause(self, name: str) -> None:
        """``PUT .../pause`` (202, asynchronous: poll :meth:`wait_for_state`)."""
        self._request("PUT", connector_path(name, "pause"), connector=name)

    def resume(self, name: str) -> None:
        """``PUT .../resume`` (202, asynchronous); works from PAUSED and STOPPED."""
        self._request("PUT", connector_path(name, "resume"), connector=name)

    def stop(self, name: str) -> None:
        """``PUT .../stop`` (204): tasks shut down, config kept; required before changing offsets."""
        self._request("PUT", connector_path(name, "stop"), connector=name)

    def restart(self, name: str, include_tasks: bool = False, only_failed: bool = False) -> ConnectorStatus | None:
        """``POST .../restart?includeTasks=&onlyFailed=``.

        Returns the planned states (202) when tasks are involved, None for the legacy
        connector-only restart (204).
        """
        params = {"includeTasks": _flag(include_tasks), "onlyFailed": _flag(only_failed)}
        response = self._request("POST", connector_path(name, "restart"), connector=name, params=params)
        return ConnectorStatus.from_json(response.json()) if response.content else None

    def restart_and_wait(
        self, name: str, *, include_tasks: bool, only_failed: bool, timeout: float, settle_s: float = 10.0
    ) -> ConnectorStatus:
        """Restart, then wait until the connector and its tasks are RUNNING again.

        Connect serves statuses read back from its status topic, so right after the 202 the status
        can still be the pre-restart RUNNING. When the restart plan restarts anything, poll (for at
        most ``settle_s``) until an instance is seen RESTARTING before waiting for RUNNING; a
        restart that completes between two polls is simply never seen and the settle wait ends.
        """
        plan = self.restart(name, include_tasks=include_tasks, only_failed=only_failed)
        if plan is not None and _restarting(plan):
            settle = time.monotonic() + settle_s
            while time.monotonic() < settle and not _restarting(self.status(name)):
                time.sleep(0.2)
        # after the settle, a FAILED instance failed again: say so now instead of at the deadline
        return self.wait_for_state(name, {"RUNNING"}, timeout=timeout, fail_states={"FAILED"})

    def stop_and_resume(self, name: str, *, timeout: float) -> ConnectorStatus:
        """Restart every instance as one wave: ``PUT /stop``, wait until STOPPED (no task left), then
        ``PUT /resume`` and wait until the connector and its tasks are RUNNING.

        Why not ``POST /restart?includeTasks=true&onlyFailed=false``: that restarts the connector
        instance too, and the Iceberg sink's connector writes new task configs on every start (a
        random transactional suffix per task), so Connect stops and starts every task a *second*
        time in a rebalance right after the first. Seen on the cluster profile: those two waves
        within a second left the sink with one coordinator that no task answered (every cycle timed
        out, "committed to 0 table(s)") through two restarts. Stopped first, no task runs when the
        new configs are written: one start of every task, one rebalance of the sink's group, one
        election.
        """
        self.stop(name)
        self.wait_for_state(name, {"STOPPED"}, timeout=timeout, require_tasks=False, listed_tasks_too=True)
        self.resume(name)
        return self.wait_for_state(name, {"RUNNING"}, timeout=timeout, fail_states={"FAILED"})

    def restart_task(self, name: str, task_id: int) -> None:
        self._request("POST", connector_path(name, "tasks", str(task_id), "restart"), connector=name)

    def wait_for_state(
        self,
        name: str,
        states: Collection[str],
        timeout: float,
        poll: float = 0.5,
        require_tasks: bool = True,
        fail_states: Collection[str] = (),
        listed_tasks_too: bool = False,
    ) -> ConnectorStatus:
        """Poll the status until the connector (and, with ``require_tasks``, its tasks) is in ``states``.

        A connector or task seen in one of ``fail_states`` raises :class:`ConnectStateFailed` at once.

        ``require_tasks`` needs at least one task and every task in ``states``: right after a
        create or resume the connector is RUNNING before its tasks are assigned. A STOPPED connector
        has no tasks, so wait for STOPPED with ``require_tasks=False``. A 404 counts as "not yet":
        Connect answers 404 until the first status of a new connector is written. Raises
        :class:`ConnectStateTimeout` (a ``TimeoutError``) with the last status seen.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                last: ConnectorStatus | None = self.status(name)
            except ConnectorNotFound:
                last = None
            if last is not None and last.in_states(states, require_tasks=require_tasks, listed_tasks_too=listed_tasks_too):
                return last
            if last is not None and ({last.state, *(t.state for t in last.tasks)} & set(fail_states)):
                raise ConnectStateFailed(
                    f"{'/'.join(sorted(set(fail_states)))} while waiting for {sorted(states)}: {last.describe()}",
                    method="GET", path=connector_path(name, "status"), connector=name, last_status=last,
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                seen = last.describe() if last is not None else "no status (404)"
                raise ConnectStateTimeout(
                    f"not in {sorted(states)} after {timeout}s; last seen: {seen}",
                    method="GET",
                    path=connector_path(name, "status"),
                    connector=name,
                    last_status=last,
                )
            time.sleep(min(poll, remaining))

    # -- offsets (Connect >= 3.6; the connector must be STOPPED to change them) -------------------
    def get_offsets(self, name: str) -> list[dict[str, Any]]:
        """``GET .../offsets``: ``[{"partition": {...}, "offset": {...}}, ...]``."""
        return list(self._request("GET", connector_path(name, "offsets"), connector=name).json()["offsets"])

    def patch_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        """``PATCH .../offsets``; adds to the stored offsets (``"offset": null`` resets one partition).

        Returns Connect's message, which says whether externally managed offsets (e.g. the Iceberg
        sink's control group) still need resetting by hand.
        """
        path = connector_path(name, "offsets")
        return str(self._request("PATCH", path, connector=name, body={"offsets": offsets}).json()["message"])

    def delete_offsets(self, name: str) -> str:
        """``DELETE .../offsets``: reset all offsets; returns Connect's message (see :meth:`patch_offsets`)."""
        return str(self._request("DELETE", connector_path(name, "offsets"), connector=name).json()["message"])




def _flag(value: bool) -> str:
    return "true" if value else "false"


def _restarting(status: ConnectorStatus) -> bool:
    return status.state == "RESTARTING" or any(task.state == "RESTARTING" for task in status.tasks)
