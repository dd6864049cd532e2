"""``lakebus connectors [NAME]``: the Kafka Connect cluster's connectors, kcctl style, over its REST API.

Without NAME: one line per connector (name, type, state, tasks running/total, worker). With NAME:
its state, each task (id, state, worker, the first line of its trace), the difference between its
live config and the config ``provision_lakebus`` would PUT (only for the layout's sink connector;
the same :func:`~lakebus_dagster.bus.desired.sink_connector_config` and
:func:`~lakebus_dagster.connect.diff.diff_configs` the reconciler uses), and its consumed offsets
against the topics' end offsets (lag per partition).

Everything is read before anything is printed, so an unreachable Connect or Kafka is the only line
on the screen (exit 2), never a half-printed description.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakebus_dagster.errors import CliError

if TYPE_CHECKING:
    from lakebus_dagster.connect import ConfigDiff, ConnectClient, ConnectorStatus
    from lakebus_dagster.settings import Settings

DESCRIPTION = """\
The Kafka Connect cluster's connectors, read through its REST API (LAKEBUS_CONNECT_URL, or the
local stack's workers).

Without NAME: one line per connector with its type, state, tasks running/total and worker.
With NAME: its state, each task (id, state, worker, first line of its error), the difference
between its live config and the config provision_lakebus would apply (for the bus's sink
connector), and its consumed offsets against the topics' end offsets (lag per partition).
Exit 2 when Kafka Connect (or, with NAME, Kafka) cannot be reached.
"""

EXAMPLES = """\
  lakebus connectors                       # every connector: type, state, tasks, worker
  lakebus connectors events-iceberg-sink   # one: tasks, config drift, lag per partition
"""

#: the CLI answers in seconds: a down worker is reported, not retried for a minute
CONNECT_TIMEOUT_S, CONNECT_RETRIES = 5.0, 1
KAFKA_TIMEOUT_S = 5.0


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", metavar="NAME", help="a connector to describe (default: list them all)")
    p.set_defaults(func=run)


# -- reading ------------------------------------------------------------------------------------
def connect_client(settings: Settings) -> ConnectClient:
    from lakebus_dagster.connect import ConnectClient

    return ConnectClient(settings.connect.urls, auth=settings.connect.auth(), verify=settings.connect.verify(),
                         timeout=CONNECT_TIMEOUT_S, retries=CONNECT_RETRIES, backoff_factor=0.2)


def connect_problem(exc: Exception, settings: Settings) -> CliError:
    """One line for a Connect REST error the user can act on (unreachable, starting, refused login)."""
    from lakebus_dagster.connect import ConnectStarting, ConnectUnauthorized, ConnectUnavailable

    urls = ", ".join(settings.connect.urls)
    if isinstance(exc, ConnectUnavailable):
        return CliError(f"Kafka Connect at {urls} (LAKEBUS_CONNECT_URL / LAKEBUS_CONNECT_PORT) is unreachable; "
                        "start it with `lakebus stack up`, or point LAKEBUS_CONNECT_URL at the workers")
    if isinstance(exc, ConnectStarting):
        return CliError(f"Kafka Connect at {urls} is still starting; try again in a few seconds")
    if isinstance(exc, ConnectUnauthorized):
        return CliError(f"Kafka Connect at {urls} refused lakebus's login; check LAKEBUS_CONNECT_USERNAME / "
                        "LAKEBUS_CONNECT_PASSWORD")
    return CliError(f"Kafka Connect at {urls}: {exc}")


def kafka_consumer(settings: Settings):
    """A group-neutral consumer (nothing committed) that prints no librdkafka log lines."""
    from lakebus_dagster.kafka.clients import KafkaClients, quiet_kafka_logger

    return KafkaClients(settings.kafka.client_config()).consumer("lakebus-cli", logger=quiet_kafka_logger())


def kafka_unreachable(settings: Settings, exc: BaseException) -> CliError:
    return CliError(f"Kafka at {settings.kafka.bootstrap_servers} (LAKEBUS_KAFKA_BOOTSTRAP / LAKEBUS_KAFKA_PORT) did not answer "
                    f"within {KAFKA_TIMEOUT_S:.0f}s ({type(exc).__name__}); start it with `lakebus stack up`")


def topic_ends(settings: Settings, topics: list[str]) -> dict[str, dict[int, int] | None]:
    """``{topic: {partition: end offset}}``; None for a topic that does not exist."""
    from confluent_kafka import KafkaException

    from lakebus_dagster.kafka import TopicMissing, end_offsets

    consumer = kafka_consumer(settings)
    try:
        try:
            consumer.list_topics(timeout=KAFKA_TIMEOUT_S)  # one probe: an unreachable broker fails here, once
        except KafkaException as exc:
            raise kafka_unreachable(settings, exc) from exc
        ends: dict[str, dict[int, int] | None] = {}
        for topic in topics:
            try:
                ends[topic] = end_offsets(consumer, topic, timeout_s=KAFKA_TIMEOUT_S)
            except TopicMissing:
                ends[topic] = None
            except KafkaException as exc:
                raise kafka_unreachable(settings, exc) from exc
        return ends
    finally:
        consumer.close()


@dataclass
class PartitionLag:
    topic: str
    partition: int
    consumed: int | None
    end: int

    @property
    def lag(self) -> int:
        return max(0, self.end - (self.consumed or 0))


@dataclass
class Description:
    status: ConnectorStatus
    config: dict[str, str]
    #: the diff against what provision_lakebus would PUT; None when lakebus does not declare this connector
    diff: ConfigDiff | None
    lags: list[PartitionLag] = field(default_factory=list)
    missing_topics: list[str] = field(default_factory=list)
    #: the layout's sink connector (the one lakebus provisions)
    sink_name: str = ""


def desired_sink_config(settings: Settings, name: str) -> tuple[str, dict[str, str] | None]:
    """(the layout's sink connector, the config ``provision_lakebus`` would PUT for ``name`` when it is
    that connector - built as the ``ensure_connector`` op builds it, from the same resources - else None)."""
    import warnings

    from lakebus_dagster.bus.desired import sink_connector_config
    from lakebus_dagster.defs.environment import build_resources

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        resources = build_resources(settings)
    layout = resources["layout"].layout()  # type: ignore[attr-defined]
    if name != layout.connector_name:
        return layout.connector_name, None
    return layout.connector_name, sink_connector_config(layout, resources["iceberg"].as_seen_by_connect())  # type: ignore[attr-defined]


def consumed_offsets(raw: list[dict[str, Any]]) -> dict[tuple[str, int], int]:
    """A sink connector's ``GET /offsets`` as ``{(topic, partition): next offset}`` (a source's are left out)."""
    out: dict[tuple[str, int], int] = {}
    for entry in raw:
        part, offset = entry.get("partition") or {}, entry.get("offset") or {}
        if "kafka_topic" in part and offset.get("kafka_offset") is not None:
            out[(part["kafka_topic"], int(part["kafka_partition"]))] = int(offset["kafka_offset"])
    return out


def describe(settings: Settings, name: str) -> Description:
    from lakebus_dagster.connect import ConnectError, ConnectorNotFound, diff_configs

    with connect_client(settings) as client:
        try:
            status = client.status(name)
            config = client.get_config(name)
            raw_offsets = client.get_offsets(name) if (status.type or "sink") == "sink" else []
        except ConnectorNotFound:
            known = sorted(client.list_connectors(expand_status=False, expand_info=False))
            raise CliError(f"no connector {name!r} on Kafka Connect at {client.base_url}; "
                           f"it has: {', '.join(known) or 'none'} (see `lakebus connectors`)") from None
        except ConnectError as exc:
            raise connect_problem(exc, settings) from exc
    sink_name, desired = desired_sink_config(settings, name)
    diff = diff_configs(desired, config).redacted() if desired is not None else None
    consumed = consumed_offsets(raw_offsets)
    topics = sorted({t.strip() for t in config.get("topics", "").split(",") if t.strip()} | {t for t, _ in consumed})
    ends = topic_ends(settings, topics) if topics else {}
    lags = [PartitionLag(t, p, consumed.get((t, p)), end) for t, parts in ends.items() if parts for p, end in sorted(parts.items())]
    return Description(status, config, diff, lags, [t for t, parts in ends.items() if parts is None], sink_name)


# -- printing -----------------------------------------------------------------------------------
def print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def tasks_running(status: ConnectorStatus) -> str:
    return f"{sum(t.state == 'RUNNING' for t in status.tasks)}/{len(status.tasks)}"


def print_list(settings: Settings) -> None:
    from lakebus_dagster.connect import ConnectError

    with connect_client(settings) as client:
        try:
            overview = client.list_connectors(expand_status=True, expand_info=False)
        except ConnectError as exc:
            raise connect_problem(exc, settings) from exc
        where = client.base_url
    if not overview:
        print(f"no connectors on Kafka Connect at {where} (the sink is created by `lakebus launch provision_lakebus`)")
        return
    rows = [("NAME", "TYPE", "STATE", "TASKS", "WORKER")]
    for name in sorted(overview):
        st = overview[name].status
        if st is None:
            rows.append((name, "-", "-", "-", "-"))
        else:
            rows.append((name, st.type or "-", st.state, tasks_running(st), st.worker_id))
    print_table(rows)


def _short(value: str, limit: int = 100) -> str:
    """A config value on one line of a terminal (the guard's registry is kilobytes of JSON)."""
    return value if len(value) <= limit else f"{value[:limit]}... ({len(value)} chars)"


def print_description(name: str, d: Description) -> None:
    from lakebus_dagster.connect.redaction import redact_value

    st = d.status
    print(f"connector  {name} ({st.type or 'unknown type'}, {d.config.get('connector.class', '?')})")
    print(f"state      {st.state} on {st.worker_id}, tasks {tasks_running(st)} running")
    if st.trace_summary:
        print(f"error      {st.trace_summary}")
    print("tasks")
    if st.tasks:
        print_table([("  ID", "STATE", "WORKER", "ERROR"),
                     *((f"  {t.id}", t.state, t.worker_id, t.trace_summary or "") for t in st.tasks)])
    else:
        print("  none (a STOPPED connector has no tasks)")
    if d.diff is None:
        print(f"config     (not the bus's sink connector {d.sink_name}: no desired config to compare; the live one)")
        for key in sorted(d.config):
            print(f"  {key} = {_short(redact_value(key, d.config[key]))}")
    elif d.diff.is_empty:
        print("config     matches what provision_lakebus applies")
    else:
        n = len(d.diff.added) + len(d.diff.removed) + len(d.diff.changed)
        print(f"config     {n} difference(s) from what provision_lakebus applies (it would PUT: live -> desired)")
        for key, (live, want) in sorted(d.diff.changed.items()):
            print(f"  ~ {key}: {_short(live)} -> {_short(want)}")
        for key, want in sorted(d.diff.added.items()):
            print(f"  + {key}: (not set) -> {_short(want)}")
        for key, live in sorted(d.diff.removed.items()):
            print(f"  - {key}: {_short(live)} -> (not in the desired config)")
    if st.type not in (None, "sink"):
        print("offsets    (a source connector: its offsets are its own, see the connector_status_report job)")
        return
    for topic in d.missing_topics:
        print(f"offsets    topic {topic!r} does not exist")
    if d.lags:
        print(f"offsets    consumed vs end of topic, lag {sum(p.lag for p in d.lags)} record(s) in total")
        print_table([("  TOPIC", "PARTITION", "CONSUMED", "END", "LAG"),
                     *((f"  {p.topic}", str(p.partition), "-" if p.consumed is None else str(p.consumed), str(p.end), str(p.lag))
                       for p in d.lags)])


def run(args: argparse.Namespace) -> int:
    from lakebus_dagster.settings import load_local_secrets, load_settings

    settings = load_settings()
    load_local_secrets(settings)  # the secured stack's Connect/Kafka passwords
    if args.name is None:
        print_list(settings)
    else:
        print_description(args.name, describe(settings, args.name))
    return 0
