"""What ``lakebus config`` reports: every problem of the configuration at once, and the values only
the config file can set.

Why in cli/: the report reads the settings (the stack's loader reads every variable), the config
file and the definitions' defaults; only the command line sits above all three, so none of them
imports another to make the report (issue 22: no module cycles).
"""

from __future__ import annotations

from typing import Any, Callable

from lakebus_dagster import config_file, envvars
from lakebus_dagster.config_file import ConfigFileError, LoadedConfig
from lakebus_dagster.envvars import SettingsError
from lakebus_dagster.setting_readers import SettingsReader


def check_all(load_settings: Callable[[SettingsReader], object]) -> tuple[list[str], LoadedConfig | None]:
    """Every problem of the configuration, one line each (the file's keys, then each bad setting
    ``load_settings`` reads), and the file read (None when there is none). What ``lakebus config``
    prints before exiting 2; it passes the stack's loader, which reads every variable, and the loader
    reads through a reader that collects (the file's bad keys are skipped instead of raising)."""
    try:
        path = config_file.config_path()
    except ConfigFileError as exc:
        return [str(exc)], None
    loaded = config_file.read(path) if path else None
    problems = list(loaded.problems) if loaded else []
    # imported only now: the definitions' packages are imported only for the report
    from lakebus_dagster.defs.monitoring.policy import check_monitoring

    if loaded is not None:
        problems += check_monitoring(loaded.monitoring, loaded.path)
    problems += _each_bad_setting(load_settings, SettingsReader(collecting=True))
    return problems, loaded


def _each_bad_setting(load_settings: Callable[[SettingsReader], object], reader: SettingsReader) -> list[str]:
    """Load again and again, each bad variable read as its default the next time, until it loads."""
    problems: list[str] = []
    seen: set[str] = set()
    for _ in range(len(envvars.VARIABLES) + 1):
        try:
            load_settings(reader)
            break
        except SettingsError as exc:
            name = getattr(exc, "variable", "")
            if name in seen:
                break  # the same variable again, now read as its default: a consequence, reported already
            problems.append(str(exc))
            if name not in envvars.BY_NAME:
                break
            seen.add(name)
            # read the rest as if this one had its default: the next load reports the next problem
            reader.overrides[name] = envvars.BY_NAME[name].default
    return problems


def file_only_values(loaded: LoadedConfig | None) -> list[tuple[str, Any, str]]:
    """(``section.key``, effective value, source) of every setting that only the file can set."""
    from lakebus_dagster.defs.lakehouse.constants import DEFAULT_ODS_MAX_COMMIT_AGE, DEFAULT_RETENTION_DAYS
    from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource

    source = loaded.source if loaded else "default"
    given: dict[str, dict[str, Any]] = {
        "monitoring": loaded.monitoring if loaded else {},
        "maintenance": loaded.maintenance if loaded else {},
        "freshness": loaded.freshness if loaded else {},
    }
    defaults: dict[str, dict[str, Any]] = {
        "monitoring": {name: f.default for name, f in MonitoringPolicyResource.model_fields.items()},
        "maintenance": {"retention_days": DEFAULT_RETENTION_DAYS},
        "freshness": {"ods_max_commit_age_minutes": DEFAULT_ODS_MAX_COMMIT_AGE.total_seconds() / 60},
    }
    rows = []
    for section, values in defaults.items():
        for key, default in values.items():
            if key in given[section]:
                rows.append((f"{section}.{key}", given[section][key], source))
            else:
                rows.append((f"{section}.{key}", default, "default"))
    return rows
