"""The local stack: Kafka, Kafka Connect (+ Iceberg sink), Iceberg REST catalog, S3, Spark - as local JVMs.

``lakebus stack up|down|restart <service>|restart-worker <url>|status|logs|fetch`` (also ``python -m lakebus_dagster.stack``).
``LAKEBUS_PROFILE`` picks its shape: ``single`` (default), ``cluster`` (3 brokers, 2 Connect workers)
or ``secured`` (SASL/SCRAM over TLS + ACLs, Connect REST over https with basic auth); each keeps its own state dir.
"""

from __future__ import annotations

import argparse
import sys

from lakebus_dagster.argtypes import non_negative_int
from lakebus_dagster.commandline import parser, run_command, subparser
from lakebus_dagster.stack import manager
from lakebus_dagster.stack.local_settings import load_stack_settings

EXAMPLES = """\
  lakebus stack up                 # start what is not running, wait until healthy (16-28 s)
  lakebus stack status             # state, pid, port, memory and log of each service and the Dagster UI
  lakebus stack logs connect -n 100
  lakebus stack restart connect    # e.g. after lakebus's Connect plugin changed
  lakebus stack down               # stops the Dagster UI too
  LAKEBUS_PROFILE=cluster lakebus stack up   # 3 KRaft brokers + 2 Connect workers (stop the default stack first)
"""

LOG_SERVICES = (*manager.SERVICE_ORDER, "dagster")


def configure(p: argparse.ArgumentParser) -> None:
    """Add the stack's subcommands to ``p`` (shared by ``lakebus stack`` and ``python -m``)."""
    sub = p.add_subparsers(dest="command", metavar="{up,down,restart,restart-worker,status,logs,fetch}")
    subparser(sub, "up", "start every service that is not running and wait until all are healthy").set_defaults(func=_up)
    subparser(sub, "down", "stop the Dagster UI and every service this stack started (nothing else)").set_defaults(func=_down)
    rs = subparser(sub, "restart", "stop one service and start it again (the others keep running)",
                   "  lakebus stack restart connect\n")
    rs.add_argument("service", choices=manager.SERVICE_ORDER)
    rs.set_defaults(func=_restart)
    rw = subparser(sub, "restart-worker", "restart the Connect worker serving URL (the rolling restart's local restarter)",
                   "  lakebus stack restart-worker http://127.0.0.1:8083\n")
    rw.add_argument("url", help="the worker's REST URL, as configured (LAKEBUS_CONNECT_URL or the stack's)")
    rw.add_argument("--stopped-s", type=non_negative_int, default=0, metavar="S",
                    help="keep the worker stopped S seconds before starting it (rehearse a pod rescheduled slowly: "
                    "its tasks run on the other workers meanwhile and move back when it returns)")
    rw.set_defaults(func=_restart_worker)
    st = subparser(sub, "status", "each service's state, pid, port, resident memory and log; the Dagster UI too",
                   "  lakebus stack status\n  lakebus stack status --check && echo all healthy\n")
    st.add_argument("--check", action="store_true", help="exit 1 unless every service of the profile is healthy (the UI is not required)")
    st.set_defaults(func=_status)
    lg = subparser(sub, "logs", "print the tail of the services' logs (and the Dagster UI's)",
                   "  lakebus stack logs              # every service, 40 lines each\n  lakebus stack logs kafka dagster -n 200\n")
    lg.add_argument("services", nargs="*", metavar="SERVICE", help=f"one of {', '.join(LOG_SERVICES)} (default: all)")
    lg.add_argument("-n", "--lines", type=non_negative_int, default=40, help="lines per log (0 prints nothing)")
    lg.set_defaults(func=_logs)
    subparser(sub, "fetch", "fetch the jars through Maven (up does this when needed)").set_defaults(func=_fetch)


def _up(args: argparse.Namespace) -> int:
    manager.up(load_stack_settings())
    return 0


def _down(args: argparse.Namespace) -> int:
    manager.down(load_stack_settings())
    return 0


def _restart(args: argparse.Namespace) -> int:
    manager.restart(load_stack_settings(), args.service)
    return 0


def _restart_worker(args: argparse.Namespace) -> int:
    manager.restart_worker(load_stack_settings(), args.url, args.stopped_s)
    return 0


def _status(args: argparse.Namespace) -> int:
    from lakebus_dagster.stack import dagster_ui

    settings = load_stack_settings()
    states = manager.status(settings)
    manager.print_status([*states, dagster_ui.state(settings)])
    return 1 if args.check and not all(s.healthy for s in states) else 0


def _logs(args: argparse.Namespace) -> int:
    from lakebus_dagster.errors import CliError

    unknown = [s for s in args.services if s not in LOG_SERVICES]
    if unknown:
        raise CliError(f"unknown service {unknown[0]!r}; one of {', '.join(LOG_SERVICES)}")
    manager.logs(load_stack_settings(), args.services, args.lines)
    return 0


def _fetch(args: argparse.Namespace) -> int:
    from lakebus_dagster.stack.jars import ensure_jars

    print(ensure_jars(load_stack_settings()))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = parser("python -m lakebus_dagster.stack", __doc__, EXAMPLES)
    configure(p)
    return run_command(p, argv)


if __name__ == "__main__":
    sys.exit(main())
