"""The deployment's declared configuration: one YAML file, ``LAKEBUS_CONFIG`` (see docs/configuration.md).

Why a file beside the environment variables: a deployment's settings are reviewed and versioned
together, and some of them (the monitoring policy, retention, the ODS freshness limit) are not
environment variables at all. The file holds

* ``settings:`` the ``LAKEBUS_*`` variables of :mod:`lakebus_dagster.envvars` by name; an environment
  variable that is set wins over the file, the file over the default (``SettingsReader.raw`` asks here);
  secrets are refused: they come from the environment / the secret store, never a file in a repo;
* ``monitoring:`` ``MonitoringPolicyResource``'s fields (the code location builds it with them,
  :mod:`lakebus_dagster.defs.monitoring.policy`, which checks them: this module imports no Dagster);
* ``maintenance: {retention_days: N}`` and ``freshness: {ods_max_commit_age_minutes: N}`` (the
  code location's settings load carries them to ``build_lakehouse``: ``LakehouseLimits``);
* ``schedules: {<name>: {cron: "..."}}``: another time for a lakehouse schedule (UTC), e.g. the
  daily maintenance outside the business's busy hours;
* ``capture:`` the captured databases and tables (:mod:`lakebus_dagster.capture_declaration`);
* ``events:`` the team's own event types beside the built-in ones (:mod:`lakebus_dagster.event_declaration`).

Which file: ``LAKEBUS_CONFIG`` names it; unset, ``lakebus.yaml`` in the working directory if it
exists, else none. Every problem is one line naming the file and the key; ``lakebus config``
(:mod:`lakebus_dagster.cli.config_report`) collects every problem of the file and of the settings
instead of stopping at the first.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lakebus_dagster import envvars
from lakebus_dagster.envvars import SettingsError

CONFIG_VAR = "LAKEBUS_CONFIG"
#: the file used when LAKEBUS_CONFIG is unset (in the working directory, only if it exists)
DEFAULT_NAME = "lakebus.yaml"
SECTIONS = ("settings", "monitoring", "maintenance", "freshness", "schedules", "capture", "events")
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
    #: schedule name -> its cron (the lakehouse schedules' times; names checked where they are built)
    schedules: dict[str, str] = field(default_factory=dict)
    #: ``capture:``'s databases (:mod:`lakebus_dagster.capture_declaration`); None: no section (the demo's applies)
    capture: tuple | None = None
    #: ``events:``'s declared event types (:mod:`lakebus_dagster.event_declaration`); empty: none
    events: tuple = ()
    #: one line per problem; the keys they name are left out of the sections above
    problems: tuple[str, ...] = ()

    @property
    def source(self) -> str:
        return f"file:{self.path}"


def config_path(environ: Mapping[str, str] | None = None) -> Path | None:
    """The file to read: LAKEBUS_CONFIG (of ``environ``, this process's environment when None), else
    ./lakebus.yaml if it exists, else None."""
    named = (os.environ if environ is None else environ).get(CONFIG_VAR, "").strip()
    if not named:
        default = Path.cwd() / DEFAULT_NAME
        return default if default.is_file() else None
    path = Path(named).expanduser().resolve()
    if not path.is_file():
        raise ConfigFileError(CONFIG_VAR, f"{CONFIG_VAR}={named!r} is not a file; point it at the deployment's "
                                          f"YAML config (see lakebus.example.yaml), or unset it")
    return path


def closest(key: str, known: Any) -> str:
    """`` (did you mean X?)`` for a misspelt ``key``, else the known ones."""
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
            problems.append(f"{where}: unknown section {name!r}{closest(name, SECTIONS)}; fix or remove it")
        elif body is None:
            continue
        elif not isinstance(body, dict):
            problems.append(f"{where}: section {name!r} must be a mapping of keys to values")
        else:
            sections[name] = body
    settings = settings_section(where, sections["settings"], problems)
    lakehouse: dict[str, dict[str, Any]] = {}
    for section, keys in LAKEHOUSE_KEYS.items():
        lakehouse[section] = {}
        for key, value in sections[section].items():
            if key not in keys:
                problems.append(f"{where}: {section}.{key} is not a {section} setting{closest(key, keys)}; "
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
    schedules = _schedules(where, sections["schedules"], problems)
    capture, events = _declarations(where, doc, sections, problems)
    return LoadedConfig(path, settings, dict(sections["monitoring"]), lakehouse["maintenance"],
                        lakehouse["freshness"], schedules, capture, events, tuple(problems))


def _declarations(where: str, doc: dict, sections: dict[str, dict[str, Any]], problems: list[str]) -> tuple[tuple | None, tuple]:
    """``capture:`` (None: no section, the demo's applies) and ``events:`` (empty: none), each checked
    by its own module; a problem is one line pointing at its docs section."""
    from lakebus_dagster.capture_declaration import parse_capture
    from lakebus_dagster.event_declaration import parse_events

    capture, events = None, ()
    if "capture" in doc:
        try:
            capture = parse_capture(doc["capture"])
        except ValueError as exc:
            problems.append(f"{where}: {exc}; fix it (docs/configuration.md, \"Change capture\")")
    if sections["events"]:
        try:
            events = parse_events(sections["events"])
        except ValueError as exc:
            problems.append(f"{where}: {exc}; fix it (docs/configuration.md, \"Your own events\")")
    return capture, events


def settings_section(where: str, section: dict[str, Any], problems: list[str]) -> dict[str, str]:
    """``settings:``: LAKEBUS_* names to single values, never a secret nor LAKEBUS_CONFIG itself (deploy/values.yaml's
    settings are checked by the same rules, :mod:`lakebus_dagster.deployment.values`)."""
    settings: dict[str, str] = {}
    for key, value in section.items():
        var = envvars.BY_NAME.get(key)
        if var is None:
            problems.append(f"{where}: settings.{key} is not a lakebus setting{closest(key, envvars.BY_NAME)}; "
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
    return settings


def _schedules(where: str, section: dict[str, Any], problems: list[str]) -> dict[str, str]:
    """``schedules: {<name>: {cron: "<5 fields>"}}``: each a cron of five fields (checked by Dagster
    when the schedule is built; the names by the code location, which knows them)."""
    out = {}
    for name, body in section.items():
        cron = body.get("cron") if isinstance(body, dict) else None
        extra = sorted(set(body) - {"cron"}) if isinstance(body, dict) else []
        if not isinstance(cron, str) or len(cron.split()) != 5 or extra:
            problems.append(f"{where}: schedules.{name} must be {{cron: \"<minute> <hour> <day> <month> <weekday>\"}} "
                            f"(UTC), got {body!r}; fix it, or remove it for the shipped time")
        else:
            out[str(name)] = cron.strip()
    return out


# -- the file as every reader sees it -----------------------------------------------------------
_cache: dict[tuple[str, int], LoadedConfig] = {}


def parsed(environ: Mapping[str, str] | None = None) -> LoadedConfig | None:
    """The deployment's file, parsed (again only when it changed), or None when there is none; its
    problems are collected, not raised (:meth:`lakebus_dagster.setting_readers.SettingsReader.file`
    raises the first, unless it collects them for ``lakebus config``). The sections hold only the
    keys that passed their checks."""
    path = config_path(environ)
    if path is None:
        return None
    key = (str(path), path.stat().st_mtime_ns)
    loaded = _cache.get(key)
    if loaded is None:
        _cache.clear()
        loaded = _cache[key] = read(path)
    return loaded
