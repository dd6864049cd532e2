"""The typed Iceberg change tables: one append-only table per captured source table, created by
lakebus from the database's catalog before the sink starts.

Why lakebus creates them (and not the sink's auto-create): with ``decimal.handling.mode=string`` and
``time.precision.mode=connect`` the Debezium records carry a decimal as a string, a ``timestamptz``
as an ISO string and a ``date`` as a Connect ``Date``. The Iceberg 1.11 sink converts each correctly
*into an existing column of the right type* (``decimal(p,s)``, ``timestamptz``, ``date``), but its
auto-create would make them string / string / date (and an unconstrained ``numeric`` a struct) —
checked against the research notes' type table by the cdc integration test.

Every column is optional (deletes carry only the key; ``schema-force-optional`` on the sink). After
the row's own columns come the change columns (``__op``, ``__lsn``, ``__txId``, ``__source_ts_ms``,
``__table``, ``__deleted``); the sink's provenance columns (``_kafka_*``) and any column added to the
source later arrive by the sink's schema evolution — typed by the sink's mapping (a ``timestamptz`` or a
``numeric`` as a string); the current-state MERGE casts those into the type :func:`iceberg_type` gives
them (:mod:`lakebus_dagster.cdc.current_state`). An existing table gets the columns it lacks
(added, never dropped or retyped): running provisioning twice changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)

from lakebus_dagster.bus.provenance import OFFSET_COLUMN, PARTITION_COLUMN
from lakebus_dagster.bus.table_properties import CREATE_PROPERTIES
from lakebus_dagster.cdc.capture import (
    DELETED_COLUMN,
    LSN_COLUMN,
    OP_COLUMN,
    PRIMARY_KEY_PROPERTY,
    SOURCE_TS_COLUMN,
    TABLE_COLUMN,
    TX_COLUMN,
    CaptureError,
    CaptureSpec,
)
from lakebus_dagster.cdc.database import Column
from lakebus_dagster.provision.outcome import Action, Outcome

#: PostgreSQL ``information_schema`` data types → Iceberg, under Debezium's string decimals and
#: connect time precision (numeric is handled apart: its precision and scale)
_SIMPLE: Mapping[str, IcebergType] = {
    "smallint": IntegerType(),
    "integer": IntegerType(),
    "bigint": LongType(),
    "boolean": BooleanType(),
    "real": FloatType(),
    "double precision": DoubleType(),
    "text": StringType(),
    "character varying": StringType(),
    "character": StringType(),
    "uuid": StringType(),
    "json": StringType(),
    "jsonb": StringType(),
    "date": DateType(),
    "timestamp with time zone": TimestamptzType(),
    # connect mode: a Connect Timestamp (ms), which the sink writes correctly into a timestamp column
    "timestamp without time zone": TimestampType(),
    "bytea": BinaryType(),
}

#: the change columns after the row's own (ExtractNewRecordState's add.fields and __deleted)
CHANGE_COLUMNS: tuple[tuple[str, IcebergType], ...] = (
    (OP_COLUMN, StringType()),
    (LSN_COLUMN, LongType()),
    (TX_COLUMN, LongType()),
    (SOURCE_TS_COLUMN, LongType()),
    (TABLE_COLUMN, StringType()),
    (DELETED_COLUMN, StringType()),
)


def is_mapped(column: Column) -> bool:
    """Whether :func:`iceberg_type` maps ``column``'s type (else it refuses it, naming the column)."""
    return column.data_type == "numeric" or column.data_type in _SIMPLE


def iceberg_type(spec: CaptureSpec, table: str, column: Column) -> IcebergType:
    """The change table's type of one source column, or a :class:`CaptureError` naming it."""
    if column.data_type == "numeric":
        if column.numeric_precision is None:
            # an unconstrained numeric has no fixed scale: a decimal column would round silently
            return StringType()
        if column.numeric_precision > 38:
            raise CaptureError(f"capture {spec.name!r}: column {spec.qualified(table)}.{column.name} is "
                               f"numeric({column.numeric_precision},{column.numeric_scale}); Iceberg decimals hold at most 38 digits")
        return DecimalType(column.numeric_precision, column.numeric_scale or 0)
    found = _SIMPLE.get(column.data_type)
    if found is None:
        raise CaptureError(f"capture {spec.name!r}: column {spec.qualified(table)}.{column.name} has type "
                           f"{column.data_type!r}, which lakebus does not map to a change-table type yet "
                           f"(mapped: numeric, {', '.join(sorted(_SIMPLE))})")
    return found


def change_table_fields(spec: CaptureSpec, table: str, columns: Sequence[Column]) -> list[tuple[str, IcebergType]]:
    names = [c.name for c in columns]
    clash = sorted(set(names) & {name for name, _ in CHANGE_COLUMNS})
    if clash:
        raise CaptureError(f"capture {spec.name!r}: table {spec.qualified(table)} has column(s) {', '.join(clash)}, "
                           "which the change table uses for the change itself")
    return [(c.name, iceberg_type(spec, table, c)) for c in columns] + list(CHANGE_COLUMNS)


def table_key(spec: CaptureSpec, table: str, columns: Sequence[Column]) -> str:
    """The key the current state merges on: the declared one, else the database's primary key."""
    return ",".join(spec.key_of(table) or [c.name for c in columns if c.primary_key])


def change_table_schema(fields: Sequence[tuple[str, IcebergType]]) -> Schema:
    return Schema(*(NestedField(i, name, typ, required=False) for i, (name, typ) in enumerate(fields, start=1)))


def reconcile_change_tables(catalog: Catalog, spec: CaptureSpec, columns: Mapping[str, Sequence[Column]]) -> list[Outcome]:
    """Create the namespace and each missing change table; add the columns an existing one lacks."""
    outcomes = []
    if (spec.namespace,) not in {tuple(ns) for ns in catalog.list_namespaces()}:
        catalog.create_namespace_if_not_exists(spec.namespace)
        outcomes.append(Outcome("namespace", spec.namespace, Action.CREATED))
    else:
        outcomes.append(Outcome("namespace", spec.namespace, Action.UNCHANGED))
    for table in spec.tables:
        name = spec.change_table(table)
        fields = change_table_fields(spec, table, columns[table])
        key = table_key(spec, table, columns[table])
        properties = {**CREATE_PROPERTIES, PRIMARY_KEY_PROPERTY: key}
        try:
            live = catalog.load_table(name)
        except (NoSuchTableError, NoSuchNamespaceError):
            catalog.create_table(name, change_table_schema(fields), properties=properties)
            outcomes.append(Outcome("table", name, Action.CREATED, ", ".join(f"{n} {t}" for n, t in fields)))
            continue
        if live.properties.get(PRIMARY_KEY_PROPERTY) != key:
            with live.transaction() as tx:
                tx.set_properties(**{PRIMARY_KEY_PROPERTY: key})
            outcomes.append(Outcome("table", name, Action.UPDATED, f"{PRIMARY_KEY_PROPERTY}={key}"))
            continue
        present = {f.name: f.field_type for f in live.schema().fields}
        missing = [(n, t) for n, t in fields if n not in present]
        retyped = [f"{n}: live {present[n]}, declared {t}" for n, t in fields if n in present and present[n] != t]
        if missing:
            with live.update_schema() as update:
                for n, t in missing:
                    update.add_column(n, t)
            outcomes.append(Outcome("table", name, Action.UPDATED, f"added {', '.join(f'{n} {t}' for n, t in missing)}"))
        elif retyped:
            outcomes.append(Outcome("table", name, Action.DRIFT, "; ".join(retyped)))
        else:
            outcomes.append(Outcome("table", name, Action.UNCHANGED, f"{len(fields)} columns as declared"))
    return outcomes


#: the change coordinates a current-state row keeps (:data:`lakebus_dagster.cdc.current_state.CHANGE_COORDINATES`),
#: typed for a table created before the sink's first commit (the offsets' columns wide enough for either width)
CURRENT_COORDINATES: tuple[tuple[str, IcebergType], ...] = (
    (OP_COLUMN, StringType()), (SOURCE_TS_COLUMN, LongType()), (LSN_COLUMN, LongType()),
    (PARTITION_COLUMN, LongType()), (OFFSET_COLUMN, LongType()))


def reconcile_current_tables(catalog: Catalog, spec: CaptureSpec, columns: Mapping[str, Sequence[Column]]) -> list[Outcome]:
    """Create each missing current-state table, empty, typed like its change table's row columns (the
    current-state MERGE fills it and adds the columns the change table gains later); an existing one is left."""
    outcomes = []
    for table in spec.tables:
        name = spec.current_table(table)
        try:
            catalog.load_table(name)
            outcomes.append(Outcome("table", name, Action.UNCHANGED, "exists"))
            continue
        except (NoSuchTableError, NoSuchNamespaceError):
            pass
        fields = [(c.name, iceberg_type(spec, table, c)) for c in columns[table]] + list(CURRENT_COORDINATES)
        key = table_key(spec, table, columns[table])
        catalog.create_table(name, change_table_schema(fields), properties={**CREATE_PROPERTIES, PRIMARY_KEY_PROPERTY: key})
        outcomes.append(Outcome("table", name, Action.CREATED, f"empty, key {key}"))
    return outcomes
