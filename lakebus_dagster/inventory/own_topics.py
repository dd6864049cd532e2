"""Which topics are lakebus's own, derived from what it provisions — the one answer the topic
inventory's alerts ask.

Provisioning creates the events bus's topics (:func:`lakebus_dagster.bus.desired.topic_specs`) and,
with change capture on, the capture's (:meth:`lakebus_dagster.cdc.capture.CaptureSpec.source_topics`
and ``sink_topics``); the Connect workers create their internal topics (``deploy/connect/``). Every
name here is read from those declarations, so a topic added to one of them is known here at once.

Three roles, because "ours" does not mean "silent" for all of them:

* **expected** — appearing is no news (provisioning made it); disappearing still is, and so are
  the schema changes of data topics (the bus topic, a capture's change topics);
* **bookkeeping** — never a subject of an alert: lakebus's and the connectors' own state (control,
  declared state, ledger, signal, heartbeat and Connect's internal topics), whose keys and shapes
  change as they work, and whose loss shows elsewhere (a FAILED connector, a failed ledger run);
* **schema watched elsewhere** — the DLQs: their records are whatever was rejected, and
  ``dlq_sensor`` alerts once per new reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakebus_dagster.bus.desired import topic_specs
from lakebus_dagster.bus.layout import BusLayout
from lakebus_dagster.cdc.capture import CaptureSpec

#: the Connect workers' internal topics (``config/offset/status.storage.topic`` of deploy/connect/ and
#: the Strimzi resource; a unit test reads them back from the properties file)
CONNECT_INTERNAL_TOPICS = ("_connect-configs", "_connect-offsets", "_connect-status")


@dataclass(frozen=True)
class OwnTopics:
    expected: frozenset[str]
    bookkeeping: frozenset[str]
    schema_watched_elsewhere: frozenset[str]

    @property
    def all(self) -> frozenset[str]:
        return self.expected | self.bookkeeping | self.schema_watched_elsewhere


def own_topics(bus: BusLayout, capture: CaptureSpec | None = None) -> OwnTopics:
    """lakebus's own topics in the events bus ``bus`` and the change capture ``capture`` (None: off)."""
    expected = {t.name for t in topic_specs(bus)}
    bookkeeping = {bus.control_topic.name, bus.state_topic.name, bus.replay_ledger_topic.name,
                   bus.offset_ledger_topic.name, *CONNECT_INTERNAL_TOPICS}
    dlqs = {bus.dlq_topic.name}
    if capture is not None:
        expected |= {t.name for t in (*capture.source_topics(), *capture.sink_topics())}
        # the signal topic is the capture's by name even where this deployment sends no signals
        bookkeeping |= {capture.control_topic.name, capture.heartbeat_topic.name, capture.signal_topic.name,
                        *(capture.ledger_topic(t).name for t in capture.tables)}
        dlqs.add(capture.dlq_topic.name)
    expected |= bookkeeping | dlqs
    return OwnTopics(frozenset(expected), frozenset(bookkeeping), frozenset(dlqs))
