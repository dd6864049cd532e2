"""One row of ``lakebus stack status`` and the table that prints them.

Why a module of its own: both :mod:`.manager` (a row per service) and :mod:`.dagster_ui` (the UI's
row) make rows, and the UI module must not import the manager, which stops the UI in ``down``
(issue 22: the two imported each other).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class ServiceState:
    name: str
    port: int
    pid: int | None
    rss: int
    healthy: bool
    log: Path
    #: its Prometheus metrics URL (brokers and Connect workers), or ""
    metrics: str = ""


def print_status(states: list[ServiceState]) -> None:
    print(f"{'service':<13} {'state':<9} {'pid':>8} {'port':>6} {'rss':>10}  log")
    for st in states:
        state = "healthy" if st.healthy else ("starting" if st.pid else "down")
        rss = f"{st.rss / 2**20:.0f} MiB" if st.pid else "-"
        print(f"{st.name:<13} {state:<9} {st.pid or '-':>8} {st.port or '-':>6} {rss:>10}  {st.log}")
    total = sum(s.rss for s in states)
    print(f"{'total':<13} {'':<9} {'':>8} {'':>6} {total / 2**20:>6.0f} MiB")
    with_metrics = [st for st in states if st.metrics]
    if with_metrics:
        print("metrics (Prometheus)")
        for st in with_metrics:
            print(f"  {st.name:<13} {st.metrics}")
