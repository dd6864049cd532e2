"""The Connect cluster at a glance (seed 003's getClusterInfo / getConfigInfo / getAllocatedInfo).

Connect's REST API has no "list workers" call, and the worker group cannot be described through
confluent-kafka (:mod:`lakebus_dagster.connect.worker_probe`): every configured worker URL is asked
``GET /`` on its own, so a worker that answers but runs nothing is listed as idle, and a configured
worker that does not answer is listed as down. A worker that runs tasks but is not among the
configured URLs (a worker added without telling lakebus) is listed too, as "not configured".
Every connector config is shown with secret-looking values masked (:mod:`lakebus_dagster.connect.redaction`).
The ``connect/cluster`` asset shows it; the module says "Connect" because "cluster" alone is also
the 3-broker stack profile (issue 22).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from lakebus_dagster.connect import ConnectClient, ConnectorStatus
from lakebus_dagster.connect.redaction import redact_value
from lakebus_dagster.connect.worker_probe import WorkerProbe


@dataclass(frozen=True)
class ConnectView:
    server: dict[str, Any]
    workers: list[dict[str, Any]]
    connectors: list[dict[str, Any]]
    tasks: list[dict[str, Any]]
    plugins: list[dict[str, Any]]
    configs: dict[str, dict[str, str]]  # redacted


def connect_view(client: ConnectClient, probes: Sequence[WorkerProbe] = ()) -> ConnectView:
    """One bounded read of the cluster: ``GET /``, ``GET /connectors?expand=status&expand=info``, plugins,
    and ``probes`` (:func:`~lakebus_dagster.connect.worker_probe.probe_workers` of every configured URL)."""
    server = client.server_info()
    overview = client.list_connectors(expand_status=True, expand_info=True)
    plugins = client.plugins(connectors_only=False)
    connectors, tasks, configs = [], [], {}
    per_worker = work_per_worker([entry.status for entry in overview.values() if entry.status is not None])
    per_worker.setdefault(urlparse(client.base_url).netloc, {"connectors": 0, "tasks": 0})
    for name, entry in sorted(overview.items()):
        status, info = entry.status, entry.info
        config = info.config if info else {}
        configs[name] = {k: redact_value(k, v) for k, v in sorted(config.items())}
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
            tasks.append({"connector": name, "task": task.id, "state": task.state, "worker": task.worker_id,
                          "trace (first line)": task.trace_summary or ""})
    workers = worker_rows(per_worker, probes)
    plugin_rows = [{"class": p.get("class"), "type": p.get("type"), "version": p.get("version")} for p in plugins]
    return ConnectView(server, workers, connectors, tasks, plugin_rows, configs)


def work_per_worker(statuses: Iterable[ConnectorStatus]) -> dict[str, dict[str, int]]:
    """How many connector instances and tasks each worker runs (workers running nothing are absent)."""
    per_worker: dict[str, dict[str, int]] = defaultdict(lambda: {"connectors": 0, "tasks": 0})
    for status in statuses:
        per_worker[status.worker_id]["connectors"] += 1
        for task in status.tasks:
            per_worker[task.worker_id]["tasks"] += 1
    return dict(per_worker)


def worker_rows(per_worker: dict[str, dict[str, int]], probes: Sequence[WorkerProbe]) -> list[dict[str, Any]]:
    """One row per worker: every probed (configured) worker in the configured order — answering or
    not, idle when it answers and runs nothing — then every worker seen running something that no
    configured URL names."""
    rows, seen = [], set()
    for p in probes:
        counts = per_worker.get(p.worker_id, {"connectors": 0, "tasks": 0})
        seen.add(p.worker_id)
        rows.append({"worker": p.worker_id, "url": p.url, "answering": "yes" if p.answering else "no",
                     "version": p.version or "", **counts,
                     "idle": "yes" if p.answering and counts["connectors"] + counts["tasks"] == 0 else "no",
                     "note": "" if p.answering else (p.error or "")})
    for worker, counts in sorted(per_worker.items()):
        if worker in seen or (probes and counts["connectors"] + counts["tasks"] == 0):
            continue  # with probes, the answering client's own entry is already a probed worker
        rows.append({"worker": worker, "url": "", "answering": "?" if not probes else "yes (runs tasks)", "version": "",
                     **counts, "idle": "no" if counts["connectors"] + counts["tasks"] else "yes",
                     "note": "not among the configured URLs" if probes else ""})
    return rows
