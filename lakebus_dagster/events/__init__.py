"""Python event SDK: typed event models -> validated Kafka Connect Schema+JSON envelopes -> Kafka.

Services send every business event to one topic; the Iceberg sink routes each record by its
``event`` field to ``<namespace>.dwd_biz_<event>`` (see :func:`routes`).

    from datetime import datetime, timezone
    from decimal import Decimal
    from lakebus_dagster.events import BetV2, EventProducer

    with EventProducer("events", {"bootstrap.servers": "127.0.0.1:19092"}) as producer:
        producer.send(BetV2(category="biz", event="bet", log_date="2025-11-25", hour="18",
                            plat_id=1, app_id=10406, ts=1732527602000, schema_version=2,
                            event_time=datetime(2025, 11, 25, 18, 0, 2, tzinfo=timezone.utc),
                            user_id=2001, amount_decimal=Decimal("10.00")))
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
from .models import Bet, BetV2, EventBase, Recharge, RechargeV2
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
from .types import ConnectType, DecimalSpec, Float32, Int32, Money, Timestamp, decimal

__all__ = [
    "DEFAULT_NAMESPACE",
    "Bet",
    "BetV2",
    "ConnectField",
    "ConnectSchema",
    "ConnectType",
    "DecimalSpec",
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
    "Money",
    "Recharge",
    "RechargeV2",
    "SchemaError",
    "Timestamp",
    "UnknownEventError",
    "day_range",
    "decimal",
    "default_key",
    "default_registry",
    "derive_schema",
    "expected_aggregates",
    "generate_events",
    "routes",
    "table_name",
]
