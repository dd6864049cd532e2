"""The one error base the command lines recognise: :class:`UserError`, a message written for the user.

Why a base class in a module of its own: the command runner (:mod:`lakebus_dagster.commandline`)
turns the errors a user can fix into one line and exit 2, and it must know them without importing
the packages that raise them (the stack, the event SDK, the settings) — each of those is *below*
the command line and imports the runner for its ``python -m`` entry point. So the packages
subclass :class:`UserError` here, at the bottom of the import graph, and the runner catches the base.
"""

from __future__ import annotations


class UserError(Exception):
    """An error whose message is written for the user: which input, what is wrong, what to do."""


class CliError(UserError):
    """A bad input or an unreachable service, explained in one line (input, problem, what to do)."""
