"""Kafka provenance on every ODS row: where on the bus each row came from.

The Iceberg project's own ``org.apache.iceberg.connect.transforms.KafkaMetadataTransform``
(``iceberg-kafka-connect-transforms``, on Connect's plugin path) appends the record's topic,
partition, offset and timestamp to its value before the sink writes it. With ``nested=false`` it
adds four top-level columns named ``<field_name>_<part>``:

=====================  ==============================  ==========================
column                 Connect type                    Iceberg type
=====================  ==============================  ==========================
``_kafka_topic``       ``STRING`` (required)           ``string``
``_kafka_partition``   ``INT32`` (required)            ``int``
``_kafka_offset``      ``INT64`` (required)            ``long``
``_kafka_timestamp``   ``INT64`` (optional, epoch ms)  ``long``
=====================  ==============================  ==========================

Flat columns rather than one nested struct so the offset ledger can push a plain
``_kafka_offset >= n`` row filter into pyiceberg's file pruning (column stats per data file) and
Spark/SQL users can read them without struct syntax. The sink adds the columns to existing tables
by schema evolution (``iceberg.tables.evolve-schema-enabled``); rows written before have nulls.

Caveat of the transform (1.11.0): it keeps its configuration in a *static* field, so every
connector on a worker that uses it must configure it identically — lakebus always does (this
module is the only place that configures it). Tombstones (null values) pass through unchanged.
"""

from __future__ import annotations

#: the transform's alias in the connector's ``transforms`` chain
PROVENANCE_ALIAS = "provenance"
PROVENANCE_CLASS = "org.apache.iceberg.connect.transforms.KafkaMetadataTransform"
#: the transform's ``field_name``: the prefix of the provenance columns
PROVENANCE_PREFIX = "_kafka"

TOPIC_COLUMN = f"{PROVENANCE_PREFIX}_topic"
PARTITION_COLUMN = f"{PROVENANCE_PREFIX}_partition"
OFFSET_COLUMN = f"{PROVENANCE_PREFIX}_offset"
TIMESTAMP_COLUMN = f"{PROVENANCE_PREFIX}_timestamp"
PROVENANCE_COLUMNS = (TOPIC_COLUMN, PARTITION_COLUMN, OFFSET_COLUMN, TIMESTAMP_COLUMN)


def provenance_transform() -> tuple[str, dict[str, str]]:
    """``(alias, settings)`` of the provenance SMT; settings are relative to ``transforms.<alias>.``."""
    return PROVENANCE_ALIAS, {
        "type": PROVENANCE_CLASS,
        "field_name": PROVENANCE_PREFIX,
        "nested": "false",
    }


def chain_transforms(cfg: dict[str, str], transforms: list[tuple[str, dict[str, str]]]) -> None:
    """Write an ordered SMT chain into a connector config: ``transforms`` = the aliases joined in
    order, then ``transforms.<alias>.<key>`` for each setting. Aliases must be unique."""
    aliases = [alias for alias, _ in transforms]
    if len(set(aliases)) != len(aliases):
        raise ValueError(f"duplicate transform alias in {aliases}")
    if not transforms:
        return
    cfg["transforms"] = ",".join(aliases)
    for alias, settings in transforms:
        for key, value in settings.items():
            cfg[f"transforms.{alias}.{key}"] = value
