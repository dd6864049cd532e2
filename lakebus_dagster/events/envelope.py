"""Schema+JSON envelopes: ``{"schema": {...}, "payload": {...}}`` as UTF-8 bytes.

The schema part is identical for every record of an event version and is most of the envelope,
so it is serialised once into a byte prefix ``{"schema":<schema>,"payload":`` and each record only
pays for its own payload plus one concatenation. The payload is validated and serialised in one
pass by a generated per-version function (:mod:`.fastpath`); values it does not handle go through
the reference path (:class:`~.validation.PayloadValidator`, then ``json``), which also produces
every error. The bytes are ``json.loads``-equal (and, for the same payload dict, byte-equal) to
``json.dumps({"schema": ..., "payload": ...})`` with compact separators.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from .errors import EventValidationError, UnknownEventError
from .fastpath import FastEncode, compile_fast_encoder
from .models import EventBase
from .registry import EventRegistry, EventVersion, default_registry
from .types import ConnectType
from .typed_values import json_writer
from .validation import MISSING, PayloadValidator

# One encoder instance: json.dumps(**kwargs) would build a new JSONEncoder per call.
# ensure_ascii=False keeps non-ASCII text as (validated) UTF-8 instead of 6-byte escapes.
_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_SUFFIX = b"}"


def envelope_prefix(schema: Mapping[str, Any]) -> bytes:
    return b'{"schema":' + _JSON.encode(schema).encode("utf-8") + b',"payload":'


@dataclass(frozen=True, slots=True)
class EncodedEvent:
    """An encoded record: its event name, validated payload (for keys) and envelope bytes."""

    event: str
    payload: dict[str, Any]
    value: bytes


def _payload_json(payload: Mapping[str, Any], writers: Mapping[str, Callable[[Any], str]]) -> str:
    """``payload`` as ``json`` writes it, except that the fields in ``writers`` (decimals, timestamps:
    values ``json`` cannot write, or would write as text) are written by their writer."""
    parts = []
    for name, value in payload.items():
        write = writers.get(name)
        text = _JSON.encode(value) if write is None or value is None else write(value)
        parts.append(f"{_JSON.encode(name)}:{text}")
    return "{" + ",".join(parts) + "}"


class _CompiledVersion:
    __slots__ = ("validator", "prefix", "get_values", "known_keys", "fast_encode", "writers", "decimals")

    def __init__(self, version: EventVersion) -> None:
        self.validator = PayloadValidator(version)
        self.known_keys = frozenset(self.validator.names)
        self.prefix = envelope_prefix(version.schema.to_json())
        self.get_values: Callable[[Any], tuple[Any, ...]] = operator.attrgetter(
            *self.validator.names
        )
        self.fast_encode: FastEncode = compile_fast_encoder(version)
        self.writers = {f.name: w for f in version.schema.fields if (w := json_writer(f)) is not None}
        self.decimals = frozenset(f.name for f in version.schema.fields if f.type is ConnectType.DECIMAL)

    def encode(self, values: Sequence[Any]) -> tuple[dict[str, Any], bytes]:
        """Validated payload and envelope bytes; raises ``EventValidationError`` if invalid."""
        result = self.fast_encode(values)
        if result is None:  # an unusual or invalid value: the reference path decides
            payload = self.validator.validate(values)
            body = _payload_json(payload, self.writers) if self.writers else _JSON.encode(payload)
        else:
            payload, body = result
        return payload, self.prefix + body.encode("utf-8") + _SUFFIX


class EnvelopeEncoder:
    """Validates records against the registry and encodes them as Schema+JSON envelopes.

    Accepts a registered model instance, or a mapping plus (optionally) the event name; without
    one the mapping's own ``event`` value is used. The mapping's ``schema_version`` selects the
    schema version, so records from producers on an older version still encode.
    """

    def __init__(self, registry: EventRegistry | None = None) -> None:
        self._registry = default_registry if registry is None else registry
        self._by_model: dict[type, _CompiledVersion] = {}
        self._by_version: dict[tuple[str, int], _CompiledVersion] = {}

    def encode(self, record: EventBase | Mapping[str, Any], event: str | None = None) -> bytes:
        return self.encode_parts(record, event)[2]

    def encode_json_payload(self, text: bytes | str) -> bytes:
        """A bare JSON payload (``{"event": ..., ...}``, no envelope) -> its validated envelope.

        The numbers are read as written: a decimal field keeps its digits (``json`` would hand the
        validator a binary float, which it refuses for money), every other number is what ``json``
        reads. Raises ``ValueError`` for text that is not a bare payload, ``EventValidationError``
        for one that does not validate.
        """
        data = json.loads(text, parse_float=Decimal)
        if not isinstance(data, dict) or "schema" in data or "event" not in data:
            raise ValueError("not a bare event payload")
        decimals = self._compiled_for_mapping(data, None).decimals
        record = {k: float(v) if type(v) is Decimal and k not in decimals else v for k, v in data.items()}
        return self.encode(record)

    def encode_event(
        self, record: EventBase | Mapping[str, Any], event: str | None = None
    ) -> EncodedEvent:
        return EncodedEvent(*self.encode_parts(record, event))

    def encode_parts(
        self, record: EventBase | Mapping[str, Any], event: str | None = None
    ) -> tuple[str, dict[str, Any], bytes]:
        """``(event, payload, value)`` of :meth:`encode_event` without building the wrapper.

        For per-message loops such as :meth:`EventProducer.send
        <lakebus_dagster.events.producer.EventProducer.send>`: a frozen dataclass costs about as
        much to construct as validating three fields.
        """
        # Models first: a dict lookup by type is cheaper than an isinstance check against an ABC.
        compiled = self._by_model.get(type(record))
        if compiled is not None and event is None:
            payload, value = compiled.encode(compiled.get_values(record))
        elif isinstance(record, Mapping):
            compiled = self._compiled_for_mapping(record, event)
            payload, value = compiled.encode(
                [record.get(name, MISSING) for name in compiled.validator.names]
            )
            unknown = record.keys() - compiled.known_keys
            if unknown:
                # The converter would drop them silently; a typo must not lose data.
                names = sorted(map(str, unknown))
                raise EventValidationError(
                    compiled.validator.event, names[0], f"unknown field(s) {names} not in schema"
                )
        else:
            compiled = self._compiled_for_model(type(record), event)
            payload, value = compiled.encode(compiled.get_values(record))
        return compiled.validator.event, payload, value

    def _compiled(self, version: EventVersion) -> _CompiledVersion:
        key = (version.event, version.version)
        compiled = self._by_version.get(key)
        if compiled is None:
            compiled = self._by_version[key] = _CompiledVersion(version)
        return compiled

    def _compiled_for_model(self, model: type, event: str | None) -> _CompiledVersion:
        compiled = self._by_model.get(model)
        if compiled is None:
            compiled = self._by_model[model] = self._compiled(self._registry.for_model(model))
        if event is not None and event != compiled.validator.event:
            raise EventValidationError(
                event, "event", f"{model.__name__} is registered as {compiled.validator.event!r}"
            )
        return compiled

    def _compiled_for_mapping(
        self, record: Mapping[str, Any], event: str | None
    ) -> _CompiledVersion:
        name = record.get("event") if event is None else event
        if not isinstance(name, str):
            raise UnknownEventError(
                name, "event", "no event name given and record has no string 'event'"
            )
        version = record.get("schema_version")
        try:
            return self._by_version[(name, version)]
        except (KeyError, TypeError):  # TypeError: unhashable schema_version
            # A missing schema_version resolves to the latest version, whose validation then
            # reports the field as missing.
            return self._compiled(self._registry.get(name, version))
