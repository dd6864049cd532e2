"""A pytest plugin for :func:`lakebus_dagster_tests.measured.collected_counts`: writes each collected
test's path and markers to ``$LAKEBUS_COLLECT_OUT`` (JSON)."""

from __future__ import annotations

import json
import os
from pathlib import Path


def pytest_collection_modifyitems(session, config, items) -> None:
    out = os.environ.get("LAKEBUS_COLLECT_OUT")
    if out:
        Path(out).write_text(json.dumps([[str(item.path), sorted({m.name for m in item.iter_markers()})] for item in items]))
