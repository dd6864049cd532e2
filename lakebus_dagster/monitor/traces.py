"""What a failed task's Java trace says: its headline, its root cause, and the record it names.

Connect's first trace line is usually "Exiting WorkerSinkTask due to unrecoverable exception"; the
cause is the innermost ``Caused by:``. Whether a named record is *bad* (a quarantine candidate) or a
bystander of an outage (the catalog or S3 down while it was written) is read from that root cause.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: the Iceberg sink's (and Connect's) wording when a record cannot be written; names the record
_RECORD_IN_TRACE = re.compile(r"An error occurred converting record, topic: (\S+), partition, (\d+), offset: (\d+)")


@dataclass(frozen=True)
class RecordRef:
    """One record of the bus, as a failed task's trace names it."""

    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


#: root causes that say "the infrastructure failed", not "this record is bad": a record named in
#: such a trace is a bystander (the catalog or S3 was down while it was written) and must never be
#: quarantined, however often a restart fails on it during an outage
_INFRASTRUCTURE_CAUSE = re.compile(
    r"(IOException|java\.net\.\w+Exception|\w*ConnectException|\w*ConnectTimeoutException|NoHttpResponseException|"
    r"SocketTimeoutException|TimeoutException|UnknownHostException|"
    r"RESTException|ServiceUnavailableException|ServiceFailureException|SdkClientException|SdkException|S3Exception|"
    r"NoSuchTableException|NoSuchNamespaceException|CommitFailedException|CommitStateUnknownException|"
    r"NotAuthorizedException|ForbiddenException|OutOfMemoryError|InterruptedException)\b"
)


def root_cause(trace: str | None) -> str:
    """The innermost ``Caused by:`` line of a Java trace (its first line if it has none)."""
    lines = [ln.strip() for ln in (trace or "").strip().splitlines() if ln.strip()]
    causes = [ln[len("Caused by: "):] for ln in lines if ln.startswith("Caused by: ")]
    return causes[-1] if causes else (lines[0] if lines else "")


def failing_record(trace: str | None) -> RecordRef | None:
    """The record a FAILED sink task could not write *because of its data*, when its trace names
    one: restarting replays the same record and fails again, so it is a quarantine candidate.
    ``None`` for other failures, including a named record whose root cause is the infrastructure."""
    found = _RECORD_IN_TRACE.search(trace or "")
    if not found or _INFRASTRUCTURE_CAUSE.search(root_cause(trace).split(":", 1)[0]):
        return None
    return RecordRef(found.group(1), int(found.group(2)), int(found.group(3)))


def trace_headline(trace: str | None) -> str:
    """First line of a Java trace plus its root cause: Connect's first line alone is usually just
    "Exiting WorkerSinkTask due to unrecoverable exception", which says nothing about why."""
    if not trace:
        return "no trace"
    lines = [ln.strip() for ln in trace.strip().splitlines()]
    causes = [ln for ln in lines if ln.startswith("Caused by:")]
    return lines[0] if not causes else f"{lines[0]} | root cause: {causes[-1][len('Caused by: '):]}"
