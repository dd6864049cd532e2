"""The real ``AlertResource.send`` against a real local HTTP server (no stand-in for the webhook):
a 200 receives exactly the body the configured format promises, a 5xx is retried and then raises
``AlertDeliveryError`` (the sensors keep the alert pending), a 4xx raises at once, and an address
nobody listens on raises too. Nothing is ever dropped silently."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lakebus_dagster.defs.alerts import AlertDeliveryError, AlertResource

ALERT = {"kind": "connector_failed", "title": "sink task 0 FAILED", "text": "DataException: amount | not a number"}
LOG = logging.getLogger("test-alerts")


@dataclass
class Webhook:
    """A local HTTP endpoint answering every POST with ``status``; records each request."""

    url: str
    status: int = 200
    received: list[dict] = field(default_factory=list)
    content_types: list[str] = field(default_factory=list)


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - stdlib signature
            body = self.rfile.read(int(self.headers["Content-Length"]))
            hook.received.append(json.loads(body))
            hook.content_types.append(self.headers.get("Content-Type", ""))
            self.send_response(hook.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hook.url = f"http://127.0.0.1:{server.server_port}/hooks/T0K3N"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield hook
    server.shutdown()
    server.server_close()
    thread.join()


def _resource(url: str, **overrides) -> AlertResource:
    return AlertResource(sink="webhook", webhook_url=url, **overrides)


@pytest.mark.parametrize(
    ("body_format", "expected"),
    [
        ("generic", ALERT),
        ("slack", {"text": "[lakebus] sink task 0 FAILED\nDataException: amount | not a number"}),
        ("feishu", {"msg_type": "text", "content": {"text": "[lakebus] sink task 0 FAILED\nDataException: amount | not a number"}}),
    ],
)
def test_a_200_receives_exactly_the_formatted_body_once(webhook: Webhook, body_format: str, expected: dict):
    _resource(webhook.url, body_format=body_format).send(ALERT, LOG)
    assert webhook.received == [expected]
    assert webhook.content_types == ["application/json"]


def test_a_500_is_retried_then_raises_alert_delivery_error(webhook: Webhook):
    webhook.status = 500
    with pytest.raises(AlertDeliveryError) as caught:
        _resource(webhook.url, retries=2).send(ALERT, LOG)
    assert len(webhook.received) == 3, "one POST and two retries"
    assert all(body == ALERT for body in webhook.received)
    assert "T0K3N" not in str(caught.value), "the webhook URL (it embeds a token) must not reach logs or run metadata"


def test_a_400_raises_at_once_naming_the_status(webhook: Webhook):
    webhook.status = 400
    with pytest.raises(AlertDeliveryError, match="HTTP 400"):
        _resource(webhook.url, retries=2).send(ALERT, LOG)
    assert len(webhook.received) == 1, "a client error is not retried"


def test_nobody_listening_raises_alert_delivery_error():
    with socket.socket() as sock:  # a port that was free a moment ago and is closed now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(AlertDeliveryError, match="unreachable"):
        _resource(f"http://127.0.0.1:{port}/hook", retries=0, timeout_s=5.0).send(ALERT, LOG)


def test_webhook_sink_without_url_raises_and_log_sink_posts_nothing(webhook: Webhook):
    with pytest.raises(AlertDeliveryError, match="webhook_url is not set"):
        AlertResource(sink="webhook").send(ALERT, LOG)
    AlertResource(sink="log", webhook_url=webhook.url).send(ALERT, LOG)
    assert webhook.received == []
