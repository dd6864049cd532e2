"""Which connector config values are secrets, and how to keep them out of logs and metadata.

Shared by the config diff (values shown in Dagster metadata) and the REST client (Connect echoes
some invalid values back in its error messages). A value is treated as secret when its *key* looks
secret; a config-provider placeholder such as ``${env:NAME}`` or ``${file:/path:key}`` is not a
secret (it only names where the secret lives) and is shown as written, which is also what makes
secrets managed through providers reviewable in a diff.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

MASK = "***"

# Substring match on the key name, case-insensitive: passwords, secrets, tokens, credentials and
# the usual key spellings (``access-key-id``, ``api.key``, ``ssl.key.password``, ``private_key``),
# but not ``key.converter`` / ``key.serializer``, whose values are class names a diff must show.
_SECRET_KEY = re.compile(
    r"password|secret|token|credential|jaas|(?:access|api|private|client)[._-]?key|(?:^|[._-])key$",
    re.IGNORECASE,
)

# One or more ``${provider:...}`` references and nothing else (Kafka's ConfigTransformer syntax).
_PLACEHOLDERS = re.compile(r"(?:\$\{[A-Za-z0-9_.-]+:[^{}]*\})+")


def is_secret_key(key: str) -> bool:
    """True when the config key's name suggests its value is a secret."""
    return _SECRET_KEY.search(key) is not None


def is_placeholder(value: str) -> bool:
    """True when the value consists only of config-provider placeholders (resolved by the worker)."""
    return _PLACEHOLDERS.fullmatch(value) is not None


def redact_value(key: str, value: str) -> str:
    """``value`` as it may be shown: masked if the key looks secret, unless it is a placeholder."""
    if is_secret_key(key) and not is_placeholder(value):
        return MASK
    return value


def scrub(text: str, config: Mapping[str, object]) -> str:
    """Replace every secret value of ``config`` that occurs in ``text`` with :data:`MASK`.

    Connect's validation messages quote offending values ("Invalid value ... for configuration
    ..."), so text coming back from a request that carried a config is scrubbed before it ends up
    in an exception.
    """
    for key, value in config.items():
        shown = str(value)
        if shown and redact_value(key, shown) == MASK:
            text = text.replace(shown, MASK)
    return text
