"""Run one benchmark with arguments from its own command line and record it like ``python -m benchmarks``.

``python -m benchmarks NAME`` calls ``run()`` with its defaults; a benchmark with arguments (``bench_soak
--minutes 15``) records through :func:`record_run`: the same table, the same machine block, the same
entry appended to ``build/benchmarks.json``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def record_run(name: str, measure: Callable[[], dict[str, Any]]) -> int:
    from benchmarks.__main__ import finish, measure_into, new_run

    run = new_run()
    measure_into(run, name, measure)
    return finish(run)
