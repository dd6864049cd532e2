"""The Prometheus JMX exporter on the local stack's brokers and Connect workers.

Each of those JVMs starts with the exporter's Java agent (fetched by Maven into the jars cache:
``infra/maven/jmx-exporter``) and the rules file ``infra/jmx-exporter/kafka-connect.yaml``; the agent
serves ``/metrics`` in Prometheus' text format on the node's metrics port
(:meth:`StackSettings.broker_metrics_port`, :meth:`StackSettings.worker_metrics_port`), listening on
the stack's host only.
"""

from __future__ import annotations

from pathlib import Path

from lakebus_dagster.settings import REPO_ROOT

#: the jars cache's folder the agent is copied into (a component of :data:`lakebus_dagster.stack.jars.COMPONENTS`)
COMPONENT = "jmx-exporter"
RULES_FILE = REPO_ROOT / "infra" / "jmx-exporter" / "kafka-connect.yaml"


def agent_jar(jars: Path) -> Path:
    """The agent's jar in the jars cache. Not raising when it is absent: the services are also built
    for ``stack status`` before any jar was fetched; ``up`` fetches first (:func:`.jars.ensure_jars`
    checks every component), so a JVM never starts without it."""
    found = sorted((jars / COMPONENT).glob("jmx_prometheus_javaagent-*.jar"))
    return found[-1] if found else jars / COMPONENT / "jmx_prometheus_javaagent.jar"


def agent_flag(jars: Path, host: str, port: int) -> str:
    """``-javaagent:<jar>=[host:]<port>:<rules>``. A host with a colon (an IPv6 address) is left out:
    the agent's argument is split at colons, so it listens on every address then."""
    bind = f"{host}:" if ":" not in host else ""
    return f"-javaagent:{agent_jar(jars)}={bind}{port}:{RULES_FILE}"


def metrics_url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}/metrics"
