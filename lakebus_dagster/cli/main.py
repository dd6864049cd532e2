"""``lakebus``: one command for the local stack, the Dagster UI, jobs, sample events and benchmarks.

Each subcommand is the module that does the work (``lakebus stack`` = ``python -m
lakebus_dagster.stack``, ...): the modules add their own arguments here through ``configure``, so
the console command and the module entry points cannot drift apart. Bad input exits 2 with one
line naming it; ``--debug`` anywhere on the line adds the traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

from lakebus_dagster.cli.common import parser, run_command, subparser

EXAMPLES = """\
  lakebus stack up && lakebus ui up          # the local stack, then the Dagster UI on :3000
  lakebus launch provision_lakebus           # a job, through the UI (shows up there like a click)
  lakebus generate --topic events --count 1000
  lakebus stack status                       # what runs, its memory, its log
  lakebus config --markdown                  # every LAKEBUS_* variable
  lakebus <command> --help                   # each command's options and examples
"""


def _config(args: argparse.Namespace) -> int:
    from lakebus_dagster import envvars
    from lakebus_dagster.settings import load_settings

    if args.markdown:
        sys.stdout.write(envvars.reference_markdown())
        return 0
    load_settings()  # checks every variable: a bad one exits 2 naming it
    for var in envvars.VARIABLES:
        value = envvars.raw(var.name)
        shown = "(set, hidden)" if var.secret and value else (value or "-")
        print(f"{var.name:<32} {shown}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from lakebus_dagster.cli.common import CliError
    from lakebus_dagster.settings import REPO_ROOT

    folder = REPO_ROOT / "benchmarks"
    if not (folder / "__main__.py").exists():
        raise CliError(f"bench: the benchmarks/ directory is not next to the package ({REPO_ROOT}); run from a checkout")
    available = sorted(p.stem for p in folder.glob("bench_*.py"))
    unknown = [name for name in args.names if name not in available]
    if unknown:
        raise CliError(f"bench: unknown benchmark {unknown[0]!r}; one of {', '.join(available)}")
    sys.path.insert(0, str(REPO_ROOT))
    from benchmarks.__main__ import main as bench_main

    return bench_main(args.names)


def _stack() -> ModuleType:
    from lakebus_dagster.stack import __main__ as module

    return module


def _ui() -> ModuleType:
    from lakebus_dagster.stack import dagster_ui

    return dagster_ui


def _launch() -> ModuleType:
    from lakebus_dagster.stack import launch

    return launch


def _demo() -> ModuleType:
    from lakebus_dagster.stack import demo

    return demo


def _generate() -> ModuleType:
    from lakebus_dagster.events import generate

    return generate


#: subcommand -> (one-line help, the module that configures and runs it). Only the chosen module
#: is imported, so `lakebus generate --count -1` answers in a fraction of a second instead of
#: first importing Dagster, pyiceberg and Spark's helpers for the other subcommands.
AREAS: dict[str, tuple[str, Callable[[], ModuleType]]] = {
    "stack": ("the local Kafka, Connect, catalog and S3 processes (start, stop, status, logs)", _stack),
    "ui": ("the Dagster UI (webserver + daemon) on the local stack", _ui),
    "launch": ("run a job through the Dagster UI and print its outcome and metadata", _launch),
    "demo": ("provision, send sample events, wait for the sink, build the DWS tables (what make demo runs)", _demo),
    "generate": ("send deterministic sample events to a Kafka topic", _generate),
}


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The ``lakebus`` parser; only the subcommand named in ``argv`` gets its full arguments."""
    chosen = next((a for a in argv if not a.startswith("-")), None)
    p = parser("lakebus", "One command for the local stack, the Dagster UI, jobs, sample events and benchmarks.", EXAMPLES)
    p.add_argument("--debug", action="store_true", help="on an error, print the traceback too (works anywhere on the line)")
    sub = p.add_subparsers(dest="area", metavar="{" + ",".join([*AREAS, "bench", "config"]) + "}")
    for name, (help_text, load) in AREAS.items():
        if name == chosen:
            module = load()
            module.configure(subparser(sub, name, help_text, module.EXAMPLES, description=module.__doc__))
        else:
            subparser(sub, name, help_text)
    bench = subparser(sub, "bench", "run the benchmarks (results appended to build/benchmarks.json)",
                      "  lakebus bench                       # all of them (needs the stack)\n"
                      "  lakebus bench bench_events_encode   # one, no services needed\n")
    bench.add_argument("names", nargs="*", metavar="NAME", help="benchmark modules (default: all)")
    bench.set_defaults(func=_bench)
    cfg = subparser(sub, "config", "check the LAKEBUS_* variables and print their values (secrets hidden)",
                    "  lakebus config\n  lakebus config --markdown > reference.md\n")
    cfg.add_argument("--markdown", action="store_true", help="print the configuration reference table instead")
    cfg.set_defaults(func=_config)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    return run_command(build_parser([a for a in args if a != "--debug"]), args)


if __name__ == "__main__":
    sys.exit(main())
