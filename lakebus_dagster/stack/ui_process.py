"""The Dagster UI as one of the stack's processes: its pid-file name and the command-line markers
that identify its ``dagster dev``.

Why a module of its own: :mod:`.manager` stops the UI first in ``down`` and :mod:`.dagster_ui`
starts it; both need to recognise the process, and neither may import the other (issue 22).
"""

from __future__ import annotations

from lakebus_dagster.settings import REPO_ROOT

#: the pid file's and log file's name (``<state>/run/dagster.pid``, ``<state>/logs/dagster.log``)
SERVICE = "dagster"
WORKSPACE = REPO_ROOT / "workspace.yaml"


def expected_cmdline(port: int | None = None) -> list[str]:
    """The markers of our ``dagster dev`` command line; with ``port``, of the instance on that port."""
    return ["dev", str(WORKSPACE)] + ([str(port)] if port else [])
