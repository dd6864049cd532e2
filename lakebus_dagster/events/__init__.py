"""Python event SDK: typed event models -> validated Kafka Connect Schema+JSON envelopes -> Kafka.

Services send every business event to one topic; the Iceberg sink routes each record by its
``event`` field to ``<namespace>.dwd_biz_<event>`` (see :func:`routes`).

    from lakebus_dagster.events import Bet, EventProducer

    with EventProducer("events", {"bootstrap.servers": "127.0.0.1:19092"}) as producer:
        producer.send(Bet(category="biz", event="bet", log_date="2025-11-25", hour="18",
                          plat_id=1, app_id=10406, ts=1732527602000, schema_version=1,
                          user_id=2001, amount=10.0))
"""

from .envelope import EncodedEvent, EnvelopeEncoder
from .errors import (
    DeliveryError,
    DeliveryFailure,
    EventError,
    EventValidationError,
    SchemaError,
    UnknownEventError,
)
from .samples import (
    ExpectedAggregates,
    GeneratorConfig,
    day_range,
    expected_aggregates,
    generate_events,
)
from .models import Bet, EventBase, Recharge
from .producer import EventProducer, KeyFunc, default_key
from .registry import (
    DEFAULT_NAMESPACE,
    EventRegistry,
    EventVersion,
    default_registry,
    routes,
    table_name,
)
from .schema import ConnectField, ConnectSchema, derive_schema
from .types import ConnectType, Float32, Int32

__all__ = [
    "DEFAULT_NAMESPACE",
    "Bet",
    "ConnectField",
    "ConnectSchema",
    "ConnectType",
    "DeliveryError",
    "DeliveryFailure",
    "EncodedEvent",
    "EnvelopeEncoder",
    "EventBase",
    "EventError",
    "EventProducer",
    "EventRegistry",
    "EventValidationError",
    "EventVersion",
    "ExpectedAggregates",
    "Float32",
    "GeneratorConfig",
    "Int32",
    "KeyFunc",
    "Recharge",
    "SchemaError",
    "UnknownEventError",
    "day_range",
    "default_key",
    "default_registry",
    "derive_schema",
    "expected_aggregates",
    "generate_events",
    "routes",
    "table_name",
]
