"""Envelope encoding throughput: the SDK's ``EnvelopeEncoder`` vs the seed's way.

The seed (Go) rebuilt the Connect schema by reflection for every message and marshalled the whole
``{"schema", "payload"}`` envelope each time. The SDK reflects once at registration, serialises the
schema once per event version and only encodes the payload per message - while also validating
every field, which the seed did not. Target: >= 5x.

    python benchmarks/bench_events_encode.py [N]
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable, Sequence

from lakebus_dagster.events import EnvelopeEncoder, EventBase, GeneratorConfig, default_registry, generate_events
from lakebus_dagster.events.schema import derive_schema


def as_version_1(event: EventBase) -> EventBase:
    """The generator's event (version 2: a Decimal amount, a datetime) as version 1 of its type (a double
    amount, ``ts`` only): the seed's shape, which ``json`` can write without help."""
    model = default_registry.get(event.event, 1).model
    names = {f.name for f in dataclasses.fields(model)}
    return model(**{**{k: v for k, v in dataclasses.asdict(event).items() if k in names}, "schema_version": 1})


def seed_encode(event: EventBase) -> bytes:
    """The seed's way: reflect the model into a schema and dump the whole envelope, per message."""
    schema = derive_schema(event.event, type(event)).to_json()
    envelope = {"schema": schema, "payload": dataclasses.asdict(event)}
    return json.dumps(envelope, separators=(",", ":")).encode("utf-8")


def _rate(encode: Callable[[EventBase], bytes], events: Sequence[EventBase]) -> float:
    start = time.perf_counter()
    for event in events:
        encode(event)
    return len(events) / (time.perf_counter() - start)


def run(n: int = 50000) -> dict[str, float]:
    """Encode the same ``n`` generated events both ways (as version 1, the seed's shape); returns
    envelopes/s and their ratio, and the SDK's rate on version 2 (typed money and time) beside."""
    typed = list(generate_events(GeneratorConfig(count=n, seed=7)))
    events = [as_version_1(e) for e in typed]
    encoder = EnvelopeEncoder()
    for event in events[:100]:  # same documents, and warms the encoder's per-version cache
        assert json.loads(encoder.encode(event)) == json.loads(seed_encode(event))
    sdk = _rate(encoder.encode, events)
    seed = _rate(seed_encode, events)
    encoder.encode(typed[0])
    return {"n": n, "sdk_per_s": sdk, "seed_per_s": seed, "ratio": sdk / seed, "sdk_v2_per_s": _rate(encoder.encode, typed)}


def main(argv: Sequence[str]) -> None:
    result = run(int(argv[0]) if argv else 50000)
    print(
        f"n={result['n']}: SDK {result['sdk_per_s']:,.0f} envelopes/s, "
        f"seed {result['seed_per_s']:,.0f} envelopes/s, ratio {result['ratio']:.1f}x (target >= 5x); "
        f"SDK on version 2 (decimal, timestamp) {result['sdk_v2_per_s']:,.0f} envelopes/s"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
