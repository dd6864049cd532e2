"""How a connector's state reads in a run's metadata: the connector and each task, with its worker
and the first line of its trace (the maintenance jobs record it before and after their change)."""

import dagster as dg

from lakebus_dagster.connect import ConnectorStatus
from lakebus_dagster.markdown import markdown_table

STATUS_COLUMNS = ("part", "state", "worker", "trace (first line)")


def status_markdown(status: ConnectorStatus) -> str:
    """The connector and each task: state, worker and the first line of its trace."""
    parts = [("connector", status), *((f"task {t.id}", t) for t in status.tasks)]
    rows = [
        dict(zip(STATUS_COLUMNS, (part, s.state, s.worker_id, s.trace_summary or "")))
        for part, s in parts
    ]
    return markdown_table(rows, STATUS_COLUMNS)


def status_metadata(prefix: str, status: ConnectorStatus) -> dict[str, dg.MetadataValue]:
    return {
        f"{prefix}state": dg.MetadataValue.text(status.state),
        f"{prefix}tasks": dg.MetadataValue.md(status_markdown(status)),
    }
