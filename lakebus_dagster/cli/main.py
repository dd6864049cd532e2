"""``lakebus``: one command for the local stack, the Dagster UI, jobs, sample events and benchmarks.

Each subcommand is the module that does the work (``lakebus stack`` = ``python -m
lakebus_dagster.stack``, ...): the modules add their own arguments here through ``configure``, so
the console command and the module entry points cannot drift apart. Bad input exits 2 with one
line naming it; ``--debug`` anywhere on the line adds the traceback.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable, Sequence
from types import ModuleType

from lakebus_dagster.commandline import parser, run_command, subparser

EXAMPLES = """\
  lakebus stack up && lakebus ui up          # the local stack, then the Dagster UI on :3000
  lakebus status                             # services, UI, sink connector, lag, last commit, incidents
  lakebus jobs                               # what can be launched
  lakebus launch provision_lakebus           # a job, through the UI (shows up there like a click)
  lakebus generate --topic events --count 1000
  lakebus connectors events-iceberg-sink      # its tasks, config drift and lag per partition
  lakebus stack status                       # what runs, its memory, its log, its metrics URL
  lakebus metrics                            # lakebus's health for Prometheus on :3005/metrics
  lakebus config --markdown                  # every LAKEBUS_* variable
  lakebus deploy render --check              # deploy/ is what deploy/values.yaml gives
  lakebus <command> --help                   # each command's options and examples
"""


def _config(args: argparse.Namespace) -> int:
    from lakebus_dagster import envvars
    from lakebus_dagster.cli.config_report import check_all, file_only_values
    from lakebus_dagster.setting_readers import SettingsReader
    from lakebus_dagster.stack.local_settings import load_stack_settings

    if args.markdown:
        sys.stdout.write(envvars.reference_markdown())
        return 0
    problems, loaded = check_all(load_stack_settings)  # every bad value (the stack's too), not only the first
    if problems:
        prog = getattr(args, "_prog", "lakebus config")
        for line in problems:
            print(f"{prog}: error: {line}", file=sys.stderr)
        return 2
    print(f"{'config file':<40} {loaded.path if loaded else '(none)'}")
    reader = SettingsReader()
    for var in envvars.VARIABLES:
        value = reader.raw(var.name)
        shown = "(set, hidden)" if var.secret and value else (value or "-")
        print(f"{var.name:<40} {shown:<30} {reader.source(var.name)}")
    with warnings.catch_warnings():  # importing the definitions' modules warns about Dagster's beta APIs
        warnings.simplefilter("ignore")
        file_only = file_only_values(loaded)
    for name, value, source in file_only:
        print(f"{name:<40} {value!s:<30} {source}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    """Run ``python -m benchmarks NAME ...`` from the checkout, as a child process.

    Why a child and not an import: ``benchmarks/`` is a folder of the repository, not part of the
    installed package, so the package must not import it (issue 22: ``cli/`` reaches what it drives
    without a package edge). The editable install (``make install``) keeps the package in the
    checkout, so the folder is found beside it; the names are checked here, from the file names,
    so a typo is one line without starting the runner.
    """
    import subprocess

    from lakebus_dagster.errors import CliError
    from lakebus_dagster.settings import REPO_ROOT

    folder = REPO_ROOT / "benchmarks"
    if not (folder / "__main__.py").exists():
        raise CliError(f"the benchmarks/ directory is not next to the package ({REPO_ROOT}); run from a checkout")
    available = sorted(p.stem for p in folder.glob("bench_*.py"))
    unknown = [name for name in args.names if name not in available]
    if unknown:
        raise CliError(f"unknown benchmark {unknown[0]!r}; available: {', '.join(available)}")
    return subprocess.run([sys.executable, "-m", "benchmarks", *args.names], cwd=REPO_ROOT, check=False).returncode


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


def _status() -> ModuleType:
    from lakebus_dagster.cli import status

    return status


def _metrics() -> ModuleType:
    from lakebus_dagster.cli import metrics

    return metrics


def _connectors() -> ModuleType:
    from lakebus_dagster.cli import connectors

    return connectors


def _deploy() -> ModuleType:
    from lakebus_dagster.deployment import render

    return render


def _jobs() -> ModuleType:
    from lakebus_dagster.cli import jobs

    return jobs


#: what each command's --help says above its options: written for the user (the modules' docstrings
#: are for their readers: reST markup, `python -m` entry points, notes on tests)
DESCRIPTIONS = {
    "stack": """\
The local stack: Kafka, Kafka Connect with the Iceberg sink, the Iceberg REST catalog, S3 and
Spark, as local processes started in the background.

LAKEBUS_PROFILE picks its shape: single (default), cluster (3 brokers, 2 Connect workers) or
secured (SASL/SCRAM + ACLs, Connect REST basic auth); each profile keeps its own state directory.
""",
    "ui": """\
The Dagster UI on the local stack: the webserver and the daemon (schedules, sensors, run queue),
in the background, started at most once. Its instance lives in <state>/dagster_home, so runs and
sensor cursors survive a restart; its dagster.yaml is deploy/dagster.yaml with a declared overlay
(SQLite storage, local run logs, the `spark` pool at 2), rewritten on every `up`.

`up` exits 2 with one line when the port (LAKEBUS_DAGSTER_PORT, default 3000) is taken by
another process.
""",
    "launch": """\
Launch a job on the running Dagster UI the way a click does (the webserver queues the run, the
daemon starts it), wait for it and print its outcome and metadata.

Exit 0 when the run succeeded, 1 when it failed or was still going after --timeout (it goes on
in Dagster: the command prints the run's page), 2 on bad input or when the UI is not running.
""",
    "demo": """\
The whole pipeline on the running Dagster UI: provision the bus, send sample events (only while
the bus topic is empty, so a rerun never duplicates them), wait until the sink has written them
to the ODS tables, then build the DWS tables of the demo days. Every step is a run launched
through the UI, so it shows up there like a click would.

Exit 0 when every run succeeded, 1 when one failed, 2 on bad input, when the UI is not running,
or when the offset ledger does not account for every record on the bus within --timeout (one line
naming what is missing; a rerun does not resend the events).
""",
    "generate": """\
Send deterministic sample events to a Kafka topic (the same seed sends the same events).

--topic has no default: the bus topic is production data, so writing to it is always named.
Without --rate events go as fast as the producer accepts; --duration S --rate R sends S*R events
paced at R per second. An unreachable broker or a missing topic fails at once (5 s). Prints a
progress line every --progress-percent % or --progress-seconds s and a summary; exit 1 if any
event was not delivered.
""",
}

#: subcommand -> (one-line help, the module that configures and runs it). Only the chosen module
#: is imported, so `lakebus generate --count -1` answers in a fraction of a second instead of
#: first importing Dagster, pyiceberg and Spark's helpers for the other subcommands.
AREAS: dict[str, tuple[str, Callable[[], ModuleType]]] = {
    "status": ("one screen of the whole system: services, UI, sink connector, lag, last commit, incidents", _status),
    "stack": ("the local Kafka, Connect, catalog and S3 processes (start, stop, status, logs)", _stack),
    "ui": ("the Dagster UI (webserver + daemon) on the local stack", _ui),
    "jobs": ("list the code location's jobs and what each does (no UI needed)", _jobs),
    "launch": ("run a job through the Dagster UI and print its outcome and metadata", _launch),
    "metrics": ("serve lakebus's health as Prometheus gauges (sink lag, commit ages, connector state)", _metrics),
    "connectors": ("the Kafka Connect connectors; one connector's tasks, config drift and lag", _connectors),
    "demo": ("provision, send sample events, wait for the sink, build the DWS tables (what make demo runs)", _demo),
    "deploy": ("render deploy/'s files from deploy/values.yaml (`lakebus deploy render [--check]`)", _deploy),
    "generate": ("send deterministic sample events to a Kafka topic", _generate),
}


class _Version(argparse.Action):
    """``--version``: computed only when asked (package metadata, no imports of the packages)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print lakebus's version and those of dagster, pyspark and confluent-kafka")

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        print(version_line())
        parser.exit(0)


def version_line() -> str:
    from importlib.metadata import PackageNotFoundError, version

    def of(dist: str) -> str:
        try:
            return version(dist)
        except PackageNotFoundError:
            return "not installed"

    deps = ", ".join(f"{name} {of(name)}" for name in ("dagster", "pyspark", "confluent-kafka"))
    return f"lakebus {of('lakebus_dagster')} ({deps})"


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The ``lakebus`` parser; only the subcommand named in ``argv`` gets its full arguments."""
    chosen = next((a for a in argv if not a.startswith("-")), None)
    p = parser("lakebus", "One command for the local stack, the Dagster UI, jobs, sample events and benchmarks.", EXAMPLES)
    p.add_argument("--debug", action="store_true", help="on an error, print the traceback too (works anywhere on the line)")
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="area", metavar="{" + ",".join([*AREAS, "bench", "config"]) + "}")
    for name, (help_text, load) in AREAS.items():
        if name == chosen:
            module = load()
            description = DESCRIPTIONS.get(name) or getattr(module, "DESCRIPTION", None) or help_text
            module.configure(subparser(sub, name, help_text, module.EXAMPLES, description=description))
        else:
            subparser(sub, name, help_text)
    bench = subparser(sub, "bench", "run the benchmarks (results appended to build/benchmarks.json)",
                      "  lakebus bench                       # all of them (needs the stack)\n"
                      "  lakebus bench bench_events_encode   # one, no services needed\n")
    bench.add_argument("names", nargs="*", metavar="NAME", help="benchmark modules (default: all)")
    bench.set_defaults(func=_bench)
    cfg = subparser(sub, "config", "check every setting (LAKEBUS_* variables, the LAKEBUS_CONFIG file) and print "
                    "each value with its source (secrets hidden)",
                    "  lakebus config\n  lakebus config --markdown > reference.md\n")
    cfg.add_argument("--markdown", action="store_true", help="print the configuration reference table instead")
    cfg.set_defaults(func=_config)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    return run_command(build_parser([a for a in args if a != "--debug"]), args)


if __name__ == "__main__":
    sys.exit(main())
