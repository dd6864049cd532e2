"""A network outage on demand: a TCP gate between one client and one real service.

The connector under test is given the gate's address instead of the service's, so closing the
gate is, for that connector alone, exactly what an outage looks like (connection refused, open
connections cut), while every other user of the shared stack keeps the real address. The service
behind it stays the real one; nothing is faked about what it answers.
"""

from __future__ import annotations

import re
import socket
import threading
from contextlib import suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests


class TcpGate:
    """Forwards ``127.0.0.1:<port>`` to ``target``; :meth:`close` refuses and cuts, :meth:`open` restores."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._listener: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def open(self) -> None:
        if self._listener is not None:
            return
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def close(self) -> None:
        """Stop listening (new connections are refused) and cut every open connection."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            with suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._conns += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


class CatalogWriteGate:
    """An HTTP reverse proxy in front of a real Iceberg REST catalog that can refuse table commits.

    With :attr:`refuse_commits` set, ``POST /v1/namespaces/<ns>/tables/<table>`` (the REST spec's
    commit) answers 403 like a catalog whose grants were changed; every read still reaches the real
    catalog. So a sink keeps running and writing data files but can commit nothing: a stall.
    """

    _COMMIT = re.compile(r"^/v1/(?:[^/]+/)?namespaces/[^/]+/tables/[^/]+/?$")

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.refuse_commits = False
        self.refused = 0
        gate = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if gate.refuse_commits and self.command == "POST" and gate._COMMIT.match(self.path.split("?")[0]):
                    gate.refused += 1
                    self._answer(403, b'{"error":{"message":"lakebus test: commits refused","type":"ForbiddenException","code":403}}',
                                 {"Content-Type": "application/json"})
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                resp = requests.request(self.command, gate.upstream + self.path, data=body, headers=headers, timeout=30)
                self._answer(resp.status_code, resp.content,
                             {k: v for k, v in resp.headers.items() if k.lower() not in _HOP_BY_HOP | {"content-encoding"}})

            def _answer(self, status: int, content: bytes, headers: dict) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = _forward  # noqa: N815

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def shutdown(self) -> None:
        self._server.shutdown()
        self._server.server_close()


_HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
               "transfer-encoding", "upgrade", "content-length", "host"}
