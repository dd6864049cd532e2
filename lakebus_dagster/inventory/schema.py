"""A topic's schema: the declared Connect schema when records carry Schema+JSON envelopes, otherwise
inferred from a bounded sample of JSON records — and a stable hash of it.

Seed 004 replaced a schema registry by "consume, then derive a schema, then md5 it". Here the
derivation is field paths (``a.b``, arrays as ``a[]``) with their JSON types, nullability and the
share of sampled records that have each field. The **hash** covers only what describes the
*shape* — field paths and their non-null types (declared schemas: Connect types and optionality) —
in canonical JSON (sorted keys, no spaces) through sha256. Shares and "seen null" depend on which
records happen to be in the sample, so they are shown but not hashed: otherwise the hash would flap
and every flap would be an alert.

A topic whose records all carry an ``event`` field (the one-topic bus: ``bet``, ``recharge``, …
interleaved, bare or in Connect envelopes) also gets one schema per event type
(:attr:`TopicSchema.events`): the whole topic's shape moves whenever the sample's mix of types
does, one type's shape only when that type changes.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from lakebus_dagster.jsontypes import json_type

DECLARED, INFERRED, NOT_JSON, EMPTY = "declared (Connect envelope)", "inferred (JSON sample)", "not JSON", "no records"
#: the payload field naming a record's event type on a topic that carries several
EVENT_FIELD = "event"


@dataclass(frozen=True)
class FieldSchema:
    path: str
    types: tuple[str, ...]
    nullable: bool
    share: float  # of sampled records having the field

    @property
    def type_text(self) -> str:
        return "|".join(self.types)


@dataclass(frozen=True)
class TopicSchema:
    source: str
    fields: tuple[FieldSchema, ...] = ()
    sampled: int = 0
    non_json: int = 0
    schema_names: tuple[str, ...] = ()
    #: (event type, its schema), sorted, when every sampled record names its event type; else empty
    events: tuple[tuple[str, TopicSchema], ...] = ()

    @property
    def shape(self) -> dict[str, str]:
        """What the hash covers: path → non-null type(s) (declared: ``type`` or ``type?`` if optional)."""
        return {f.path: f.type_text for f in self.fields}

    @property
    def hash(self) -> str:
        canonical = json.dumps({"source": self.source, "fields": self.shape}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    def rows(self) -> list[dict[str, Any]]:
        return [{"field": f.path, "type": f.type_text, "nullable": "yes" if f.nullable else "no",
                 "share of records": f"{f.share:.0%}"} for f in self.fields]


def is_envelope(value: Any) -> bool:
    """A Kafka Connect JsonConverter record with schemas enabled: ``{"schema": {...type...}, "payload": ...}``."""
    return isinstance(value, dict) and set(value) == {"schema", "payload"} and isinstance(value["schema"], dict) and "type" in value["schema"]


#: Connect's logical types, named as lakebus names them (the physical type, bytes or int64, says less)
_DECIMAL, _TIMESTAMP = "org.apache.kafka.connect.data.Decimal", "org.apache.kafka.connect.data.Timestamp"


def _connect_type(field_schema: Mapping[str, Any]) -> str:
    """``int32``, ``string``; ``decimal(18,2)`` and ``timestamp`` for Connect's Decimal and Timestamp."""
    name, parameters = field_schema.get("name"), field_schema.get("parameters") or {}
    if name == _DECIMAL:
        return f"decimal({parameters.get('connect.decimal.precision', '38')},{parameters.get('scale', '?')})"
    if name == _TIMESTAMP:
        return "timestamp"
    return str(field_schema.get("type"))


def _declared_fields(schema: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, str, bool]]:
    """(path, Connect type, optional) of a Connect schema; structs flattened to dotted paths."""
    if schema.get("type") == "struct":
        for f in schema.get("fields", []):
            name = f"{prefix}.{f['field']}" if prefix else str(f["field"])
            if f.get("type") == "struct":
                yield name, "struct", bool(f.get("optional", False))
                yield from _declared_fields(f, name)
            else:
                yield name, _connect_type(f), bool(f.get("optional", False))
    else:
        yield prefix or "$", str(schema.get("type")), bool(schema.get("optional", False))




def _walk(value: Any, prefix: str, out: dict[str, set[str]]) -> None:
    kind = json_type(value)
    out[prefix or "$"].add(kind)
    if kind == "object":
        for key, child in value.items():
            _walk(child, f"{prefix}.{key}" if prefix else str(key), out)
    elif kind == "array":
        for child in value:
            _walk(child, f"{prefix or '$'}[]", out)


def event_of(value: Any) -> str | None:
    """The event type a parsed record names (its envelope's payload or itself), if any."""
    payload = value["payload"] if is_envelope(value) else value
    kind = payload.get(EVENT_FIELD) if isinstance(payload, dict) else None
    return kind if isinstance(kind, str) and kind else None


def infer_schema(values: Iterable[bytes | str | None]) -> TopicSchema:
    """The schema of a sample of record values, per event type too when every record names one
    (see the module doc)."""
    parsed: list[Any] = []
    non_json = 0
    for raw in values:
        if raw is None:
            parsed.append(None)
            continue
        try:
            parsed.append(json.loads(raw))
        except (ValueError, UnicodeDecodeError):
            non_json += 1
    if not parsed and not non_json:
        return TopicSchema(EMPTY)
    if not parsed:
        return TopicSchema(NOT_JSON, (FieldSchema("$", ("bytes",), False, 1.0),), non_json, non_json)
    whole = _schema_of(parsed, non_json)
    records = [v for v in parsed if v is not None]  # tombstones belong to no event type
    kinds = [event_of(v) for v in records]
    if not records or None in kinds:
        return whole
    groups: dict[str, list[Any]] = defaultdict(list)
    for kind, value in zip(kinds, records):
        groups[kind].append(value)  # type: ignore[index]
    return replace(whole, events=tuple((kind, _schema_of(group, 0)) for kind, group in sorted(groups.items())))


def _schema_of(parsed: list[Any], non_json: int) -> TopicSchema:
    if all(is_envelope(v) for v in parsed):
        return _declared(parsed, non_json)
    return _inferred([v["payload"] if is_envelope(v) else v for v in parsed], non_json)


def _declared(envelopes: list[dict], non_json: int) -> TopicSchema:
    seen: dict[str, set[str]] = defaultdict(set)
    counts: dict[str, int] = defaultdict(int)
    names = set()
    for env in envelopes:
        schema = env["schema"]
        names.add(f"{schema.get('name', schema.get('type'))}" + (f" v{schema['version']}" if "version" in schema else ""))
        for path, kind, optional in _declared_fields(schema):
            seen[path].add(kind + ("?" if optional else ""))
            counts[path] += 1
    n = len(envelopes)
    fields = tuple(
        FieldSchema(path, tuple(sorted(seen[path])), any(t.endswith("?") for t in seen[path]) or counts[path] < n, counts[path] / n)
        for path in sorted(seen)
    )
    return TopicSchema(DECLARED, fields, n + non_json, non_json, tuple(sorted(names)))


def _inferred(values: list[Any], non_json: int) -> TopicSchema:
    counts: dict[str, int] = defaultdict(int)
    types: dict[str, set[str]] = defaultdict(set)
    for value in values:
        found: dict[str, set[str]] = defaultdict(set)
        _walk(value, "", found)
        for path, kinds in found.items():
            counts[path] += 1
            types[path] |= kinds
    n = len(values)
    fields = tuple(
        FieldSchema(
            path,
            tuple(sorted(types[path] - {"null"})) or ("null",),
            "null" in types[path] or counts[path] < n,
            counts[path] / n,
        )
        for path in sorted(types)
        if path != "$" or types[path] - {"object"}  # a top-level object is implied by its fields
    )
    return TopicSchema(INFERRED, fields, n + non_json, non_json)


@dataclass(frozen=True)
class SchemaDiff:
    added: dict[str, str] = field(default_factory=dict)
    removed: dict[str, str] = field(default_factory=dict)
    changed: dict[str, tuple[str, str]] = field(default_factory=dict)

    def lines(self) -> list[str]:
        return (
            [f"+ {p}: {t}" for p, t in sorted(self.added.items())]
            + [f"- {p}: {t}" for p, t in sorted(self.removed.items())]
            + [f"~ {p}: {a} → {b}" for p, (a, b) in sorted(self.changed.items())]
        )


def diff_shapes(before: Mapping[str, str], after: Mapping[str, str]) -> SchemaDiff:
    """Field-level difference of two :attr:`TopicSchema.shape` maps."""
    return SchemaDiff(
        added={p: t for p, t in after.items() if p not in before},
        removed={p: t for p, t in before.items() if p not in after},
        changed={p: (before[p], t) for p, t in after.items() if p in before and before[p] != t},
    )
