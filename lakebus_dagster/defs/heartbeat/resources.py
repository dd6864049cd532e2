"""Where the heartbeat goes and how often: ``LAKEBUS_HEARTBEAT_URL`` (read as a Dagster ``EnvVar``:
it is a secret, a ping URL lets whoever knows it fake the daemon's pings) and
``LAKEBUS_HEARTBEAT_INTERVAL_MINUTES``."""

from __future__ import annotations

import urllib.error
import urllib.request
from urllib.parse import urlsplit

import dagster as dg
from pydantic import Field

from lakebus_dagster.setting_readers import SettingsReader

URL_VAR = "LAKEBUS_HEARTBEAT_URL"
INTERVAL_VAR = "LAKEBUS_HEARTBEAT_INTERVAL_MINUTES"
DEFAULT_INTERVAL_MINUTES = 5
#: a ping that takes longer than this failed (the tick must stay short)
PING_TIMEOUT_S = 10.0


class HeartbeatError(Exception):
    """A ping that did not reach the URL or was refused by it; the message names the URL."""


def shown_url(url: str) -> str:
    """The URL as messages show it: scheme, host and port, and the path only up to its last segment
    (a ping URL's last segment is usually the check's secret UUID)."""
    parts = urlsplit(url)
    head, _, last = parts.path.rpartition("/")
    path = f"{head}/{last[:4]}…" if len(last) > 8 else parts.path
    return f"{parts.scheme}://{parts.netloc}{path}"


class HeartbeatResource(dg.ConfigurableResource):
    """The dead-man's switch: an external URL the daemon GETs while it is alive (unset: off)."""

    url: str | None = Field(default=None, description=f"the ping URL; use dg.EnvVar({URL_VAR!r}), never a literal")
    interval_minutes: int = Field(default=DEFAULT_INTERVAL_MINUTES, ge=1, description="ping at most this often")

    def ping(self) -> int:
        """GET the URL once; its HTTP status, or :class:`HeartbeatError` naming the URL and the cause."""
        assert self.url, "ping() needs a URL"
        shown = shown_url(self.url)
        request = urllib.request.Request(self.url, method="GET", headers={"User-Agent": "lakebus-heartbeat"})
        try:
            with urllib.request.urlopen(request, timeout=PING_TIMEOUT_S) as response:  # noqa: S310 - http(s) only, checked at load
                return response.status
        except urllib.error.HTTPError as exc:
            raise HeartbeatError(f"heartbeat ping to {shown} answered HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise HeartbeatError(f"heartbeat ping to {shown} failed: {reason}") from None


def heartbeat_resource(reader: SettingsReader | None = None) -> HeartbeatResource:
    """The deployment's heartbeat: the URL as an ``EnvVar`` when it is set (checked: an http(s) URL),
    the interval from the environment or the config file (default 5 minutes)."""
    e = reader or SettingsReader()
    url = e.optional_url(URL_VAR)
    minutes = e.optional_int(INTERVAL_VAR, minimum=1) or DEFAULT_INTERVAL_MINUTES
    return HeartbeatResource(url=dg.EnvVar(URL_VAR) if url else None, interval_minutes=minutes)
