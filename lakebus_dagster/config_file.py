"""The deployment's declared configuration: one YAML file, ``LAKEBUS_CONFIG`` (see docs/configuration.md).

Why a file beside the environment variables: a deployment's settings are reviewed and versioned
together, and some of them (the monitoring policy, retention, the ODS freshness limit) are not
environment variables at all. The file holds

* ``settings:`` the ``LAKEBUS_*`` variables of :mod:`lakebus_dagster.envvars` by name; an environment
  variable that is set wins over the file, the file over the default (``envvars.raw`` asks here);
  secrets are refused: they come from the environment / the secret store, never a file in a repo;
* ``monitoring:`` ``MonitoringPolicyResource``'s fields (the code location builds it with them);
* ``maintenance: {retention_days: N}`` and ``freshness: {ods_max_commit_age_minutes: N}`` (read once
  when ``defs/lakehouse/constants.py`` is imported).

Which file: ``LAKEBUS_CONFIG`` names it; unset, ``lakebus.yaml`` in the working directory if it
exists, else none. Every problem is one line naming the file and the key; :func:`check_all` (what
``lakebus config`` runs) collects every problem of the file and of the settings instead of stopping
at the first.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

import yaml

from lakebus_dagster import envvars
from lakebus_dagster.envvars import SettingsError

CONFIG_VAR = "LAKEBUS_CONFIG"
#: the file used when LAKEBUS_CONFIG is unset (in the working directory, only if it exists)
DEFAULT_NAME = "lakebus.yaml"
SECTIONS = ("settings", "monitoring", "maintenance", "freshness")
#: the lakehouse sections' keys: (accepts a float, the smallest value allowed, exclusive minimum)
LAKEHOUSE_KEYS: dict[str, dict[str, tuple[bool, float, bool]]] = {
    "maintenance": {"retention_days": (False, 0, False)},
    "freshness": {"ods_max_commit_age_minutes": (True, 0, True)},
}


class ConfigFileError(SettingsError):
    """The config file (or LAKEBUS_CONFIG) is unusable: one line naming the file and the key."""

    def __init__(self, key: str, message: str) -> None:  # noqa: D107 - the message is already whole
        self.variable = key
        ValueError.__init__(self, message)


@dataclass(frozen=True)
class LoadedConfig:
    path: Path
    #: LAKEBUS_* name -> value as a string (like an environment variable)
    settings: dict[str, str] = field(default_factory=dict)
    monitoring: dict[str, Any] = field(default_factory=dict)
    maintenance: dict[str, Any] = field(default_factory=dict)
    freshness: dict[str, Any] = field(default_factory=dict)
    #: one line per problem; the keys they name are left out of the sections above
    problems: tuple[str, ...] = ()

    @property
    def source(self) -> str:
        return f"file:{self.path}"


def config_path() -> Path | None:
    """The file to read: LAKEBUS_CONFIG, else ./lakebus.yaml if it exists, else None."""
    named = os.environ.get(CONFIG_VAR, "").strip()
    if not named:
        default = Path.cwd() / DEFAULT_NAME
        return default if default.is_file() else None
    path = Path(named).expanduser().resolve()
    if not path.is_file():
        raise ConfigFileError(CONFIG_VAR, f"{CONFIG_VAR}={named!r} is not a file; point it at the deployment's "
                                          f"YAML config (see lakebus.example.yaml), or unset it")
    return path


def _closest(key: str, known: Any) -> str:
    match = difflib.get_close_matches(str(key), [str(k) for k in known], n=1, cutoff=0.6)
    return f" (did you mean {match[0]}?)" if match else f" (known: {', '.join(map(str, known))})"


def read(path: Path) -> LoadedConfig:
    """Parse and check ``path`` without importing Dagster (the monitoring fields' types are checked by
    :func:`check_monitoring`); problems are collected, not raised."""
    problems: list[str] = []
    where = str(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as exc:
        return LoadedConfig(path, problems=(f"{where}: cannot be read ({exc.strerror or exc}); fix {CONFIG_VAR}",))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        return LoadedConfig(path, problems=(f"{where}: is not valid YAML{at} ({problem}); fix the file",))
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        return LoadedConfig(path, problems=(f"{where}: must be a mapping with the sections {', '.join(SECTIONS)}",))
    sections: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
    for name, body in doc.items():
        if name not in SECTIONS:
            problems.append(f"{where}: unknown section {name!r}{_closest(name, SECTIONS)}; fix or remove it")
        elif body is None:
            continue
        elif not isinstance(body, dict):
            problems.append(f"{where}: section {name!r} must be a mapping of keys to values")
        else:
            sections[name] = body
    settings: dict[str, str] = {}
    for key, value in sections["settings"].items():
        var = envvars.BY_NAME.get(key)
        if var is None:
            problems.append(f"{where}: settings.{key} is not a lakebus setting{_closest(key, envvars.BY_NAME)}; "
                            "fix or remove it")
        elif key == CONFIG_VAR:
            problems.append(f"{where}: settings.{key} cannot be set in the config file itself; remove it")
        elif var.secret:
            problems.append(f"{where}: settings.{key} is a secret and is refused in the config file; remove it and "
                            "set it in the environment (from your secret store)")
        elif isinstance(value, (dict, list)):
            problems.append(f"{where}: settings.{key} must be a single value, not a {type(value).__name__}")
        elif value is not None:
            settings[key] = ("true" if value else "false") if isinstance(value, bool) else str(value).strip()
    lakehouse: dict[str, dict[str, Any]] = {}
    for section, keys in LAKEHOUSE_KEYS.items():
        lakehouse[section] = {}
        for key, value in sections[section].items():
            if key not in keys:
                problems.append(f"{where}: {section}.{key} is not a {section} setting{_closest(key, keys)}; "
                                "fix or remove it")
                continue
            floats, minimum, exclusive = keys[key]
            kinds = (int, float) if floats else (int,)
            ok = isinstance(value, kinds) and not isinstance(value, bool)
            if not ok or (value <= minimum if exclusive else value < minimum):
                what = "a number" if floats else "an integer"
                problems.append(f"{where}: {section}.{key}={value!r} is not {what} {'>' if exclusive else '>='} "
                                f"{minimum:g}; fix it, or remove it for the default")
            else:
                lakehouse[section][key] = value
    return LoadedConfig(path, settings, dict(sections["monitoring"]), lakehouse["maintenance"],
                        lakehouse["freshness"], tuple(problems))


def check_monitoring(values: dict[str, Any], where: Path | str) -> list[str]:
    """One line per bad ``monitoring:`` key or value (imports the resource, so Dagster)."""
    from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource

    fields = MonitoringPolicyResource.model_fields
    problems = []
    for key, value in values.items():
        if key not in fields:
            problems.append(f"{where}: monitoring.{key} is not a MonitoringPolicyResource field{_closest(key, fields)}; "
                            "fix or remove it")
            continue
        kind = fields[key].annotation
        accepted = {bool: (bool,), int: (int,), float: (int, float)}.get(kind, (object,))  # type: ignore[call-overload]
        message = None
        if not isinstance(value, accepted) or (kind is not bool and isinstance(value, bool)):
            message = f"is not {'true/false' if kind is bool else 'an integer' if kind is int else 'a number'}"
        else:
            try:
                MonitoringPolicyResource(**{key: value})
            except ValueError as exc:  # pydantic's ValidationError: the field's constraint (e.g. >= 1)
                errors = getattr(exc, "errors", lambda: [])()
                message = errors[0]["msg"].lower() if errors else str(exc).splitlines()[0]
        if message:
            problems.append(f"{where}: monitoring.{key}={value!r} {message}; fix it, or remove it for the default")
    return problems


# -- the file as every reader sees it -----------------------------------------------------------
_cache: dict[tuple[str, int], LoadedConfig] = {}
#: set while check_all() collects problems: the readers then skip the file's bad keys instead of raising
_lenient = False


def current() -> LoadedConfig | None:
    """The deployment's file, parsed (again only when it changed), or None when there is none.

    Raises :class:`ConfigFileError` with the file's first problem (the settings section and the
    lakehouse sections; the monitoring fields are checked where the resource is built)."""
    path = config_path()
    if path is None:
        return None
    key = (str(path), path.stat().st_mtime_ns)
    loaded = _cache.get(key)
    if loaded is None:
        _cache.clear()
        loaded = _cache[key] = read(path)
    if loaded.problems and not _lenient:
        raise ConfigFileError(CONFIG_VAR, loaded.problems[0])
    return loaded


def setting(name: str) -> str | None:
    """The file's value of a LAKEBUS_* variable, or None (envvars.raw asks this after the environment)."""
    loaded = current()
    return loaded.settings.get(name) if loaded else None


def monitoring_policy():  # -> MonitoringPolicyResource (not imported here: that imports Dagster)
    """The MonitoringPolicyResource the code location uses: the shipped defaults, then the file's ``monitoring:``."""
    from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource

    loaded = current()
    values = loaded.monitoring if loaded else {}
    if loaded is not None:
        problems = check_monitoring(values, loaded.path)
        if problems and _lenient:  # check_all() imports the definitions while it reports these
            values = {}
        elif problems:
            raise ConfigFileError(CONFIG_VAR, problems[0])
    return MonitoringPolicyResource(**values)


def lakehouse_limits(ods_max_commit_age: timedelta, retention_days: int) -> tuple[timedelta, int]:
    """(the ODS freshness limit, the retention in days): the file's values, else the given defaults."""
    loaded = current()
    if loaded is None:
        return ods_max_commit_age, retention_days
    minutes = loaded.freshness.get("ods_max_commit_age_minutes")
    return (timedelta(minutes=minutes) if minutes is not None else ods_max_commit_age,
            loaded.maintenance.get("retention_days", retention_days))


def check_all(load_settings: Callable[[], object]) -> tuple[list[str], LoadedConfig | None]:
    """Every problem of the configuration, one line each (the file's keys, then each bad setting
    ``load_settings`` reads), and the file read (None when there is none). What ``lakebus config``
    prints before exiting 2; it passes the stack's loader, which reads every variable. The loader is
    a parameter so this module, which the settings read through :mod:`envvars`, imports no settings."""
    try:
        path = config_path()
    except ConfigFileError as exc:
        return [str(exc)], None
    loaded = read(path) if path else None
    problems = list(loaded.problems) if loaded else []
    global _lenient
    _lenient = True  # the readers skip the file's bad keys instead of raising
    try:
        if loaded is not None:
            problems += check_monitoring(loaded.monitoring, loaded.path)
        seen: set[str] = set()
        for _ in range(len(envvars.VARIABLES) + 1):
            try:
                load_settings()
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
                envvars.CHECK_OVERRIDES[name] = envvars.BY_NAME[name].default
    finally:
        _lenient = False
        envvars.CHECK_OVERRIDES.clear()
    return problems, loaded


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
