"""Compare a desired connector config with the live one, the way Strimzi decides whether to PUT.

Kafka Connect has no no-op detection: every ``PUT /connectors/{name}/config`` is validated, written
to the config topic and makes the herder restart the connector and its tasks, even when nothing
changed (``DistributedHerder.doPutConnectorConfig``). A reconciler that PUTs on every run therefore
restarts the sink on every run (strimzi#2688, strimzi#6438). Strimzi avoids that by comparing the
desired map with ``GET /connectors/{name}/config`` by exact equality and PUTting only on a
difference; this module does the same, after normalising both sides so that representational noise
does not count as a change:

* every value is ``str()``-ed, because Connect stores and returns strings only (``1`` == ``"1"``);
* boolean spellings are lower-cased (``True`` / ``"True"`` == ``"true"``), which is how Connect
  prints them;
* surrounding whitespace is stripped;
* the ``name`` key is ignored on both sides: Connect adds it to the stored config, and the
  connector name is part of the URL anyway.

Config-provider placeholders (``${env:NAME}``) compare as written: the live GET returns the *raw*
config with placeholders unresolved, so a secret held by a provider is diff-stable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from lakebus_dagster.connect.redaction import redact_value

_IGNORED_KEYS = frozenset({"name"})
_ABSENT = "—"


@dataclass(frozen=True)
class ConfigDiff:
    """What applying the desired config would change; ``changed`` maps key -> (live, desired)."""

    added: dict[str, str] = field(default_factory=dict)
    removed: dict[str, str] = field(default_factory=dict)
    changed: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def is_empty(self) -> bool:
        return not (self.added or self.removed or self.changed)

    def redacted(self) -> ConfigDiff:
        """A copy safe to log: values of secret-looking keys masked, placeholders kept."""
        return ConfigDiff(
            added={k: redact_value(k, v) for k, v in self.added.items()},
            removed={k: redact_value(k, v) for k, v in self.removed.items()},
            changed={k: (redact_value(k, old), redact_value(k, new)) for k, (old, new) in self.changed.items()},
        )

    def as_markdown(self) -> str:
        """A Markdown table for Dagster metadata, one row per key, sorted. Always redacted."""
        if self.is_empty:
            return "No changes."
        safe = self.redacted()
        rows: list[tuple[str, str, str, str]] = [
            *((k, "added", _ABSENT, v) for k, v in safe.added.items()),
            *((k, "removed", v, _ABSENT) for k, v in safe.removed.items()),
            *((k, "changed", old, new) for k, (old, new) in safe.changed.items()),
        ]
        lines = ["| Key | Change | Live | Desired |", "| --- | --- | --- | --- |"]
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in sorted(rows)]
        return "\n".join(lines)


def diff_configs(desired: Mapping[str, object], actual: Mapping[str, object]) -> ConfigDiff:
    """Diff ``desired`` against the live ``actual`` config after normalising both (see module doc)."""
    want, have = _normalise(desired), _normalise(actual)
    return ConfigDiff(
        added={k: v for k, v in want.items() if k not in have},
        removed={k: v for k, v in have.items() if k not in want},
        changed={k: (have[k], v) for k, v in want.items() if k in have and have[k] != v},
    )


def _normalise(config: Mapping[str, object]) -> dict[str, str]:
    return {key: _normalise_value(value) for key, value in config.items() if key not in _IGNORED_KEYS}


def _normalise_value(value: object) -> str:
    text = str(value).strip()
    return text.lower() if text.lower() in ("true", "false") else text


def _cell(text: str) -> str:
    """Escape what would break a Markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")
