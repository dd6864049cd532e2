"""The secured local stack's catalog gate: an OAuth2 front for Iceberg's REST catalog fixture.

Why it exists: the local stack's REST catalog is Iceberg's ``RESTCatalogServer`` test fixture, which
has no authentication at all (it even answers ``/v1/oauth/tokens`` for any credentials). Production
REST catalogs (Apache Polaris, Lakekeeper, cloud catalogs) authenticate their clients with OAuth2;
to prove that every lakebus client (pyiceberg, the Iceberg sink in Connect, the Spark Connect
server) really sends the catalog credential, the ``secured`` profile puts this small gate in front
of the fixture. It is a **local stand-in** for a production catalog's auth, not a product: one client
is known, tokens cannot be revoked before they expire, there is no TLS.

What it does (a ``ThreadingHTTPServer`` reverse proxy):

* ``POST /v1/oauth/tokens`` — the ``client_credentials`` grant (client id and secret in the form
  body, or as HTTP Basic auth) checked against ``LAKEBUS_CATALOG_CREDENTIAL`` (``id:secret``,
  from the stack's ``secrets.env``), and the ``token-exchange`` grant with a valid token as the
  subject (Iceberg's Java client refreshes that way); the requested scope must include the gate's
  scope. Issues an opaque bearer token with an expiry (signed, so a restarted gate still accepts
  the tokens the long-lived clients hold); refuses with an OAuth2 error body
  (RFC 6749 §5.2: ``invalid_client``, ``invalid_grant``, ``invalid_scope``, ...).
* ``GET /lakebus-gate/health`` — 200 when the fixture answers behind it (the stack's probe; it
  serves nothing of the catalog).
* every other request — forwarded to the fixture (on an internal port) only with a valid
  ``Authorization: Bearer`` token (the header is not passed on); otherwise 401 with
  ``WWW-Authenticate: Bearer error="invalid_token"`` (RFC 6750) and an Iceberg ``ErrorResponse``
  body, which the Iceberg clients turn into their "not authorized" errors.

Nothing secret is logged: a refusal logs the client id and the reason, never a secret or a token.

Run: ``python -m lakebus_dagster.stack.catalog_gate --port P --upstream http://host:Q --scope S``
(the stack does: :data:`lakebus_dagster.stack.storage_services.CATALOG_GATE`).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import logging
import os
import secrets
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

from lakebus_dagster.secret_env import CATALOG_CREDENTIAL_VAR

log = logging.getLogger("lakebus.catalog_gate")

TOKEN_PATH = "/v1/oauth/tokens"
#: the stack's health probe: 200 when the fixture behind the gate answers its /v1/config (no token needed, nothing served)
HEALTH_PATH = "/lakebus-gate/health"
CLIENT_CREDENTIALS = "client_credentials"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
#: headers not passed between the client and the fixture (hop-by-hop, and the client's token)
_HOP_HEADERS = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
                "transfer-encoding", "upgrade", "host", "authorization", "content-length"}


class TokenBook:
    """Issues and checks the gate's bearer tokens: ``<nonce>.<expiry>.<signature>``, signed with an
    HMAC keyed by the client secret. Opaque to the clients; nothing is kept, so a restarted gate
    still accepts the tokens the long-lived clients (the sink, the Spark Connect server) hold."""

    def __init__(self, client_id: str, client_secret: str, scope: str, lifetime_s: int) -> None:
        self.client_id, self._secret, self.scope, self.lifetime_s = client_id, client_secret, scope, lifetime_s
        self._key = hashlib.sha256(f"lakebus-catalog-gate:{client_id}:{client_secret}".encode()).digest()

    def client_ok(self, client_id: str, client_secret: str) -> bool:
        return hmac.compare_digest(client_id.encode(), self.client_id.encode()) and \
            hmac.compare_digest(client_secret.encode(), self._secret.encode())

    def _sign(self, payload: str) -> str:
        return hmac.new(self._key, payload.encode(), hashlib.sha256).hexdigest()

    def issue(self) -> str:
        payload = f"{secrets.token_urlsafe(16)}.{int(time.time()) + self.lifetime_s}"
        return f"{payload}.{self._sign(payload)}"

    def valid(self, token: str) -> bool:
        payload, _, signature = token.rpartition(".")
        expiry = payload.rpartition(".")[2]
        if not (payload and expiry.isdigit() and hmac.compare_digest(signature.encode(), self._sign(payload).encode())):
            return False
        return int(expiry) > time.time()


def parse_credential(credential: str) -> tuple[str, str]:
    client_id, sep, secret = credential.partition(":")
    if not (sep and client_id and secret):
        raise SystemExit(f"catalog gate: {CATALOG_CREDENTIAL_VAR} is not client_id:client_secret (value not shown)")
    return client_id, secret


class GateHandler(BaseHTTPRequestHandler):
    """One request: the token endpoint, or the fixture behind a valid token (see the module's doc).
    :func:`make_handler` binds it to a token book and the fixture's URL."""

    protocol_version = "HTTP/1.1"
    server_version = "lakebus-catalog-gate"
    book: TokenBook
    upstream: str

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's name
        pass  # no access log: a request line carries no secret, but it is noise at this rate

    # -- responses ----------------------------------------------------------------------------------
    def _send(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for key, value in {"Content-Type": "application/json", "Cache-Control": "no-store", **(headers or {})}.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _oauth_error(self, status: int, error: str, description: str, client_id: str = "") -> None:
        log.warning("token request refused: %s (%s)%s", error, description, f" client_id={client_id!r}" if client_id else "")
        self._send(status, {"error": error, "error_description": description},
                   {"WWW-Authenticate": 'Basic realm="lakebus-catalog"'} if status == 401 else None)

    def _unauthorized(self, description: str) -> None:
        log.warning("%s %s refused: %s", self.command, self.path.split("?")[0], description)
        self._send(401, {"error": {"message": f"Not authorized: {description}", "type": "NotAuthorizedException", "code": 401}},
                   {"WWW-Authenticate": f'Bearer realm="lakebus-catalog", error="invalid_token", error_description="{description}"'})

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    # -- the token endpoint -------------------------------------------------------------------------
    def _client(self, form: dict[str, str]) -> tuple[str, str]:
        """The client id and secret: HTTP Basic auth, else the form's ``client_id`` / ``client_secret``."""
        basic = self.headers.get("Authorization", "")
        if basic.lower().startswith("basic "):
            try:
                client_id, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
                return client_id, secret
            except ValueError:
                return "", ""
        return form.get("client_id", ""), form.get("client_secret", "")

    def _token(self) -> None:
        form = {k: v[0] for k, v in parse_qs(self._body().decode("utf-8", "replace")).items()}
        client_id, secret = self._client(form)
        grant, scopes = form.get("grant_type", ""), form.get("scope", "").split()
        if grant == CLIENT_CREDENTIALS:
            if not self.book.client_ok(client_id, secret):
                return self._oauth_error(401, "invalid_client", "unknown client or wrong secret", client_id)
        elif grant == TOKEN_EXCHANGE:
            if not self.book.valid(form.get("subject_token", "")) and not self.book.client_ok(client_id, secret):
                return self._oauth_error(400, "invalid_grant", "the subject token is unknown or expired")
        else:
            return self._oauth_error(400, "unsupported_grant_type", f"grant_type {grant!r} is not supported")
        if self.book.scope not in scopes:
            return self._oauth_error(400, "invalid_scope", f"the scope must include {self.book.scope!r}", client_id)
        self._send(200, {"access_token": self.book.issue(), "token_type": "bearer", "expires_in": self.book.lifetime_s,
                         "issued_token_type": ACCESS_TOKEN_TYPE, "scope": self.book.scope})

    # -- everything else: the fixture, behind a valid token -----------------------------------------
    def _forward(self) -> None:
        auth = self.headers.get("Authorization", "")
        body = self._body()
        if not auth.lower().startswith("bearer "):
            return self._unauthorized("no bearer token (authenticate at /v1/oauth/tokens)")
        if not self.book.valid(auth[7:].strip()):
            return self._unauthorized("the bearer token is unknown or expired")
        request = urllib.request.Request(self.upstream + self.path, data=body if body or self.command in ("POST", "PUT") else None,
                                         method=self.command)
        for key, value in self.headers.items():
            if key.lower() not in _HOP_HEADERS:
                request.add_header(key, value)
        try:
            with urllib.request.urlopen(request, timeout=120) as resp:
                status, headers, data = resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as exc:
            status, headers, data = exc.code, exc.headers, exc.read()
        except OSError as exc:
            return self._send(502, {"error": {"message": f"catalog gate: the catalog at {self.upstream} is unreachable: {exc}",
                                              "type": "ServiceUnavailableException", "code": 502}})
        self.send_response(status)
        for key, value in headers.items():
            if key.lower() not in _HOP_HEADERS:
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _health(self) -> None:
        try:
            with urllib.request.urlopen(f"{self.upstream}/v1/config", timeout=5) as resp:
                ok = resp.status == 200
        except OSError:
            ok = False
        self._send(200 if ok else 503, {"upstream": "ok" if ok else "unreachable"})

    def _dispatch(self) -> None:
        if self.path == HEALTH_PATH and self.command == "GET":
            return self._health()
        if self.path.split("?")[0] != TOKEN_PATH:
            return self._forward()
        if self.command != "POST":
            self._body()
            return self._send(405, {"error": "invalid_request", "error_description": "POST only"})
        return self._token()

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _dispatch


def make_handler(book: TokenBook, upstream: str) -> type[BaseHTTPRequestHandler]:
    """The handler class of one gate: :class:`GateHandler` bound to its token book and the fixture's URL."""
    return type("BoundGateHandler", (GateHandler,), {"book": book, "upstream": upstream.rstrip("/")})


def serve(host: str, port: int, upstream: str, book: TokenBook) -> ThreadingHTTPServer:
    """A started gate (its thread is a daemon); ``shutdown()`` stops it."""
    server = ThreadingHTTPServer((host, port), make_handler(book, upstream.rstrip("/")))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="catalog-gate", daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="the catalog fixture's URL (http://host:port)")
    parser.add_argument("--scope", default="catalog", help="the scope every token request must include")
    parser.add_argument("--token-lifetime", type=int, default=3600, help="seconds a token is valid")
    args, extra = parser.parse_known_args(argv)
    if unknown := [a for a in extra if not a.startswith("-Dlakebus.")]:  # the stack's markers are ignored
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)", stream=sys.stdout)
    client_id, secret = parse_credential(os.environ.get(CATALOG_CREDENTIAL_VAR, ""))
    book = TokenBook(client_id, secret, args.scope, args.token_lifetime)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(book, args.upstream.rstrip("/")))
    server.daemon_threads = True
    log.info("catalog gate on %s:%d -> %s (client %r, scope %r, tokens valid %d s)", args.host, args.port,
             args.upstream, client_id, args.scope, args.token_lifetime)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
