"""Alerts, shared by every domain: one builder, one sink, one record of what was sent.

The monitoring sensors, the poison-record remediation, the topic inventory and the offset ledger
all alert. They build every alert with :func:`make_alert` (so each text ends with the runbook that
answers it), deliver it through :class:`AlertResource` (the run/daemon log, or an HTTP webhook in
Slack or Feishu/Lark shape), and record every delivered alert as an observation of the
``lakebus/alerts`` asset (:func:`alert_observations` for sensors, which return their events;
:func:`send_and_record` for runs, which log them) — so the UI shows what was sent and when, not only
the alert sink. Nothing here belongs to one domain, hence this module sits beside them.
"""

from typing import Any, Literal

import dagster as dg
import requests
from pydantic import Field
from requests.adapters import HTTPAdapter
from urllib3.util import Retry

from lakebus_dagster.defs.asset_keys import ALERTS_ASSET_KEY
from lakebus_dagster.monitor.alert_text import make_alert

__all__ = ["make_alert"]  # the builder lives in the core (the status sensor's decisions write alerts); every domain imports it here

alerts_asset = dg.AssetSpec(
    ALERTS_ASSET_KEY,
    description="Every alert lakebus delivered (incident, recovery, escalation, quarantine, DLQ, topic, schema, offset "
    "ledger), one observation each: the same text the alert sink received.",
    group_name="monitoring",
    kinds={"python"},
)


class AlertDeliveryError(RuntimeError):
    """The alert sink did not accept an alert; the sensor keeps it pending and retries next tick."""


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


def deliver_pending(pending: list[dict[str, Any]], alerts: AlertResource, log) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Send every pending alert in order; return (delivered, still undelivered — kept for the next tick)."""
    for i, alert in enumerate(pending):
        try:
            alerts.send(alert, log)
        except AlertDeliveryError as exc:
            log.error(f"alert delivery failed, {len(pending) - i} alert(s) kept for the next tick: {exc}")
            return pending[:i], pending[i:]
    return list(pending), []


def alert_observations(delivered: list[dict]) -> list[dg.AssetObservation]:
    """One observation of ``lakebus/alerts`` per delivered alert: the UI's record of what was sent."""
    return [
        dg.AssetObservation(
            asset_key=ALERTS_ASSET_KEY,
            metadata={
                "kind": alert["kind"],
                "title": alert["title"][:500],
                "text": dg.MetadataValue.md(f"```\n{alert.get('text', '')[:2000]}\n```"),
                "incident": alert.get("key") or "",
            },
        )
        for alert in delivered
    ]


def send_and_record(alert: dict[str, Any], alerts: AlertResource, context: dg.OpExecutionContext) -> None:
    """What a run (a job's op, an asset check) does with an alert: deliver it now (raising
    :class:`AlertDeliveryError` fails the run, which then alerts again when retried) and record it
    on ``lakebus/alerts`` like the sensors' alerts. Asset checks pass ``context.op_execution_context``."""
    alerts.send(alert, context.log)
    for observation in alert_observations([alert]):
        context.log_event(observation)
