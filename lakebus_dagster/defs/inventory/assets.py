"""Observable assets: the bus's topic inventory (seed 004) and the Connect cluster view (seed 003).

Both are *observed*, never materialized: they describe systems lakebus reads. "Observe" in the UI
(or ``observe_bus_inventory``) records one observation whose metadata is the readable tables.
"""


import hashlib
import json
from typing import Any

import dagster as dg

from lakebus_dagster.connect import ConnectUnavailable
from lakebus_dagster.connect.worker_probe import probe_workers
from lakebus_dagster.defs.asset_keys import CONNECT_CLUSTER_KEY, TOPIC_INVENTORY_KEY
from lakebus_dagster.defs.inventory.constants import MAX_FIELDS_SHOWN, MAX_TOPICS_SHOWN
from lakebus_dagster.defs.inventory.resources import TopicInventoryResource
from lakebus_dagster.defs.resources import ConnectResource, KafkaResource
from lakebus_dagster.inventory.connect_view import connect_view
from lakebus_dagster.inventory.topics import TopicInventory, collect
from lakebus_dagster.markdown import markdown_table


def inventory_metadata(inventory: dict[str, TopicInventory], bounds: dict[str, Any]) -> dict[str, dg.MetadataValue]:
    shown = list(inventory.values())[:MAX_TOPICS_SHOWN]
    sections = []
    for inv in shown:
        s = inv.schema
        head = f"#### `{inv.name}`\n{s.source}, {s.sampled} record(s) sampled, hash `{s.hash[:16]}`"
        if s.schema_names:
            head += f", schemas: {', '.join(s.schema_names)}"
        if s.events:
            head += f", event types: {', '.join(f'{kind} (hash `{e.hash[:12]}`)' for kind, e in s.events)}"
        sections.append(head + "\n\n" + markdown_table(s.rows()[:MAX_FIELDS_SHOWN]))
    group_rows = [{"group": g.group, "topic": inv.name, "committed": g.committed, "lag": g.lag}
                  for inv in shown for g in inv.groups]
    return {
        "topic_count": dg.MetadataValue.int(len(inventory)),
        "topics": dg.MetadataValue.md(markdown_table([inv.row() for inv in shown])),
        "schemas": dg.MetadataValue.md("\n\n".join(sections) or "_no topics_"),
        "consumer_groups": dg.MetadataValue.md(markdown_table(group_rows)),
        "schema_hashes": dg.MetadataValue.json({inv.name: inv.schema.hash for inv in inventory.values()}),
        "bounds": dg.MetadataValue.json(bounds),
    }


def read_inventory(kafka: KafkaResource, topic_inventory: TopicInventoryResource) -> dict[str, TopicInventory]:
    from confluent_kafka import KafkaException

    try:
        return collect(kafka.admin(), kafka.consumer, topic_inventory.bounds())
    except KafkaException as exc:
        raise dg.Failure(f"Kafka at {kafka.bootstrap_servers} is unreachable: {exc.args[0]}", allow_retries=False) from exc


@dg.observable_source_asset(
    key=TOPIC_INVENTORY_KEY,
    group_name="bus",
    description="Every topic of the Kafka cluster: partitions, replication, retention and key configs, messages, rate and "
    "size estimated from a bounded sample, consumer groups and their lag, and each topic's schema (declared by Connect "
    "envelopes, else inferred from the sample) with a stable hash. topic_inventory_sensor alerts on changes.",
)
def topic_inventory(kafka: KafkaResource, topic_inventory: TopicInventoryResource) -> dg.ObserveResult:
    inventory = read_inventory(kafka, topic_inventory)
    digest = json.dumps({n: i.schema.hash for n, i in sorted(inventory.items())}, sort_keys=True)
    return dg.ObserveResult(metadata=inventory_metadata(inventory, topic_inventory.bounds().__dict__),
                            data_version=dg.DataVersion(hashlib.sha256(digest.encode()).hexdigest()[:16]))


@dg.observable_source_asset(
    key=CONNECT_CLUSTER_KEY,
    group_name="bus",
    description="The Kafka Connect cluster: version, every worker (each configured URL asked on its own — answering or "
    "not, version, connectors and tasks it runs, idle when it runs nothing — and any worker running tasks that no configured "
    "URL names), connectors, tasks and their workers, installed plugins with versions, every connector's config with "
    "secrets masked.",
)
def connect_cluster(connect: ConnectResource) -> dg.ObserveResult:
    try:
        probes = probe_workers(connect.urls, connect.auth(), verify=connect.ca_location or True)
        with connect.client() as client:
            view = connect_view(client, probes)
    except ConnectUnavailable as exc:
        raise dg.Failure(f"Kafka Connect at {connect.url} is unreachable ({type(exc).__name__})", allow_retries=False) from exc
    config_rows = [{"connector": name, "key": k, "value": v} for name, cfg in view.configs.items() for k, v in cfg.items()]
    return dg.ObserveResult(metadata={
        "version": dg.MetadataValue.text(str(view.server.get("version"))),
        "commit": dg.MetadataValue.text(str(view.server.get("commit"))),
        "kafka_cluster_id": dg.MetadataValue.text(str(view.server.get("kafka_cluster_id"))),
        "workers": dg.MetadataValue.md(markdown_table(view.workers)),
        "connectors": dg.MetadataValue.md(markdown_table(view.connectors)),
        "tasks": dg.MetadataValue.md(markdown_table(view.tasks)),
        "plugins": dg.MetadataValue.md(markdown_table(view.plugins)),
        "configs (secrets masked)": dg.MetadataValue.md(markdown_table(config_rows)),
        "connector_count": dg.MetadataValue.int(len(view.connectors)),
        "worker_count": dg.MetadataValue.int(len(view.workers)),
        "workers_answering": dg.MetadataValue.int(sum(p.answering for p in probes)),
        "workers_idle": dg.MetadataValue.json([w["worker"] for w in view.workers if w["idle"] == "yes"]),
    })
