"""The local stack's one error type: a step that failed, named with its service and log."""

from __future__ import annotations

from lakebus_dagster.errors import UserError


class StackError(UserError, RuntimeError):
    """A stack step failed. The message names the service and, where there is one, its log file."""
