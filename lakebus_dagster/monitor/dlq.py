"""Decoding dead-letter records: Connect's ``__connect.errors.*`` context headers."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

HEADER_PREFIX = "__connect.errors."

_QUOTED_VALUE = re.compile(r'"(?:[^"\\]|\\.)*"')
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])")


@dataclass(frozen=True)
class DeadLetter:
    partition: int
    offset: int
    original_topic: str | None
    original_partition: int | None
    original_offset: int | None
    stage: str | None
    error_class: str
    error_message: str
    value: bytes | None
    key: bytes | None

    @property
    def reason(self) -> str:
        """What is wrong, without the record's own values: the exception's short class name and its
        message with quoted values and numbers masked, so every record that broke the same rule on the
        same field (``field 'plat_id': expected int32, got string "…"``) falls into one class, which
        a fixed producer can then replay as a whole (``replay_dlq`` ``reason``)."""
        short = self.error_class.rsplit(".", 1)[-1]
        message = _NUMBER.sub("N", _QUOTED_VALUE.sub('"…"', self.error_message))
        return f"{short}: {message}" if message else short

    def sample(self, max_len: int = 120) -> str:
        value = (self.value or b"")[:max_len].decode("utf-8", errors="replace")
        where = f"{self.original_topic}[{self.original_partition}]@{self.original_offset}"
        return f"{where} {self.stage}: {self.error_message[:160]} | value: {value!r}"


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def decode(partition: int, offset: int, headers: Iterable[tuple[str, bytes | None]] | None, value, key) -> DeadLetter:
    h = {k[len(HEADER_PREFIX):]: (v or b"").decode("utf-8", errors="replace") for k, v in (headers or []) if k.startswith(HEADER_PREFIX)}
    return DeadLetter(
        partition=partition,
        offset=offset,
        original_topic=h.get("topic"),
        original_partition=_int(h.get("partition")),
        original_offset=_int(h.get("offset")),
        stage=h.get("stage"),
        error_class=h.get("exception.class.name") or "unknown (no __connect.errors headers)",
        error_message=(h.get("exception.message") or "").splitlines()[0] if h.get("exception.message") else "",
        value=value,
        key=key,
    )


def group_by_reason(letters: Iterable[DeadLetter]) -> Counter[str]:
    return Counter(dl.reason for dl in letters)


def error_headers(original_topic: str, original_partition: int, original_offset: int, *, connector: str, task_id: int,
                  stage: str, error_class: str, error_message: str, failing_class: str) -> list[tuple[str, bytes]]:
    """The ``__connect.errors.*`` headers Connect puts on a dead letter, for a record lakebus sends to
    the DLQ itself (a poison record the sink fails its task on): :func:`decode`, the DLQ sensor,
    ``replay_dlq`` and the offset ledger then read it exactly like one of Connect's own."""
    fields = {
        "topic": original_topic,
        "partition": str(original_partition),
        "offset": str(original_offset),
        "connector.name": connector,
        "task.id": str(task_id),
        "stage": stage,
        "class.name": failing_class,
        "exception.class.name": error_class,
        "exception.message": error_message,
    }
    return [(f"{HEADER_PREFIX}{name}", value.encode()) for name, value in fields.items()]
