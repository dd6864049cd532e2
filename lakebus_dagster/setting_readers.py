"""The reader of the ``LAKEBUS_*`` variables: :class:`SettingsReader`, whose methods each return the
checked value or raise :class:`~lakebus_dagster.envvars.SettingsError` naming the variable, in one line.

A variable that is unset (or empty) is read from the deployment's config file (``LAKEBUS_CONFIG``,
:mod:`lakebus_dagster.config_file`) if that sets it, else it has its default
(:mod:`lakebus_dagster.envvars`' table); secrets only ever come from the environment.

Why an object and not module functions: ``lakebus config`` reads the configuration in another mode
(a bad key of the file is skipped instead of raising, a bad variable is read as its default to find
the next one); that mode is the reader's state, passed to :func:`lakebus_dagster.settings.load_settings`,
so no module-level switch changes what every other reader in the process sees.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from lakebus_dagster import config_file
from lakebus_dagster.config_file import ConfigFileError, LoadedConfig
from lakebus_dagster.envvars import BY_NAME, CONFIG_VAR, PORT_RANGE, SettingsError

_SIZE = re.compile(r"^[1-9][0-9]*[kKmMgG]?$")
_SPARK_REMOTE = re.compile(r"^sc://[A-Za-z0-9_.\[\]:-]+:[0-9]{1,5}(/.*)?$")


class SettingsReader:
    """Reads the variables: the environment, else the deployment's config file, else the default.

    ``collecting=True`` (``lakebus config``, :mod:`lakebus_dagster.cli.config_report`): a bad key of
    the file is skipped (read as unset) instead of raising its :class:`ConfigFileError`; ``overrides``
    (name -> value) are read instead of the environment and the file (the report reads a bad variable
    as its default to find the next bad one); ``environ`` is the environment it reads (this process's
    when None; :mod:`lakebus_dagster.deployment.values` reads a deployment's values without it)."""

    def __init__(self, *, collecting: bool = False, environ: Mapping[str, str] | None = None) -> None:
        self.collecting = collecting
        self.overrides: dict[str, str] = {}
        self.environ: Mapping[str, str] = os.environ if environ is None else environ

    def file(self) -> LoadedConfig | None:
        """The deployment's file, parsed (again only when it changed), or None when there is none.

        Raises :class:`ConfigFileError` with the file's first problem (the settings section and the
        lakehouse sections; the monitoring fields are checked where the policy is built) unless collecting."""
        loaded = config_file.parsed(self.environ)
        if loaded is not None and loaded.problems and not self.collecting:
            raise ConfigFileError(CONFIG_VAR, loaded.problems[0])
        return loaded

    def raw(self, name: str) -> str:
        """The variable's value, stripped: the environment's, else the config file's (``LAKEBUS_CONFIG``,
        see :mod:`lakebus_dagster.config_file`), else its default (unset or empty = not given)."""
        if name in self.overrides:
            return self.overrides[name]
        value = self.environ.get(name, "").strip()
        if value or name == CONFIG_VAR or BY_NAME[name].secret:  # secrets never come from the file
            return value or BY_NAME[name].default
        loaded = self.file()
        return (loaded.settings.get(name) if loaded else None) or BY_NAME[name].default

    def source(self, name: str) -> str:
        """Where :meth:`raw`'s value comes from: ``env``, ``file:<path>`` or ``default``."""
        if self.environ.get(name, "").strip():
            return "env"
        if name != CONFIG_VAR and not BY_NAME[name].secret:
            loaded = self.file()
            if loaded is not None and loaded.settings.get(name):
                return loaded.source
        return "default"

    @staticmethod
    def _shown(name: str, value: str) -> str:
        return "(value hidden: a secret)" if BY_NAME[name].secret else f"={value!r}"

    def _unset_fix(self, name: str) -> str:
        default = BY_NAME[name].default
        where = self.source(name)
        how = f"remove it from {where[len('file:'):]}" if where.startswith("file:") else "unset it"
        return f"{how} for the default {default}" if default else how

    def port(self, name: str) -> int:
        value = self.raw(name)
        if not value.isdigit() or not 1 <= int(value) <= 65535:
            raise SettingsError(name, f"{self._shown(name, value)} is not a port", f"use an integer {PORT_RANGE}, or {self._unset_fix(name)}")
        return int(value)

    def optional_int(self, name: str, minimum: int = 0) -> int | None:
        value = self.raw(name)
        if not value:
            return None
        try:
            number = int(value)
        except ValueError:
            number = minimum - 1
        if number < minimum:
            raise SettingsError(name, f"{self._shown(name, value)} is not an integer >= {minimum}", f"set one, or {self._unset_fix(name)}")
        return number

    def memory_size(self, name: str) -> str:
        value = self.raw(name)
        if not _SIZE.match(value):
            raise SettingsError(name, f"{self._shown(name, value)} is not a memory size", f"use e.g. 512m or 2g, or {self._unset_fix(name)}")
        return value

    def choice(self, name: str, choices: tuple[str, ...]) -> str:
        value = self.raw(name)
        if value not in choices:
            raise SettingsError(name, f"{self._shown(name, value)} is not one of {', '.join(choices)}", f"pick one, or {self._unset_fix(name)}")
        return value

    def matching(self, name: str, pattern: str, what: str) -> str:
        """A value that must match ``pattern`` (e.g. a host name, a bucket, a topic-safe suffix)."""
        value = self.raw(name)
        if not re.fullmatch(pattern, value):
            raise SettingsError(name, f"{self._shown(name, value)} is not {what}", f"fix it, or {self._unset_fix(name)}")
        return value

    def optional_url(self, name: str, schemes: tuple[str, ...] = ("http", "https")) -> str | None:
        """An optional URL with one of ``schemes``, a host and (if given) a valid port."""
        value = self.raw(name)
        if not value:
            return None
        if not _is_url(value, schemes):
            example = f"{schemes[0]}://host:port" if schemes[0].startswith("http") else f"{schemes[0]}://bucket/path"
            raise SettingsError(name, f"{self._shown(name, value)} is not a {'/'.join(schemes)} URL", f"use e.g. {example}, or {self._unset_fix(name)}")
        return value

    def spark_remote(self, name: str, default: str) -> str | None:
        """A Spark Connect URL ``sc://host:port[/;param=value…]``; ``local`` -> None (an embedded session)."""
        value = self.raw(name) or default
        if value == "local":
            return None
        if not _SPARK_REMOTE.match(value) or not 1 <= int(value[5:].split("/", 1)[0].rsplit(":", 1)[1]) <= 65535:
            raise SettingsError(name, f"={value!r} is not a Spark Connect URL",
                                "use sc://host:port (e.g. sc://127.0.0.1:15002), `local` for an embedded session, or unset it "
                                "for the local stack's server")
        return value

    def optional_urls(self, name: str) -> tuple[str, ...] | None:
        """Optional http(s) URLs separated by commas (the workers of one service, e.g. a Connect
        cluster); each entry is checked like :meth:`optional_url`."""
        value = self.raw(name)
        if not value:
            return None
        entries = tuple(entry.strip().rstrip("/") for entry in value.split(",") if entry.strip())
        for entry in entries:
            if not _is_url(entry, ("http", "https")):
                raise SettingsError(name, f"{self._shown(name, value)} has an entry {entry!r} that is not a http/https URL",
                                    f"use http://host:port[,http://host:port...], or {self._unset_fix(name)}")
        return tuple(dict.fromkeys(entries))

    def optional_bootstrap(self, name: str) -> str | None:
        """Kafka bootstrap servers: ``host:port`` entries separated by commas."""
        value = self.raw(name)
        if not value:
            return None
        for entry in value.split(","):
            host, sep, number = entry.strip().rpartition(":")
            if not sep or not host or not number.isdigit() or not 1 <= int(number) <= 65535:
                raise SettingsError(name, f"{self._shown(name, value)} has an entry {entry.strip()!r} that is not host:port",
                                    f"use host:port[,host:port...], or {self._unset_fix(name)}")
        return value


def _is_url(value: str, schemes: tuple[str, ...]) -> bool:
    try:
        parts = urlsplit(value)
        return parts.scheme in schemes and bool(parts.hostname) and (parts.port is None or 1 <= parts.port <= 65535)
    except ValueError:  # a port that is not a number
        return False
