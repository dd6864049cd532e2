"""A local HTTP endpoint standing in for the alert webhook (Slack, Feishu, ...): it records every
body it receives, and optionally keeps them as a test artifact in ``build/alerts/<name>.json``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from lakebus_dagster.settings import REPO_ROOT


@contextmanager
def alert_webhook(artifact: str | None = None) -> Iterator[tuple[str, list[dict]]]:
    """``(url, received)``: POST bodies land in ``received`` as parsed JSON, in arrival order."""
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/hook", received
    finally:
        server.shutdown()
        server.server_close()
        if artifact:
            out = REPO_ROOT / "build" / "alerts"
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{artifact}.json").write_text(json.dumps(received, indent=2, ensure_ascii=False))
