"""The monitoring policy the code location uses: ``MonitoringPolicyResource``'s shipped defaults, then
the ``monitoring:`` section of the deployment's config file (:mod:`lakebus_dagster.config_file`).

Why here and not in config_file: checking the section needs the resource's fields, so Dagster; the
config file module is read by the settings (which import no Dagster) and so must not import the
definitions (issue 22: no module cycles).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lakebus_dagster import config_file
from lakebus_dagster.config_file import CONFIG_VAR, ConfigFileError, closest
from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource


def check_monitoring(values: dict[str, Any], where: Path | str) -> list[str]:
    """One line per bad ``monitoring:`` key or value."""
    fields = MonitoringPolicyResource.model_fields
    problems = []
    for key, value in values.items():
        if key not in fields:
            problems.append(f"{where}: monitoring.{key} is not a MonitoringPolicyResource field{closest(key, fields)}; "
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


def monitoring_policy() -> MonitoringPolicyResource:
    """The MonitoringPolicyResource the code location uses: the shipped defaults, then the file's ``monitoring:``."""
    loaded = config_file.current()
    values = loaded.monitoring if loaded else {}
    if loaded is not None:
        problems = check_monitoring(values, loaded.path)
        if problems and config_file.collecting():  # `lakebus config` imports the definitions while it reports these
            values = {}
        elif problems:
            raise ConfigFileError(CONFIG_VAR, problems[0])
    return MonitoringPolicyResource(**values)
