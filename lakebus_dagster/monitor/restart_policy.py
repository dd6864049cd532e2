"""When to restart a failed connector again, in the spirit of Strimzi's auto-restart.

Strimzi waits ``min(n*n + n, 60)`` minutes before restart number ``n + 1`` (0, 2, 6, 12, 20, ...)
and gives up after ``maxRestarts``: a task that keeps failing on the same record will not be
fixed by the eleventh restart, so after the cap lakebus stops restarting and escalates instead.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RestartPolicy:
    enabled: bool = True
    max_attempts: int = 5
    cap_minutes: float = 60.0
    #: multiplies every backoff; tests shrink it
    unit_seconds: float = 60.0

    def backoff_seconds(self, attempts_so_far: int) -> float:
        n = attempts_so_far
        return min(n * n + n, self.cap_minutes) * self.unit_seconds

    def due(self, attempts_so_far: int, last_restart_at: float | None, now: float) -> bool:
        if not self.enabled or attempts_so_far >= self.max_attempts:
            return False
        if last_restart_at is None:
            return True
        return now - last_restart_at >= self.backoff_seconds(attempts_so_far)

    def exhausted(self, attempts_so_far: int) -> bool:
        return self.enabled and attempts_so_far >= self.max_attempts
