"""The Connect cluster at a glance (seed 003's getClusterInfo / getConfigInfo / getAllocatedInfo).

Connect's REST API has no "list workers" call: a worker shows up through the connectors and tasks
it runs (``worker_id`` in each status), plus the worker that answered ``GET /``. An idle worker
with nothing assigned is therefore invisible here — said in the asset description.
Every connector config is shown with secret-looking values masked (:mod:`lakebus_dagster.connect.redaction`).
The ``connect/cluster`` asset shows it; the module says "Connect" because "cluster" alone is also
the 3-broker stack profile (issue 22).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from lakebus_dagster.connect import ConnectClient
from lakebus_dagster.connect.redaction import redact_value


@dataclass(frozen=True)
class ConnectView:
    server: dict[str, Any]
    workers: list[dict[str, Any]]
    connectors: list[dict[str, Any]]
    tasks: list[dict[str, Any]]
    plugins: list[dict[str, Any]]
    configs: dict[str, dict[str, str]]  # redacted


def connect_view(client: ConnectClient) -> ConnectView:
    """One bounded read of the cluster: ``GET /``, ``GET /connectors?expand=status&expand=info``, plugins."""
    server = client.server_info()
    overview = client.list_connectors(expand_status=True, expand_info=True)
    plugins = client.plugins(connectors_only=False)
    connectors, tasks, configs = [], [], {}
    per_worker: dict[str, dict[str, int]] = defaultdict(lambda: {"connectors": 0, "tasks": 0})
    answering = urlparse(client.base_url).netloc
    per_worker.setdefault(answering, {"connectors": 0, "tasks": 0})
    for name, entry in sorted(overview.items()):
        status, info = entry.status, entry.info
        config = info.config if info else {}
        configs[name] = {k: redact_value(k, v) for k, v in sorted(config.items())}
        if status is not None:
            per_worker[status.worker_id]["connectors"] += 1
        connectors.append({
            "connector": name,
            "type": (info.type if info else None) or (status.type if status else None),
            "class": config.get("connector.class", ""),
            "state": status.state if status else "?",
            "worker": status.worker_id if status else "",
            "tasks": len(status.tasks) if status else 0,
            "failed tasks": len(status.failed_tasks) if status else 0,
        })
        for task in status.tasks if status else []:
            per_worker[task.worker_id]["tasks"] += 1
            tasks.append({"connector": name, "task": task.id, "state": task.state, "worker": task.worker_id,
                          "trace (first line)": task.trace_summary or ""})
    workers = [{"worker": w, **counts} for w, counts in sorted(per_worker.items())]
    plugin_rows = [{"class": p.get("class"), "type": p.get("type"), "version": p.get("version")} for p in plugins]
    return ConnectView(server, workers, connectors, tasks, plugin_rows, configs)
