"""Producing a batch and knowing where every record went, or that one did not.

Remediation, DLQ replay and the re-queue of lost records all write copies whose positions the
offset ledger later checks, so each of them needs the same two guarantees: every record delivered
(or an error naming how many were not), and each record's ``(partition, offset)`` in input order.
"""

from __future__ import annotations

from collections.abc import Sequence

from confluent_kafka import Producer

#: one record to produce: (topic, key, value, headers)
ProduceItem = tuple[str, bytes | None, bytes | None, list]


class DeliveryError(RuntimeError):
    """Some records of a batch were refused or not delivered before the flush timeout."""


def produce_all(producer: Producer, items: Sequence[ProduceItem], flush_timeout_s: float = 60.0) -> list[tuple[int, int]]:
    """Produce ``items``; return each one's ``(partition, offset)`` in order, or raise
    :class:`DeliveryError` unless every one was delivered."""
    failures: list[str] = []
    positions: dict[int, tuple[int, int]] = {}

    def report(index: int):
        def _cb(err, msg):
            if err is not None:
                failures.append(f"{msg.topic()}: {err}")
            else:
                positions[index] = (msg.partition(), msg.offset())
        return _cb

    for i, (topic, key, value, headers) in enumerate(items):
        producer.produce(topic, key=key, value=value, headers=headers, on_delivery=report(i))
        producer.poll(0)
    remaining = producer.flush(flush_timeout_s)
    if failures or remaining:
        raise DeliveryError(f"{len(failures)} record(s) failed, {remaining} undelivered: {failures[:3]}")
    return [positions[i] for i in range(len(items))]
