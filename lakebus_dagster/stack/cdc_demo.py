"""The demo database's change generator on the local stack (``LAKEBUS_POSTGRES=on``): inserts,
updates and deletes in ``app.users`` / ``app.orders`` over the server's private socket, with progress.

    python -m lakebus_dagster.stack.cdc_demo --changes 200 [--seed 7]
"""

from __future__ import annotations

import argparse
import sys

from lakebus_dagster.cdc.demo import generate_changes


def main(argv: list[str] | None = None) -> int:
    from lakebus_dagster.settings import load_local_secrets
    from lakebus_dagster.stack.local_settings import load_stack_settings
    from lakebus_dagster.stack.postgres_service import superuser_dsn

    p = argparse.ArgumentParser(prog="python -m lakebus_dagster.stack.cdc_demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--changes", type=int, default=100, help="row changes to make (default 100)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: a new sequence each run)")
    args = p.parse_args(argv)
    settings = load_stack_settings()
    if not settings.capture.enabled:
        print("[cdc-demo] LAKEBUS_POSTGRES is off: the local stack runs no PostgreSQL (set LAKEBUS_POSTGRES=on, then "
              "`lakebus stack up`)", file=sys.stderr)
        return 2
    load_local_secrets(settings)
    counts = generate_changes(superuser_dsn(settings, settings.capture.db), args.changes, seed=args.seed)
    print(f"[cdc-demo] done: {counts.total} changes ({counts.describe()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
