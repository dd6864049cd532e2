"""How one Connect worker is restarted for a rolling restart: a command, swappable per platform.

Restarting a worker is the platform's business, not Connect's (there is no REST call for it): the
local stack restarts the worker's JVM through its process manager (``python -m
lakebus_dagster.stack restart-worker <url>``: SIGTERM, then start it again and wait until healthy),
a compose host would run ``docker compose restart <the worker's service>``, a Kubernetes cluster
``kubectl delete pod <the worker's pod>``. Each is a command template with the worker's address
filled in, so lakebus needs no platform client. Where no command is configured (Strimzi: the
operator owns the pods and rolls them itself when the ``KafkaConnect``'s image changes) the rolling
restart refuses with that advice (:data:`PLATFORM_ADVICE`) instead of guessing.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from urllib.parse import urlsplit

from lakebus_dagster.connect.workers import shown

#: what a rolling restart answers where lakebus may not restart workers itself
PLATFORM_ADVICE = (
    "no worker restart command is configured for these Connect workers (WorkerRestartResource.command): on Kubernetes "
    "with Strimzi, put the plugin into the KafkaConnect's image (or spec.build) and apply it — the operator rolls the "
    "Connect pods one at a time itself; on compose, rebuild the Connect image and `docker compose up -d` the worker "
    "services one at a time (deploy/README.md, \"A new plugin on a running Connect cluster\"); or configure a command "
    "with {url}/{host}/{port}/{number} placeholders")


class WorkerRestartFailed(Exception):
    """The restart command failed or timed out (the message names the worker and the command)."""


class CommandRestarter:
    """Runs ``argv`` with ``{url}``, ``{host}``, ``{port}`` and ``{number}`` (the worker's 1-based
    position among the configured URLs) replaced, and waits up to ``timeout_s`` for it to end."""

    def __init__(self, argv: Sequence[str], timeout_s: float = 300.0) -> None:
        if not argv:
            raise ValueError(PLATFORM_ADVICE)
        self.argv, self.timeout_s = tuple(argv), timeout_s

    def describe(self) -> str:
        return f"`{' '.join(self.argv)}`"

    def command(self, url: str, number: int) -> list[str]:
        parts = urlsplit(shown(url))
        values = {"{url}": shown(url), "{host}": parts.hostname or "", "{port}": str(parts.port or ""), "{number}": str(number)}
        out = []
        for arg in self.argv:
            for placeholder, value in values.items():
                arg = arg.replace(placeholder, value)
            out.append(arg)
        return out

    def restart(self, url: str, number: int) -> None:
        argv = self.command(url, number)
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise WorkerRestartFailed(f"worker {shown(url)}: `{' '.join(argv)}` did not end within {self.timeout_s:.0f} s") from exc
        if done.returncode != 0:
            tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            raise WorkerRestartFailed(f"worker {shown(url)}: `{' '.join(argv)}` exited {done.returncode}: {tail or 'no output'}")
