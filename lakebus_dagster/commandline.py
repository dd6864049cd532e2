"""What every lakebus command line shares: one-line errors, ``--debug``, parsers whose errors are one line.

Why: a new user's first contact with lakebus is a command line, and a 132-line traceback ending in
``TransportConnectionFailed`` does not say that the Dagster UI is simply not running. Every
command therefore runs through :func:`run_command`, which turns the errors a user can fix - a bad
argument, a bad environment variable, an unreachable service - into one line on stderr (which
input, what is wrong, what to do) and a non-zero exit. ``--debug`` (anywhere on the line) prints
the traceback as well. An error nobody anticipated is still reported (one line naming its type,
exit 1), never swallowed: ``--debug`` shows where it came from. The checked argument types are in
:mod:`lakebus_dagster.argtypes`.

Why here and not in :mod:`lakebus_dagster.cli`: the modules the CLI drives (``python -m
lakebus_dagster.stack``, the event generator, the demo) run through the same runner, and nothing
below the CLI may import it (issue 22). The errors it reports are every
:class:`~lakebus_dagster.errors.UserError`, so it imports none of the packages that raise them.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from lakebus_dagster.errors import UserError

#: exit codes: 2 = a bad input or an unreachable service (the message says which), 1 = a command
#: that ran and failed (a run that ended FAILURE, an undelivered event), 130 = interrupted
EXIT_USAGE, EXIT_FAILED, EXIT_INTERRUPTED = 2, 1, 130


class Parser(argparse.ArgumentParser):
    """``argparse`` whose errors are one line (no usage block) and point at ``--help``."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def parser(prog: str, doc: str | None, examples: str = "") -> Parser:
    """A :class:`Parser` with the module docstring as description and ``examples`` as epilog."""
    epilog = f"examples:\n{examples}" if examples else None
    return Parser(prog=prog, description=doc, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)


def subparser(sub: Any, name: str, help_text: str, examples: str = "", description: str | None = None) -> Parser:
    epilog = f"examples:\n{examples}" if examples else None
    p = sub.add_parser(name, help=help_text, description=description or help_text, epilog=epilog,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    # errors name the innermost command ("lakebus generate: error: ..."); a command group given no
    # command ("lakebus stack") prints its own help, not the top-level one
    p.set_defaults(_prog=p.prog, _parser=p)
    return p


# -- running ------------------------------------------------------------------------------------
def run_command(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and call the chosen command (``args.func(args)``) with lakebus's error policy."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args_in
    args = parser.parse_args([a for a in args_in if a != "--debug"])
    func: Callable[[argparse.Namespace], int | None] | None = getattr(args, "func", None)
    prog = getattr(args, "_prog", parser.prog)
    if func is None:
        getattr(args, "_parser", parser).print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(func(args) or 0)
    except BrokenPipeError:  # `lakebus ... | head`: the reader left; nothing to report
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps the interpreter's final flush quiet
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except UserError as exc:  # CliError, SettingsError, StackError, EventError
        if debug:
            traceback.print_exc()
        first, *rest = str(exc).strip().splitlines() or [type(exc).__name__]
        # a failed `stack up` carries the service's log tail: context after the one error line
        print(f"{prog}: error: {first}", *rest, sep="\n", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - reported (type + message), exit 1; --debug shows where
        if debug:
            traceback.print_exc()
        print(f"{prog}: unexpected {type(exc).__name__}: {_one_line(exc)} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return EXIT_FAILED


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
