"""``python -m lakebus_dagster.stack up|down|restart <service>|status|logs|fetch``."""

from __future__ import annotations

import argparse
import sys

from lakebus_dagster.settings import load_settings
from lakebus_dagster.stack import manager
from lakebus_dagster.stack.errors import StackError
from lakebus_dagster.stack.jars import ensure_jars


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lakebus_dagster.stack", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up", help="start every service that is not running and wait until all are healthy")
    sub.add_parser("down", help="stop every service this stack started")
    rs = sub.add_parser("restart", help="stop one service and start it again (the others keep running)")
    rs.add_argument("service", choices=manager.SERVICE_ORDER)
    st = sub.add_parser("status", help="show each service's state, pid, port and resident memory")
    st.add_argument("--check", action="store_true", help="exit 1 unless every service is healthy")
    lg = sub.add_parser("logs", help="print the tail of the services' logs")
    lg.add_argument("services", nargs="*", choices=[*manager.SERVICE_ORDER, []], default=[])
    lg.add_argument("-n", "--lines", type=int, default=40)
    sub.add_parser("fetch", help="fetch the jars through Maven (up does this when needed)")
    args = parser.parse_args(argv)

    settings = load_settings()
    try:
        if args.command == "up":
            manager.up(settings)
        elif args.command == "down":
            manager.down(settings)
        elif args.command == "restart":
            manager.restart(settings, args.service)
        elif args.command == "status":
            states = manager.status(settings)
            manager.print_status(states)
            if args.check and not all(s.healthy for s in states):
                return 1
        elif args.command == "logs":
            manager.logs(settings, args.services, args.lines)
        elif args.command == "fetch":
            print(ensure_jars(settings))
    except StackError as exc:
        print(f"[stack] ERROR {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
