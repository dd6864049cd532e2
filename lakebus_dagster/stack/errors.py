from __future__ import annotations


class StackError(RuntimeError):
    """A stack step failed. The message names the service and, where there is one, its log file."""
