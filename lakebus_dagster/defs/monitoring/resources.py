"""Where alerts go: the run/daemon log (default) or an HTTP webhook (Slack- or Feishu/Lark-shaped)."""

from typing import Any, Literal

import dagster as dg
import requests
from pydantic import Field
from requests.adapters import HTTPAdapter
from urllib3.util import Retry

from lakebus_dagster.monitor.restart_policy import RestartPolicy


class AlertDeliveryError(RuntimeError):
    """The alert sink did not accept an alert; the sensor keeps it pending and retries next tick."""


def make_alert(kind: str, title: str, text: str = "", key: str | None = None) -> dict[str, Any]:
    """An alert as the sensors and jobs queue it (plain JSON: it may wait in a cursor until
    delivered); its text ends with the runbook that answers it (docs/runbooks/, by kind and key)."""
    from lakebus_dagster.monitor.runbooks import runbook_for

    link = f"runbook: {runbook_for(kind, key)}"
    return {"kind": kind, "title": title, "text": f"{text}\n{link}" if text else link, "key": key}


def alert_body(alert: dict[str, Any], body_format: str) -> dict[str, Any]:
    text = f"[lakebus] {alert['title']}\n{alert.get('text', '')}".strip()
    if body_format == "slack":
        return {"text": text}
    if body_format == "feishu":
        return {"msg_type": "text", "content": {"text": text}}
    return alert


class AlertResource(dg.ConfigurableResource):
    sink: Literal["log", "webhook"] = "log"
    webhook_url: str | None = Field(default=None, description="use dg.EnvVar: webhook URLs embed tokens")
    body_format: Literal["generic", "slack", "feishu"] = "generic"
    timeout_s: float = 5.0
    retries: int = 2

    def send(self, alert: dict[str, Any], log) -> None:
        """Deliver one alert or raise :class:`AlertDeliveryError` (never silently drop it)."""
        log.warning(f"ALERT {alert['kind']}: {alert['title']} — {alert.get('text', '')}")
        if self.sink == "log":
            return
        if not self.webhook_url:
            raise AlertDeliveryError("AlertResource.sink is 'webhook' but webhook_url is not set")
        session = requests.Session()
        retry = Retry(total=self.retries, backoff_factor=0.2, status_forcelist={429, 500, 502, 503, 504}, allowed_methods={"POST"})
        session.mount(self.webhook_url, HTTPAdapter(max_retries=retry))
        try:
            resp = session.post(self.webhook_url, json=alert_body(alert, self.body_format), timeout=self.timeout_s)
        except requests.RequestException as exc:
            raise AlertDeliveryError(f"alert webhook unreachable: {type(exc).__name__}") from exc
        finally:
            session.close()
        if resp.status_code >= 300:
            raise AlertDeliveryError(f"alert webhook answered HTTP {resp.status_code}")


class MonitoringPolicyResource(dg.ConfigurableResource):
    """How the connector sensor judges and heals: thresholds and the auto-restart policy.

    Auto-restart follows Strimzi: restart number n+1 waits min(n² + n, cap) backoff units
    (minutes by default: 0, 2, 6, 12, 20, 30, 42, 56, 60, ...), at most ``max_restarts`` times, then
    the incident is escalated instead — a task failing on the same record is not fixed by restarts.
    """

    auto_restart: bool = True
    max_restarts: int = 5
    backoff_cap_units: float = 60.0
    backoff_unit_seconds: float = 60.0
    unassigned_threshold_s: float = Field(default=120.0, description="a task UNASSIGNED this long is an incident")
    missing_threshold_s: float = Field(
        default=300.0, description="a declared connector absent from Connect this long is an incident (first provisioning)"
    )
    kafka_unreadable_threshold_s: float = Field(
        default=60.0,
        description="a read from Kafka (the sink's progress, the declared connector states) failing this long is an "
        "incident; a partition leader lost with its broker answers again within seconds, once another replica leads",
    )
    recovery_stable_s: float = Field(default=90.0, description="an incident resolves after its condition is gone this long")
    auto_quarantine: bool = Field(
        default=True,
        description="when a restart fails again on the same record, run remediate_poison_record: the record goes to the "
        "DLQ with its error, the records before it are kept, the connector resumes",
    )
    stall_commit_intervals: int = Field(
        default=6, ge=1,
        description="a RUNNING sink with lag whose committed offsets do not move for this many commit intervals (at least "
        "two commit timeouts) is a stall incident",
    )

    uncommitted_commit_intervals: int = Field(
        default=2, ge=1,
        description="a RUNNING sink with records past its watermark (valid-through-ts), no new Iceberg commit for this "
        "many commit intervals and no commit cycle under way on its control topic (no StartCommit, DataWritten or "
        "DataComplete past the coordinator's committed offset) has lost its commit coordinator: a stall "
        "incident, healed by restarting the connector. With the status sensor ticking every commit interval, 2 alerts "
        "within 3 intervals of the last commit",
    )

    def restart_policy(self) -> RestartPolicy:
        return RestartPolicy(self.auto_restart, self.max_restarts, self.backoff_cap_units, self.backoff_unit_seconds)


def deliver_pending(pending: list[dict[str, Any]], alerts: AlertResource, log) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Send every pending alert in order; return (delivered, still undelivered — kept for the next tick)."""
    for i, alert in enumerate(pending):
        try:
            alerts.send(alert, log)
        except AlertDeliveryError as exc:
            log.error(f"alert delivery failed, {len(pending) - i} alert(s) kept for the next tick: {exc}")
            return pending[:i], pending[i:]
    return list(pending), []
