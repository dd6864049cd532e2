from __future__ import annotations

from lakebus_dagster.errors import UserError


class StackError(UserError, RuntimeError):
    """A stack step failed. The message names the service and, where there is one, its log file."""
