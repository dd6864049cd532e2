"""The monitoring policy the code location uses: ``MonitoringPolicyResource``'s shipped defaults, then
the ``monitoring:`` section of the deployment's config file, as the settings load read it
(:attr:`lakebus_dagster.settings.Settings.deployment_file`).

Why here and not in config_file: checking the section needs the resource's fields, so Dagster; the
config file module is read by the settings (which import no Dagster) and so must not import the
definitions (issue 22: no module cycles).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lakebus_dagster.config_file import CONFIG_VAR, ConfigFileError, closest
from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource
from lakebus_dagster.settings import Settings


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


def monitoring_policy(settings: Settings) -> MonitoringPolicyResource:
    """The MonitoringPolicyResource the code location uses: the shipped defaults, then the ``monitoring:``
    section of the file the settings were loaded with; a bad key raises :class:`ConfigFileError` naming it."""
    loaded = settings.deployment_file
    values = loaded.monitoring if loaded else {}
    if loaded is not None and (problems := check_monitoring(values, loaded.path)):
        raise ConfigFileError(CONFIG_VAR, problems[0])
    return MonitoringPolicyResource(**values)
