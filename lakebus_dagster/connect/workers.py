"""A Kafka Connect cluster as lakebus addresses it: the REST URLs of its workers.

Connect has no bootstrap protocol of its own: every worker serves the whole cluster's REST API
(a follower forwards writes to the leader), so a client that knows several workers can use any
one that answers. Like Kafka's ``bootstrap.servers``, the workers are written as one string
separated by commas (``LAKEBUS_CONNECT_URL``, ``ConnectResource.url``), which keeps a single URL
valid everywhere it was valid before.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit


def worker_urls(urls: str | Sequence[str]) -> tuple[str, ...]:
    """The distinct worker URLs in ``urls`` (a comma-separated string or a sequence), in order,
    without trailing slashes. Raises ``ValueError`` when there is none."""
    entries = urls.split(",") if isinstance(urls, str) else list(urls)
    found = tuple(dict.fromkeys(u.strip().rstrip("/") for u in entries if u.strip()))
    if not found:
        raise ValueError("no Kafka Connect REST URL given (expected http(s)://host:port[,http(s)://host:port...])")
    return found


def shown(url: str) -> str:
    """``url`` as messages may show it: any ``user:password@`` part removed (credentials belong in
    ``ConnectResource.username/password``, but a URL that carries them must not leak them)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def shown_all(urls: Sequence[str]) -> str:
    """Every worker URL for a message, comma-separated, credentials removed."""
    return ", ".join(shown(u) for u in urls)
