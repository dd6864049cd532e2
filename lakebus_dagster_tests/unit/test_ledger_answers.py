"""The offset ledger and the sink's answers in flight: records a task answered for on the control
topic that no coordinator committed yet are pending, never lost (lakebus_dagster/ledger/answers.py).
The control records are built the way the 1.12 sink writes them (checked against a live control
topic: ``DataComplete{commit_id, assignments: [{topic, partition, offset, timestamp}]}``)."""

from __future__ import annotations

import json

from lakebus_dagster.ledger.answers import in_flight
from lakebus_dagster.ledger.model import BusRecord
from lakebus_dagster.ledger.verify import Window, verify
from lakebus_dagster.monitor.control_events import Answered, decode_answered, decode_control

GROUP, TOPIC = "connect-events-iceberg-sink", "events"
NOW_MS = 1_800_000_000_000


def _long(n: int) -> bytes:
    n, out = (n << 1) ^ (n >> 63), b""
    while n > 0x7F:
        out, n = out + bytes([n & 0x7F | 0x80]), n >> 7
    return out + bytes([n])


def _string(text: str) -> bytes:
    return _long(len(text.encode())) + text.encode()


def _optional(value: int | None) -> bytes:
    return _long(0) if value is None else _long(1) + _long(value)


def data_complete(assignments: list[tuple[str, int, int | None]] | None, group: str = GROUP, sized_block: bool = False) -> bytes:
    """A DataComplete as the sink's AvroEncoderUtil writes it: magic, writer schema, Event header, payload."""
    schema = json.dumps({"type": "record", "name": "Event", "fields": [{"name": "payload"}]}).encode()
    header = b"\xc2\x01" + len(schema).to_bytes(2, "big") + schema + bytes(16) + _long(2) + _long(NOW_MS * 1000) + _string(group)
    payload = bytes(range(16))
    if assignments is None:
        return header + payload + _long(0)
    items = b"".join(_string(t) + _long(p) + _optional(o) + _optional(NOW_MS * 1000) for t, p, o in assignments)
    block = (_long(-len(assignments)) + _long(len(items))) if sized_block else _long(len(assignments))
    return header + payload + _long(1) + (block + items if assignments else b"") + _long(0)


def test_a_data_complete_is_decoded_with_the_offsets_it_answers_for():
    value = data_complete([(TOPIC, 0, 11), (TOPIC, 1, None)])
    assert decode_control(value).kind == "DataComplete"
    assert decode_answered(value) == Answered(GROUP, ((TOPIC, 0, 11), (TOPIC, 1, None)))
    assert decode_answered(data_complete([(TOPIC, 3, 7)], sized_block=True)).assignments == ((TOPIC, 3, 7),)
    assert decode_answered(data_complete(None)).assignments == ()
    assert decode_answered(data_complete([(TOPIC, 0, 11)])[:-5]) is None, "a truncated record is not an answer"
    for other in (None, b"", b"junk"):
        assert decode_answered(other) is None


def test_answers_past_the_coordinators_committed_offset_are_in_flight_from_the_previous_answer():
    answers = [
        (3, Answered(GROUP, ((TOPIC, 0, 100), (TOPIC, 1, 50)))),   # committed: below the coordinators' offset
        (9, Answered(GROUP, ((TOPIC, 0, None), (TOPIC, 1, 60)))),  # committed; partition 0 read nothing
        (15, Answered(GROUP, ((TOPIC, 0, 120), (TOPIC, 1, None)))),  # pending
        (21, Answered(GROUP, ((TOPIC, 0, 130),))),  # pending too: the range grows
        (22, Answered("connect-other-sink", ((TOPIC, 1, 999),))),  # another sink on a shared control topic
        (23, Answered(GROUP, (("other-topic", 1, 5),))),
    ]
    assert in_flight(answers, committed=12, group=GROUP, topic=TOPIC) == {0: (100, 130)}
    assert in_flight(answers, committed=30, group=GROUP, topic=TOPIC) == {}, "everything committed: nothing in flight"
    assert in_flight(answers, committed=None, group=GROUP, topic=TOPIC) == {0: (0, 130), 1: (0, 60)}, \
        "no committed offset yet: every answer is pending, from the start"
    assert in_flight(answers[2:], committed=12, group=GROUP, topic=TOPIC) == {0: (0, 130)}, \
        "no earlier answer in reach: pending from offset 0 (longer than needed, never a false gap)"


def test_a_record_answered_and_not_committed_to_iceberg_is_pending_however_old_and_past_the_committed_offset():
    """The catalog refused the commit: the task's offsets moved past offsets 5-9 with its answer, no
    table holds them, and they are an hour old. A gap would re-queue copies that land beside the
    originals once the catalog accepts the answer."""
    old = NOW_MS - 3_600_000
    records = [BusRecord(partition=0, offset=o, timestamp_ms=old, tombstone=False) for o in range(12)]
    rows = _rows(range(5))
    answered = Window(0, 0, committed=10, end=12, in_flight=(5, 10))
    verdict = verify(TOPIC, [answered], records, rows, [], now_ms=NOW_MS, grace_ms=0)
    assert verdict.gaps == {} and verdict.partitions[0].pending == [5, 6, 7, 8, 9, 10, 11]
    unanswered = Window(0, 0, committed=10, end=12, in_flight=(7, 10))
    verdict = verify(TOPIC, [unanswered], records, rows, [], now_ms=NOW_MS, grace_ms=0)
    assert verdict.gaps == {0: [5, 6]}, "records no answer in flight covers are judged as before"


def _rows(offsets):
    from lakebus_dagster.ledger.model import OdsRow

    return [OdsRow(table="demo.dwd_biz_bet", partition=0, offset=o) for o in offsets]
