"""The topic inventory's alert decisions: plain data in (the cursor's known topics, this tick's
seen ones, lakebus's own topics), alerts and the next known state out — no Kafka, no Dagster.

A topic's entry is ``{"source", "hash", "shape"}`` plus, on a topic whose records name their event
type, ``"events": {type: {"source", "hash", "shape"}}``. On such a topic the whole topic's hash is
not compared (it moves with the sample's mix of types): each event type is, on its own. A type
absent from this sample keeps its last known schema (producers pause one type while sending
another). A type first seen is one info-level alert; a known type's changed schema is one alert
naming the topic and the type. A known entry without ``"events"`` (a cursor written before
per-type schemas, or a topic whose records did not name types before) takes this tick's types as
its baseline, silently, and keeps its whole-topic shape as ``"legacy_shape"``: a type seen later
whose fields that shape already held was there before, and is recorded silently too (no burst of
"new event type" alerts after an upgrade); a type with a field it never held is news.
"""

from __future__ import annotations

from typing import Any

from lakebus_dagster.defs.alerts import make_alert
from lakebus_dagster.inventory.own_topics import OwnTopics
from lakebus_dagster.inventory.schema import EMPTY, TopicSchema, diff_shapes

NO_OWN_TOPICS = OwnTopics(frozenset(), frozenset(), frozenset())


def schema_entry(schema: TopicSchema) -> dict[str, Any]:
    """What the cursor keeps of a topic's schema (plain JSON)."""
    entry: dict[str, Any] = {"source": schema.source, "hash": schema.hash, "shape": schema.shape}
    if schema.events:
        entry["events"] = {kind: {"source": s.source, "hash": s.hash, "shape": s.shape} for kind, s in schema.events}
    return entry


def _changed(old: dict, new: dict) -> bool:
    return new["source"] != EMPTY and old["source"] != EMPTY and old["hash"] != new["hash"]


def _diff_text(old: dict, new: dict) -> str:
    return "\n".join(diff_shapes(old["shape"], new["shape"]).lines() or [f"source {old['source']} → {new['source']}"])


def _event_changes(name: str, old: dict, new: dict) -> tuple[list[dict], dict]:
    """Per event type: a new type is one info alert, a changed type one alert; the merged entry."""
    known, seen = old.get("events"), new["events"]
    if known is None:  # no per-type baseline yet: this sample is it
        return [], {**new, "legacy_shape": old["shape"]}
    legacy = old.get("legacy_shape")
    alerts, merged = [], dict(known)
    for kind in sorted(seen):
        s = seen[kind]
        if kind not in known and legacy is not None and _within(s["shape"], legacy):
            pass  # a type the whole-topic schema already held
        elif kind not in known:
            alerts.append({**make_alert("schema", f"topic {name}: new event type {kind}",
                                        f"schema: {s['source']}, hash {s['hash'][:16]}\n"
                                        + "\n".join(f"+ {p}: {t}" for p, t in sorted(s["shape"].items())),
                                        f"schema:{name}:{kind}"), "level": "info"})
        elif _changed(known[kind], s):
            alerts.append(make_alert("schema", f"schema of event {kind} on topic {name} changed "
                                     f"({known[kind]['hash'][:12]} → {s['hash'][:12]})",
                                     _diff_text(known[kind], s), f"schema:{name}:{kind}"))
        merged[kind] = s
    return alerts, {**new, "events": merged, **({"legacy_shape": legacy} if legacy is not None else {})}


def _within(shape: dict[str, str], whole: dict[str, str]) -> bool:
    """Every field of ``shape`` is in ``whole`` with types ``whole`` had there."""
    return all(p in whole and set(t.split("|")) <= set(whole[p].split("|")) for p, t in shape.items())


def inventory_changes(known: dict[str, dict], seen: dict[str, dict],
                      own: OwnTopics = NO_OWN_TOPICS) -> tuple[list[dict], dict[str, dict]]:
    """Alerts for the differences between the cursor's ``known`` topics and this tick's ``seen`` ones,
    and the new known state. ``own.expected`` topics are recorded without an alert when they appear,
    ``own.bookkeeping`` ones are never alerted, the schema changes of ``own.schema_watched_elsewhere``
    (the DLQs) are recorded without an alert."""
    quiet_schema = own.bookkeeping | own.schema_watched_elsewhere
    alerts, after = [], {}
    for name in sorted(set(seen) - set(known)):
        s = seen[name]
        if name not in own.expected and name not in own.bookkeeping:
            alerts.append(make_alert("topic", f"topic {name} appeared", f"schema: {s['source']}, hash {s['hash'][:16]}", f"topic:{name}"))
        after[name] = s
    for name in sorted(set(known) - set(seen) - own.bookkeeping):
        alerts.append(make_alert("topic", f"topic {name} disappeared", f"last schema hash {known[name]['hash'][:16]}", f"topic:{name}"))
    for name in sorted(set(known) & set(seen)):
        old, new = known[name], seen[name]
        if new["source"] == EMPTY:  # emptied by retention: the shape has not changed
            after[name] = old
        elif name in quiet_schema:
            after[name] = new
        elif "events" in new:
            found, after[name] = _event_changes(name, old, new)
            alerts += found
        elif _changed(old, new):
            alerts.append(make_alert("schema", f"schema of topic {name} changed ({old['hash'][:12]} → {new['hash'][:12]})",
                                     _diff_text(old, new), f"schema:{name}"))
            after[name] = new
        else:
            after[name] = new
    return alerts, after
