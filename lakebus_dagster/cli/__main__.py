"""``python -m lakebus_dagster.cli`` = the ``lakebus`` console command."""

import sys

from lakebus_dagster.cli.main import main

sys.exit(main())
