"""The bus inventory as DataHub metadata: each topic with its schema per event type, and the lineage
topic → ODS table → DWS table.

Why DataHub's own Python classes (``acryl-datahub``) and not hand-written JSON: DataHub validates
what it ingests against its aspect schemas; building the proposals with its classes means a field
DataHub renames or retypes breaks here, in a test, not silently on the server.

What is published (one ``MetadataChangeProposalWrapper`` per aspect, all UPSERTs, so publishing
twice gives the same catalog):

* every inventoried topic: a ``kafka`` dataset with its properties (partitions, retention, the
  event types seen) and a ``schemaMetadata`` whose field paths are ``<event>.<field>`` on a topic
  that carries several event types (the bus), else the field path itself;
* every ODS table: an ``iceberg`` dataset upstream of the bus topic;
* every DWS table: an ``iceberg`` dataset upstream of the ODS tables its SQL reads.

The types: Connect's declared types (``int32``, ``double``, ...) and inferred JSON types (``integer``,
``number``, ...) map to DataHub's number / string / boolean / record / array classes; anything else
is kept as the native type with DataHub's null class, never dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lakebus_dagster.inventory.topics import TopicInventory

#: DataHub's environment (fabric) of every dataset lakebus publishes
ENV = "PROD"
KAFKA, ICEBERG = "kafka", "iceberg"

_NUMBERS = {"int8", "int16", "int32", "int64", "float", "double", "integer", "number"}
_STRINGS = {"string", "bytes"}


def dataset_urn(platform: str, name: str) -> str:
    from datahub.emitter.mce_builder import make_dataset_urn

    return make_dataset_urn(platform, name, ENV)


def _field_type(native: str) -> Any:
    from datahub.metadata.schema_classes import (ArrayTypeClass, BooleanTypeClass, NullTypeClass, NumberTypeClass,
                                                 RecordTypeClass, SchemaFieldDataTypeClass, StringTypeClass, TimeTypeClass)

    kinds = {k.rstrip("?") for k in native.split("|")} - {"null"}
    kind = next(iter(kinds)) if len(kinds) == 1 else None
    cls = (NumberTypeClass if kind in _NUMBERS or (kind or "").startswith("decimal(") else
           TimeTypeClass if kind == "timestamp" else StringTypeClass if kind in _STRINGS else
           BooleanTypeClass if kind == "boolean" else RecordTypeClass if kind in ("struct", "object") else
           ArrayTypeClass if kind == "array" else NullTypeClass)
    return SchemaFieldDataTypeClass(type=cls())


def topic_proposals(inventory: Mapping[str, TopicInventory]) -> list[Any]:
    """Properties and schema of every inventoried topic."""
    from datahub.emitter.mcp import MetadataChangeProposalWrapper
    from datahub.metadata.schema_classes import (DatasetPropertiesClass, OtherSchemaClass, SchemaFieldClass,
                                                 SchemaMetadataClass)

    out = []
    for name, inv in sorted(inventory.items()):
        urn, schema = dataset_urn(KAFKA, name), inv.schema
        groups = schema.events or (("", schema),)
        fields = [SchemaFieldClass(fieldPath=f"{event}.{f.path}" if event else f.path, nativeDataType=f.type_text,
                                   type=_field_type(f.type_text), nullable=f.nullable,
                                   description=f"in {f.share:.0%} of the sampled {event or 'records'}")
                  for event, group in groups for f in group.fields]
        properties = {"partitions": str(inv.partitions), "replication_factor": str(inv.replication_factor),
                      "schema_source": schema.source, "sampled_records": str(schema.sampled),
                      **({"event_types": ", ".join(e for e, _ in schema.events)} if schema.events else {}),
                      **{k: v for k, v in inv.configs.items() if k in ("retention.ms", "cleanup.policy")}}
        out.append(MetadataChangeProposalWrapper(entityUrn=urn, aspect=DatasetPropertiesClass(
            name=name, description="a Kafka topic, as lakebus's bus inventory sampled it", customProperties=properties)))
        out.append(MetadataChangeProposalWrapper(entityUrn=urn, aspect=SchemaMetadataClass(
            schemaName=name, platform=f"urn:li:dataPlatform:{KAFKA}", version=0, hash=schema.hash,
            platformSchema=OtherSchemaClass(rawSchema=", ".join(schema.schema_names) or schema.source), fields=fields)))
    return out


def lineage_proposals(bus_topic: str, ods_tables: Iterable[str], dws_sources: Mapping[str, Iterable[str]]) -> list[Any]:
    """The bus topic upstream of every ODS table, and each DWS table's ODS tables upstream of it."""
    from datahub.emitter.mcp import MetadataChangeProposalWrapper
    from datahub.metadata.schema_classes import DatasetLineageTypeClass, UpstreamClass, UpstreamLineageClass

    def upstream(urns: Iterable[str]) -> UpstreamLineageClass:
        return UpstreamLineageClass(upstreams=[UpstreamClass(dataset=u, type=DatasetLineageTypeClass.TRANSFORMED)
                                               for u in sorted(urns)])

    topic = dataset_urn(KAFKA, bus_topic)
    out = [MetadataChangeProposalWrapper(entityUrn=dataset_urn(ICEBERG, t), aspect=upstream([topic]))
           for t in sorted(ods_tables)]
    out += [MetadataChangeProposalWrapper(entityUrn=dataset_urn(ICEBERG, dws),
                                          aspect=upstream(dataset_urn(ICEBERG, s) for s in sources))
            for dws, sources in sorted(dws_sources.items())]
    return out
