"""The deployment's config file (``LAKEBUS_CONFIG``, lakebus_dagster/config_file.py): an environment
variable wins over the file, the file over the default; secrets and unknown keys are refused with
one line naming the key; ``lakebus config`` reports every bad value (one line each, exit 2) or
every effective value with its source; the monitoring section reaches the MonitoringPolicyResource
the code location builds, the lakehouse sections its retention and freshness limit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lakebus_dagster import config_file, envvars
from lakebus_dagster.cli.config_report import check_all
from lakebus_dagster.config_file import ConfigFileError
from lakebus_dagster.settings import SettingsReader, load_settings
from lakebus_dagster.stack.local_settings import load_stack_settings

LAKEBUS = Path(sys.executable).parent / "lakebus"
ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str, name: str = "deploy.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def run(argv: list[str], tmp_path: Path, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    """``argv`` with ``env`` on top of a clean LAKEBUS_* environment and a temp state dir."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("LAKEBUS_")}
    base["LAKEBUS_STATE_DIR"] = str(tmp_path / "state")
    return subprocess.run(argv, env={**base, **env}, capture_output=True, text=True, timeout=120, cwd=cwd or tmp_path)


def values(stdout: str) -> dict[str, tuple[str, str]]:
    """``lakebus config``'s lines as name -> (value, source)."""
    rows = {}
    for line in stdout.splitlines():
        name, *rest = line.split()
        if len(rest) >= 2:
            rows[name] = (" ".join(rest[:-1]), rest[-1])
    return rows


# -- in process: the readers ----------------------------------------------------------------------
def test_environment_wins_over_the_file_which_wins_over_the_default(clean_env, tmp_path):
    path = write(tmp_path, """\
        settings:
          LAKEBUS_NAMESPACE: prod
          LAKEBUS_KAFKA_PORT: 29092
    """)
    clean_env.setenv("LAKEBUS_CONFIG", str(path))
    clean_env.setenv("LAKEBUS_KAFKA_PORT", "39092")
    reader = SettingsReader()
    settings = load_settings(reader)
    assert settings.ports.kafka == 39092 and reader.source("LAKEBUS_KAFKA_PORT") == "env"
    assert settings.lake.namespace == "prod" and reader.source("LAKEBUS_NAMESPACE") == f"file:{path}"
    assert settings.host == "127.0.0.1" and reader.source("LAKEBUS_HOST") == "default"
    clean_env.delenv("LAKEBUS_KAFKA_PORT")
    assert load_settings().ports.kafka == 29092
    clean_env.setenv("LAKEBUS_NAMESPACE", "")  # empty = unset: the file's value
    assert load_settings().lake.namespace == "prod"


def test_without_lakebus_config_the_working_directory_lakebus_yaml_is_read(clean_env, tmp_path):
    assert config_file.parsed() is None and load_settings().lake.namespace == "demo"
    write(tmp_path, "settings: {LAKEBUS_NAMESPACE: fromcwd}\n", name="lakebus.yaml")
    assert load_settings().lake.namespace == "fromcwd"


def test_a_missing_file_named_by_lakebus_config_is_an_error(clean_env, tmp_path):
    clean_env.setenv("LAKEBUS_CONFIG", str(tmp_path / "nope.yaml"))
    with pytest.raises(ConfigFileError, match="LAKEBUS_CONFIG=.*nope.yaml.* is not a file"):
        load_settings()


@pytest.mark.parametrize("secret", [v.name for v in envvars.VARIABLES if v.secret])
def test_every_secret_is_refused_in_the_file(clean_env, tmp_path, secret):
    clean_env.setenv("LAKEBUS_CONFIG", str(write(tmp_path, f"settings: {{{secret}: hunter2-value}}\n")))
    with pytest.raises(ConfigFileError) as caught:
        load_settings()
    message = str(caught.value)
    assert secret in message and "secret" in message and "environment" in message
    assert "hunter2" not in message and "\n" not in message


def test_the_lakehouse_limits_come_from_the_settings_load(clean_env, tmp_path):
    from datetime import timedelta

    from lakebus_dagster.defs.lakehouse.constants import LakehouseLimits

    assert LakehouseLimits.of(load_settings().deployment_file) == LakehouseLimits()  # no file: the shipped values
    assert (LakehouseLimits().ods_max_commit_age, LakehouseLimits().retention_days) == (timedelta(hours=1), 3)
    clean_env.setenv("LAKEBUS_CONFIG", str(write(tmp_path, """\
        maintenance: {retention_days: 7}
        freshness: {ods_max_commit_age_minutes: 30}
        schedules: {dws_hourly_schedule: {cron: "20 * * * *"}}
    """)))
    assert LakehouseLimits.of(load_settings().deployment_file) == LakehouseLimits(
        ods_max_commit_age=timedelta(minutes=30), retention_days=7, schedule_crons={"dws_hourly_schedule": "20 * * * *"})



def test_the_collecting_mode_is_the_readers_own_not_the_process(clean_env, tmp_path):
    """``lakebus config``'s reader skips the file's bad key and reads a bad variable as overridden;
    a reader made meanwhile (another load in the same process) still raises on both (issue 32.3: no
    module-level switch)."""
    clean_env.setenv("LAKEBUS_CONFIG", str(write(tmp_path, "settings: {LAKEBUS_NAMSPACE: prod}\n")))
    clean_env.setenv("LAKEBUS_KAFKA_PORT", "abc")
    collecting = SettingsReader(collecting=True)
    collecting.overrides["LAKEBUS_KAFKA_PORT"] = envvars.BY_NAME["LAKEBUS_KAFKA_PORT"].default
    settings = load_settings(collecting)
    assert settings.ports.kafka == int(envvars.BY_NAME["LAKEBUS_KAFKA_PORT"].default)
    assert settings.deployment_file is not None and settings.deployment_file.problems
    with pytest.raises(ConfigFileError, match="LAKEBUS_NAMSPACE"):
        load_settings()
    clean_env.delenv("LAKEBUS_CONFIG")
    with pytest.raises(envvars.SettingsError, match="^LAKEBUS_KAFKA_PORT='abc' is not a port"):
        load_settings(SettingsReader())

# -- the command ----------------------------------------------------------------------------------
def test_lakebus_config_prints_each_value_with_its_source(tmp_path):
    path = write(tmp_path, """\
        settings:
          LAKEBUS_NAMESPACE: prod
          LAKEBUS_KAFKA_PORT: 29092
        monitoring:
          max_restarts: 2
        maintenance:
          retention_days: 7
    """)
    proc = run([str(LAKEBUS), "config"], tmp_path, LAKEBUS_CONFIG=str(path), LAKEBUS_KAFKA_PORT="39092",
               LAKEBUS_S3_SECRET_ACCESS_KEY="hunter2-value")
    assert proc.returncode == 0, proc.stderr
    rows = values(proc.stdout)
    assert rows["LAKEBUS_KAFKA_PORT"] == ("39092", "env")
    assert rows["LAKEBUS_NAMESPACE"] == ("prod", f"file:{path}")
    assert rows["LAKEBUS_HOST"] == ("127.0.0.1", "default")
    assert rows["LAKEBUS_S3_SECRET_ACCESS_KEY"] == ("(set, hidden)", "env") and "hunter2" not in proc.stdout
    assert rows["monitoring.max_restarts"] == ("2", f"file:{path}")
    assert rows["monitoring.auto_restart"] == ("True", "default")
    assert rows["maintenance.retention_days"] == ("7", f"file:{path}")
    assert rows["freshness.ods_max_commit_age_minutes"] == ("60.0", "default")


def test_lakebus_config_names_a_secret_in_the_file_without_echoing_it(tmp_path):
    path = write(tmp_path, "settings:\n  LAKEBUS_S3_ACCESS_KEY_ID: hunter2-value\n")
    proc = run([str(LAKEBUS), "config"], tmp_path, LAKEBUS_CONFIG=str(path))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "LAKEBUS_S3_ACCESS_KEY_ID" in lines[0] and "secret" in lines[0] and "environment" in lines[0]
    assert "hunter2" not in proc.stderr + proc.stdout


def test_lakebus_config_names_unknown_keys_and_the_closest_known_one(tmp_path):
    path = write(tmp_path, """\
        settings: {LAKEBUS_NAMSPACE: prod}
        monitoring: {auto_restrt: false}
        maintenance: {retention_dayz: 3}
        freshnes: {}
    """)
    proc = run([str(LAKEBUS), "config"], tmp_path, LAKEBUS_CONFIG=str(path))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 4, proc.stderr
    for unknown, known in [("LAKEBUS_NAMSPACE", "LAKEBUS_NAMESPACE"), ("auto_restrt", "auto_restart"),
                           ("retention_dayz", "retention_days"), ("freshnes", "freshness")]:
        assert any(unknown in line and f"did you mean {known}?" in line for line in lines), (unknown, lines)
    assert "Traceback" not in proc.stderr


def test_lakebus_config_reports_every_bad_value_one_line_each(tmp_path):
    # one bad value from the environment, one from the file, one in the monitoring section
    path = write(tmp_path, """\
        settings: {LAKEBUS_S3_PORT: 99999}
        monitoring: {stall_commit_intervals: 0}
    """)
    proc = run([str(LAKEBUS), "config"], tmp_path, LAKEBUS_CONFIG=str(path), LAKEBUS_KAFKA_HEAP="lots")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 3, proc.stderr
    assert any("LAKEBUS_KAFKA_HEAP='lots'" in line and "unset it" in line for line in lines), lines
    assert any("LAKEBUS_S3_PORT='99999'" in line and f"remove it from {path}" in line for line in lines), lines
    assert any("monitoring.stall_commit_intervals=0" in line for line in lines), lines
    assert proc.stdout == ""


def test_two_bad_environment_variables_are_two_lines(tmp_path):
    proc = run([str(LAKEBUS), "config"], tmp_path, LAKEBUS_KAFKA_PORT="abc", LAKEBUS_ALERT_SINK="email")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 2, proc.stderr
    assert "LAKEBUS_KAFKA_PORT" in proc.stderr and "LAKEBUS_ALERT_SINK" in proc.stderr


def test_the_code_location_builds_the_monitoring_policy_and_limits_from_the_file(tmp_path):
    path = write(tmp_path, """\
        monitoring:
          auto_quarantine: false
          max_restarts: 2
          backoff_unit_seconds: 5
        maintenance: {retention_days: 7}
        freshness: {ods_max_commit_age_minutes: 30}
    """)
    script = textwrap.dedent("""\
        import json
        from lakebus_dagster.definitions import defs
        from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource
        policy = defs.resources["monitoring_policy"]
        print(json.dumps({"policy": {k: getattr(policy, k) for k in MonitoringPolicyResource.model_fields},
                          "shipped": MonitoringPolicyResource().max_restarts,
                          "retention": defs.resolve_job_def("lakehouse_retention").description,
                          "observe": defs.resolve_job_def("observe_ods_job").description}))
    """)
    proc = run([sys.executable, "-c", script], tmp_path, cwd=ROOT, LAKEBUS_CONFIG=str(path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["policy"]["auto_quarantine"] is False
    assert seen["policy"]["max_restarts"] == 2 and seen["policy"]["backoff_unit_seconds"] == 5.0
    assert seen["policy"]["auto_restart"] is True and seen["policy"]["stall_commit_intervals"] == 6  # not in the file
    assert seen["shipped"] == 5  # MonitoringPolicyResource() stays the shipped defaults
    assert "and 7 days before it" in seen["retention"] and "nothing was committed for 0.5 h" in seen["observe"]


def test_a_bad_monitoring_value_stops_the_code_location_naming_it(tmp_path):
    path = write(tmp_path, "monitoring: {max_restarts: many}\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LAKEBUS_CONFIG", str(path))
        with pytest.raises(ConfigFileError, match=r"monitoring\.max_restarts='many' is not an integer"):
            from lakebus_dagster.defs.monitoring.policy import monitoring_policy

            monitoring_policy(load_settings())


def test_the_example_file_is_valid_and_shows_every_section_and_monitoring_field(clean_env):
    from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource

    example = ROOT / "lakebus.example.yaml"
    clean_env.setenv("LAKEBUS_CONFIG", str(example))
    clean_env.setenv("LAKEBUS_ALERT_WEBHOOK_URL", "https://hooks.example/T0")  # the example's sink is a webhook
    problems, loaded = check_all(load_stack_settings)
    assert problems == [] and loaded is not None
    assert set(loaded.monitoring) == set(MonitoringPolicyResource.model_fields)
    assert loaded.settings and loaded.maintenance and loaded.freshness
    assert "lakebus.example.yaml" in (ROOT / "docs" / "configuration.md").read_text()
