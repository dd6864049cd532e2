"""Exceptions of the event SDK.

Every error names the event and, where there is one, the field: a producer that rejects a record
in a service with dozens of event types is only debuggable if the message says *which* one.
"""

from __future__ import annotations

import dataclasses

from lakebus_dagster.errors import UserError


class EventError(UserError):
    """Base class of every error raised by :mod:`lakebus_dagster.events` (its message names the event:
    the command line prints it as one line)."""


class SchemaError(EventError, ValueError):
    """A model cannot be registered: unsupported field type, or an incompatible new version.

    Raised at registration (import time) rather than at the first send, so a bad model fails the
    deployment instead of silently dropping columns the way the Go reflection did.
    """


class EventValidationError(EventError, ValueError):
    """A record does not match its registered schema; nothing was sent."""

    def __init__(self, event: object, field: str, reason: str) -> None:
        self.event = event
        self.field = field
        self.reason = reason
        super().__init__(f"event {event!r}, field {field!r}: {reason}")


class UnknownEventError(EventValidationError):
    """The event name (or the record's ``schema_version``) is not registered."""


@dataclasses.dataclass(frozen=True)
class DeliveryFailure:
    """One message Kafka reported as not delivered; ``value`` is kept so the caller can re-send."""

    event: str
    key: str | None
    error: str
    value: bytes = dataclasses.field(repr=False)


class DeliveryError(EventError, RuntimeError):
    """Messages were not delivered: failed delivery reports and/or messages still queued."""

    def __init__(self, failures: tuple[DeliveryFailure, ...], undelivered: int = 0) -> None:
        self.failures = failures
        self.undelivered = undelivered
        parts = []
        if undelivered:
            parts.append(f"{undelivered} message(s) still queued after flush timeout")
        if failures:
            shown = "; ".join(f"{f.event} key={f.key!r}: {f.error}" for f in failures[:10])
            more = f" (and {len(failures) - 10} more)" if len(failures) > 10 else ""
            parts.append(f"{len(failures)} delivery failure(s): {shown}{more}")
        super().__init__(", ".join(parts))
