"""A deployment moves a lakehouse schedule with its config file (``schedules: {name: {cron: ...}}``):
the code location loads with the new cron, a partitioned schedule still asks for its latest complete
partition, a misspelt name or a bad cron is one line naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

PROBE = textwrap.dedent("""
    import json, warnings
    warnings.simplefilter("ignore")
    from datetime import datetime, timezone
    import dagster as dg
    from lakebus_dagster.definitions import defs
    at = datetime(2025, 11, 25, 10, 3, tzinfo=timezone.utc)
    out = {}
    for name in ("dws_hourly_schedule", "dws_daily_schedule", "observe_ods_schedule", "lakehouse_maintenance_schedule"):
        s = defs.resolve_schedule_def(name)
        requests = s.evaluate_tick(dg.build_schedule_context(scheduled_execution_time=at, repository_def=defs.get_repository_def())).run_requests
        out[name] = [s.cron_schedule, [r.partition_key for r in requests]]
    print(json.dumps(out))
""")


def _load(tmp_path, config: str) -> subprocess.CompletedProcess:
    path = tmp_path / "lakebus.yaml"
    path.write_text(config)
    env = {**os.environ, "LAKEBUS_CONFIG": str(path), "LAKEBUS_S3_ACCESS_KEY_ID": "k", "LAKEBUS_S3_SECRET_ACCESS_KEY": "s"}
    return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=120)


def test_the_file_moves_schedules_and_partitions_follow(tmp_path):
    done = _load(tmp_path, "schedules:\n  dws_hourly_schedule: {cron: '*/5 * * * *'}\n  dws_daily_schedule: {cron: '* * * * *'}\n")
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["dws_hourly_schedule"] == ["*/5 * * * *", ["2025-11-25-09:00"]]
    assert seen["dws_daily_schedule"] == ["* * * * *", ["2025-11-24"]]
    assert seen["observe_ods_schedule"][0] == "*/10 * * * *" and seen["lakehouse_maintenance_schedule"][0] == "0 4 * * *"


def test_a_misspelt_schedule_or_a_bad_cron_is_named(tmp_path):
    done = _load(tmp_path, "schedules:\n  dws_hourly_schedul: {cron: '* * * * *'}\n")
    assert done.returncode != 0
    assert "schedules.dws_hourly_schedul is not a lakehouse schedule (did you mean dws_hourly_schedule?)" in done.stderr
    done = _load(tmp_path, "schedules:\n  dws_hourly_schedule: {cron: 'every minute'}\n")
    assert done.returncode != 0 and "schedules.dws_hourly_schedule must be {cron:" in done.stderr
