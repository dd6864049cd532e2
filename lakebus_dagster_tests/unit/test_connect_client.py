"""ConnectClient against an HTTP fake of the Kafka Connect REST API.

The fake is a real ``ThreadingHTTPServer`` on 127.0.0.1, so urllib3's ``Retry`` really retries over
the socket and every attempt shows up in ``fake.received``. Replies are scripted per (method, raw
path) as a queue whose last reply repeats forever ("409 forever" is a single scripted 409).
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple
from urllib.parse import parse_qs, urlsplit

import pytest

from lakebus_dagster.connect import (
    ConnectBadRequest,
    ConnectClient,
    ConnectConflict,
    ConnectError,
    ConnectorInfo,
    ConnectorNotFound,
    ConnectStarting,
    ConnectStateTimeout,
    ConnectUnavailable,
)

RETRIES = 3
ATTEMPTS = RETRIES + 1
SINK = "iceberg-sink"
ICEBERG_CLASS = "org.apache.iceberg.connect.IcebergSinkConnector"


class Reply(NamedTuple):
    status: int
    body: Any = None
    delay: float = 0.0


@dataclass(frozen=True)
class Received:
    method: str
    path: str  # raw (still percent-encoded), without the query
    query: dict[str, list[str]]
    body: Any
    headers: dict[str, str]


class FakeConnect:
    def __init__(self, url: str) -> None:
        self.url = url
        self.received: list[Received] = []
        self._replies: dict[tuple[str, str], deque[Reply]] = {}
        self._lock = threading.Lock()

    def script(self, method: str, path: str, *replies: tuple[Any, ...]) -> None:
        self._replies[(method, path)] = deque(Reply(*reply) for reply in replies)

    def calls(self, method: str, path: str) -> list[Received]:
        return [r for r in self.received if (r.method, r.path) == (method, path)]

    def settled_calls(self, method: str, path: str, expected: int, deadline: float = 5.0) -> list[Received]:
        """The calls once `expected` have arrived (or the deadline passed).

        A client that timed out may be done before the server thread has even read its request
        (seen on a loaded CI machine), so counting right after the client returns can undercount.
        """
        ends = time.monotonic() + deadline
        while len(self.calls(method, path)) < expected and time.monotonic() < ends:
            time.sleep(0.01)
        return self.calls(method, path)

    def handle(self, request: Received) -> Reply:
        with self._lock:
            self.received.append(request)
            queue = self._replies.get((request.method, request.path))
            if not queue:
                return Reply(501, {"error_code": 501, "message": f"unscripted {request.method} {request.path}"})
            return queue.popleft() if len(queue) > 1 else queue[0]


class _Server(ThreadingHTTPServer):
    fake: FakeConnect


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def _handle(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        reply = self.server.fake.handle(
            Received(
                method=self.command,
                path=url.path,
                query=parse_qs(url.query, keep_blank_values=True),
                body=json.loads(raw) if raw else None,
                headers=dict(self.headers),
            )
        )
        time.sleep(reply.delay)
        if reply.body is None or isinstance(reply.body, bytes):
            payload = reply.body or b""
        else:
            payload = json.dumps(reply.body).encode()
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out and went away

    do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = _handle

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


@contextmanager
def _serving() -> Iterator[FakeConnect]:
    server = _Server(("127.0.0.1", 0), _Handler)
    host, port = server.server_address[:2]
    server.fake = FakeConnect(f"http://{host}:{port}")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield server.fake
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def fake() -> Iterator[FakeConnect]:
    with _serving() as one:
        yield one


@pytest.fixture
def fake2() -> Iterator[FakeConnect]:
    """A second worker of the same cluster."""
    with _serving() as two:
        yield two


def dead_url() -> str:
    """A URL whose port refuses connections (a killed worker)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture
def client(fake: FakeConnect) -> Iterator[ConnectClient]:
    with ConnectClient(fake.url, retries=RETRIES, backoff_factor=0, timeout=2.0) as connect:
        yield connect


def status_json(state: str, *task_states: str, name: str = SINK, trace: str | None = None) -> dict[str, Any]:
    connector: dict[str, Any] = {"state": state, "worker_id": "w1:8083"}
    if trace:
        connector["trace"] = trace
    tasks = [{"id": i, "state": s, "worker_id": "w1:8083"} for i, s in enumerate(task_states)]
    return {"name": name, "connector": connector, "tasks": tasks, "type": "sink"}


def info_json(config: dict[str, str], name: str = SINK) -> dict[str, Any]:
    return {"name": name, "config": {**config, "name": name}, "tasks": [{"connector": name, "task": 0}], "type": "sink"}


def connect_error(status: int, message: str) -> dict[str, Any]:
    return {"error_code": status, "message": message}


CONFIG = {"connector.class": ICEBERG_CLASS, "tasks.max": "1", "topics": "events"}


# -- success paths ------------------------------------------------------------------------------
@pytest.mark.parametrize(("http_status", "created"), [(201, True), (200, False)])
def test_put_config_reports_created_or_updated(
    fake: FakeConnect, client: ConnectClient, http_status: int, created: bool
) -> None:
    fake.script("PUT", f"/connectors/{SINK}/config", (http_status, info_json(CONFIG)))

    was_created, info = client.put_config(SINK, CONFIG)

    assert was_created is created
    assert (info.name, info.tasks, info.type) == (SINK, [0], "sink")
    assert fake.calls("PUT", f"/connectors/{SINK}/config")[0].body == CONFIG


def test_connector_info_repr_hides_config_values() -> None:
    info = ConnectorInfo.from_json(info_json({"s3.secret-access-key": "hunter2"}))
    assert "hunter2" not in repr(info)


def test_create_posts_name_config_and_initial_state(fake: FakeConnect, client: ConnectClient) -> None:
    fake.script("POST", "/connectors", (201, info_json(CONFIG)))

    info = client.create(SINK, CONFIG, initial_state="STOPPED")

    assert info.name == SINK
    assert fake.calls("POST", "/connectors")[0].body == {"name": SINK, "config": CONFIG, "initial_state": "STOPPED"}


def test_get_config_and_info(fake: FakeConnect, client: ConnectClient) -> None:
    fake.script("GET", f"/connectors/{SINK}/config", (200, {**CONFIG, "name": SINK}))
    fake.script("GET", f"/connectors/{SINK}", (200, info_json(CONFIG)))

    assert client.get_config(SINK) == {**CONFIG, "name": SINK}
    assert client.info(SINK).config["topics"] == "events"


@pytest.mark.parametrize(
    ("call", "method", "path", "http_status"),
    [
        (lambda c: c.pause(SINK), "PUT", f"/connectors/{SINK}/pause", 202),
        (lambda c: c.resume(SINK), "PUT", f"/connectors/{SINK}/resume", 202),
        (lambda c: c.stop(SINK), "PUT", f"/connectors/{SINK}/stop", 204),
        (lambda c: c.delete(SINK), "DELETE", f"/connectors/{SINK}", 204),
        (lambda c: c.restart_task(SINK, 2), "POST", f"/connectors/{SINK}/tasks/2/restart", 204),
    ],
    ids=["pause", "resume", "stop", "delete", "restart_task"],
)
def test_bodiless_operations(
    fake: FakeConnect,
    client: ConnectClient,
    call: Callable[[ConnectClient], None],
    method: str,
    path: str,
    http_status: int,
) -> None:
    fake.script(method, path, (http_status,))

    assert call(client) is None
    assert len(fake.calls(method, path)) == 1


def test_legacy_restart_sends_false_flags_and_returns_none(fake: FakeConnect, client: ConnectClient) -> None:
    path = f"/connectors/{SINK}/restart"
    fake.script("POST", path, (204,))

    assert client.restart(SINK) is None
    assert fake.calls("POST", path)[0].query == {"includeTasks": ["false"], "onlyFailed": ["false"]}


def test_restart_with_tasks_returns_planned_states(fake: FakeConnect, client: ConnectClient) -> None:
    path = f"/connectors/{SINK}/restart"
    fake.script("POST", path, (202, status_json("RUNNING", "RESTARTING", "RUNNING")))

    planned = client.restart(SINK, include_tasks=True, only_failed=True)

    assert planned is not None and [t.state for t in planned.tasks] == ["RESTARTING", "RUNNING"]
    assert fake.calls("POST", path)[0].query == {"includeTasks": ["true"], "onlyFailed": ["true"]}


def test_stop_and_resume_restarts_every_instance_in_one_wave(fake: FakeConnect, client: ConnectClient) -> None:
    """Stop, wait until no task is left (a status still listing RUNNING tasks is not STOPPED yet),
    then resume and wait until every task runs: no task is running when the connector starts again."""
    status = f"/connectors/{SINK}/status"
    fake.script("PUT", f"/connectors/{SINK}/stop", (204,))
    fake.script("PUT", f"/connectors/{SINK}/resume", (202,))
    fake.script("GET", status, (200, status_json("STOPPED", "RUNNING", "RUNNING")), (200, status_json("STOPPED")),
                (200, status_json("RUNNING")), (200, status_json("RUNNING", "RUNNING", "RUNNING")))

    after = client.stop_and_resume(SINK, timeout=10)

    assert after.describe() == "RUNNING; tasks 0=RUNNING 1=RUNNING"
    order = [(r.method, r.path.rsplit("/", 1)[-1]) for r in fake.received]
    assert order == [("PUT", "stop"), ("GET", "status"), ("GET", "status"), ("PUT", "resume"),
                     ("GET", "status"), ("GET", "status")], order


def test_status_parsing(fake: FakeConnect, client: ConnectClient) -> None:
    trace = "org.apache.kafka.connect.errors.ConnectException: boom\n\tat Foo.bar(Foo.java:1)\n"
    body = status_json("RUNNING", "RUNNING", "FAILED")
    body["tasks"][1]["trace"] = trace
    fake.script("GET", f"/connectors/{SINK}/status", (200, body))

    status = client.status(SINK)

    assert (status.name, status.state, status.worker_id, status.type) == (SINK, "RUNNING", "w1:8083", "sink")
    assert status.trace is None and status.trace_summary is None
    assert [t.id for t in status.failed_tasks] == [1]
    assert status.failed_tasks[0].trace_summary == "org.apache.kafka.connect.errors.ConnectException: boom"
    assert status.describe() == "RUNNING; tasks 0=RUNNING 1=FAILED"


def test_list_connectors_expands_status_and_info(fake: FakeConnect, client: ConnectClient) -> None:
    fake.script(
        "GET",
        "/connectors",
        (200, {SINK: {"status": status_json("PAUSED", "PAUSED"), "info": info_json(CONFIG)}}),
    )

    overview = client.list_connectors()

    assert fake.calls("GET", "/connectors")[0].query == {"expand": ["status", "info"]}
    entry = overview[SINK]
    assert entry.status is not None and entry.status.state == "PAUSED"
    assert entry.info is not None and entry.info.config["topics"] == "events"


def test_list_connectors_without_expand_returns_names(fake: FakeConnect, client: ConnectClient) -> None:
    fake.script("GET", "/connectors", (200, [SINK, "other"]))

    overview = client.list_connectors(expand_status=False, expand_info=False)

    assert fake.calls("GET", "/connectors")[0].query == {}
    assert sorted(overview) == sorted([SINK, "other"])
    assert overview[SINK].status is None and overview[SINK].info is None


def test_validate_parses_errors_per_key_without_values(fake: FakeConnect, client: ConnectClient) -> None:
    path = f"/connector-plugins/{ICEBERG_CLASS}/config/validate"
    fake.script(
        "PUT",
        path,
        (
            200,
            {
                "name": ICEBERG_CLASS,
                "error_count": 2,
                "groups": ["Common"],
                "configs": [
                    {"definition": {"name": "topics"}, "value": {"name": "topics", "value": "events", "errors": []}},
                    {
                        "definition": {"name": "tasks.max"},
                        "value": {"name": "tasks.max", "value": "x", "errors": ["Invalid value x: not a number"]},
                    },
                    {"definition": {"name": "name"}, "value": {"name": "name", "value": None, "errors": ["Missing"]}},
                ],
            },
        ),
    )

    result = client.validate(ICEBERG_CLASS, {"tasks.max": "x", "topics": "events"})

    assert (result.name, result.error_count, result.is_valid) == (ICEBERG_CLASS, 2, False)
    assert result.errors == {"tasks.max": ["Invalid value x: not a number"], "name": ["Missing"]}
    assert fake.calls("PUT", path)[0].body == {"connector.class": ICEBERG_CLASS, "tasks.max": "x", "topics": "events"}


def test_offsets(fake: FakeConnect, client: ConnectClient) -> None:
    path = f"/connectors/{SINK}/offsets"
    offsets = [{"partition": {"kafka_topic": "events", "kafka_partition": 0}, "offset": {"kafka_offset": 42}}]
    fake.script("GET", path, (200, {"offsets": offsets}))
    fake.script("PATCH", path, (200, {"message": "The offsets for this connector have been altered successfully"}))
    fake.script("DELETE", path, (200, {"message": "The offsets for this connector have been reset successfully"}))

    assert client.get_offsets(SINK) == offsets
    assert client.patch_offsets(SINK, offsets).endswith("altered successfully")
    assert fake.calls("PATCH", path)[0].body == {"offsets": offsets}
    assert client.delete_offsets(SINK).endswith("reset successfully")


def test_plugins_and_tasks(fake: FakeConnect, client: ConnectClient) -> None:
    plugins = [{"class": ICEBERG_CLASS, "type": "sink", "version": "1.11.0"}]
    tasks = [{"id": {"connector": SINK, "task": 0}, "config": {"topics": "events"}}]
    fake.script("GET", "/connector-plugins", (200, plugins))
    fake.script("GET", f"/connectors/{SINK}/tasks", (200, tasks))

    assert client.plugins(connectors_only=False) == plugins
    assert fake.calls("GET", "/connector-plugins")[0].query == {"connectorsOnly": ["false"]}
    assert client.tasks(SINK) == tasks


def test_exists(fake: FakeConnect, client: ConnectClient) -> None:
    fake.script("GET", f"/connectors/{SINK}", (200, info_json(CONFIG)))
    fake.script("GET", "/connectors/ghost", (404, connect_error(404, "Connector ghost not found")))

    assert client.exists(SINK) is True
    assert client.exists("ghost") is False


def test_names_and_plugin_classes_are_url_encoded(fake: FakeConnect, client: ConnectClient) -> None:
    fake.script("GET", "/connectors/orders%20sink%2Fv1%3Fx%3D1/status", (200, status_json("RUNNING", name="x")))
    fake.script("PUT", "/connector-plugins/My%20Plugin%2Fv2/config/validate", (200, {"name": "p", "error_count": 0}))

    assert client.status("orders sink/v1?x=1").state == "RUNNING"
    assert client.validate("My Plugin/v2", {}).is_valid


def test_basic_auth_is_sent(fake: FakeConnect) -> None:
    fake.script("GET", "/connectors", (200, []))
    with ConnectClient(fake.url, auth=("admin", "pw"), retries=0) as connect:
        connect.list_connectors(expand_status=False, expand_info=False)

    expected = "Basic " + base64.b64encode(b"admin:pw").decode()
    assert fake.received[0].headers["Authorization"] == expected


# -- error paths --------------------------------------------------------------------------------
def test_400_is_bad_request_with_connects_message_and_secrets_masked(
    fake: FakeConnect, client: ConnectClient
) -> None:
    path = f"/connectors/{SINK}/config"
    message = (
        "Connector configuration is invalid and contains the following 1 error(s):\n"
        "Invalid value hunter2 for configuration iceberg.catalog.s3.secret-access-key: bad"
    )
    fake.script("PUT", path, (400, connect_error(400, message)))

    with pytest.raises(ConnectBadRequest) as caught:
        client.put_config(SINK, {**CONFIG, "iceberg.catalog.s3.secret-access-key": "hunter2"})

    error = caught.value
    assert (error.status, error.connector, error.method, error.path) == (400, SINK, "PUT", path)
    assert "Connector configuration is invalid" in error.message
    assert "hunter2" not in str(error) and "iceberg.catalog.s3.secret-access-key" in str(error)
    assert f"'{SINK}'" in str(error) and "HTTP 400" in str(error)
    assert len(fake.calls("PUT", path)) == 1  # 400 is not retried


def test_404_names_the_connector(fake: FakeConnect, client: ConnectClient) -> None:
    fake.script("GET", "/connectors/ghost/status", (404, connect_error(404, "No status found for connector ghost")))

    with pytest.raises(ConnectorNotFound) as caught:
        client.status("ghost")

    assert caught.value.connector == "ghost" and caught.value.status == 404
    assert str(caught.value) == (
        "GET /connectors/ghost/status failed for connector 'ghost': HTTP 404: No status found for connector ghost"
    )
    assert len(fake.received) == 1


def test_404_outside_connector_paths_is_plain_connect_error(fake: FakeConnect, client: ConnectClient) -> None:
    fake.script("PUT", "/connector-plugins/Nope/config/validate", (404, connect_error(404, "HTTP 404 Not Found")))

    with pytest.raises(ConnectError) as caught:
        client.validate("Nope", {})

    assert type(caught.value) is ConnectError and caught.value.connector is None


def test_409_then_200_is_retried(fake: FakeConnect, client: ConnectClient) -> None:
    path = f"/connectors/{SINK}/config"
    rebalance = connect_error(409, "Cannot complete request momentarily due to stale configuration")
    fake.script("PUT", path, (409, rebalance), (409, rebalance), (200, info_json(CONFIG)))

    created, _ = client.put_config(SINK, CONFIG)

    assert created is False
    assert len(fake.calls("PUT", path)) == 3


def test_409_forever_is_conflict_after_all_attempts(fake: FakeConnect, client: ConnectClient) -> None:
    fake.script("POST", "/connectors", (409, connect_error(409, f"Connector {SINK} already exists")))

    with pytest.raises(ConnectConflict) as caught:
        client.create(SINK, CONFIG)

    assert caught.value.status == 409 and "already exists" in caught.value.message
    assert len(fake.calls("POST", "/connectors")) == ATTEMPTS


def test_500_then_200_is_retried(fake: FakeConnect, client: ConnectClient) -> None:
    path = f"/connectors/{SINK}/restart"
    fake.script("POST", path, (500, connect_error(500, "Request timed out")), (204,))

    assert client.restart(SINK) is None
    assert len(fake.calls("POST", path)) == 2


def test_500_forever_is_connect_error_with_message(fake: FakeConnect, client: ConnectClient) -> None:
    path = f"/connectors/{SINK}/offsets"
    fake.script("PATCH", path, (500, connect_error(500, "Request timed out")))

    with pytest.raises(ConnectError) as caught:
        client.patch_offsets(SINK, [])

    assert type(caught.value) is ConnectError
    assert caught.value.status == 500 and caught.value.message == "Request timed out"
    assert len(fake.calls("PATCH", path)) == ATTEMPTS


def test_non_json_error_body_falls_back_to_reason(fake: FakeConnect, client: ConnectClient) -> None:
    fake.script("GET", f"/connectors/{SINK}/status", (502, b"<html>bad gateway</html>"))

    with pytest.raises(ConnectError) as caught:
        client.status(SINK)

    assert caught.value.status == 502 and caught.value.message == "Bad Gateway"


@pytest.mark.parametrize(
    ("call", "method", "path", "ok"),
    [
        (lambda c: c.status(SINK), "GET", f"/connectors/{SINK}/status", (200, status_json("RUNNING"))),
        (lambda c: c.pause(SINK), "PUT", f"/connectors/{SINK}/pause", (202,)),
        (lambda c: c.restart_task(SINK, 0), "POST", f"/connectors/{SINK}/tasks/0/restart", (204,)),
        (lambda c: c.delete(SINK), "DELETE", f"/connectors/{SINK}", (204,)),
        (lambda c: c.patch_offsets(SINK, []), "PATCH", f"/connectors/{SINK}/offsets", (200, {"message": "ok"})),
    ],
    ids=["GET", "PUT", "POST", "DELETE", "PATCH"],
)
def test_every_method_is_retried_on_503(
    fake: FakeConnect,
    client: ConnectClient,
    call: Callable[[ConnectClient], object],
    method: str,
    path: str,
    ok: tuple[Any, ...],
) -> None:
    fake.script(method, path, (503, connect_error(503, "unavailable")), ok)

    call(client)

    assert len(fake.calls(method, path)) == 2


def test_connection_refused_is_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with ConnectClient(f"http://127.0.0.1:{port}", retries=2, backoff_factor=0) as connect:
        with pytest.raises(ConnectUnavailable) as caught:
            connect.status(SINK)

    error = caught.value
    assert error.status is None and error.connector == SINK
    assert "Max retries exceeded" in error.message and f"'{SINK}'" in str(error)


def test_read_timeout_is_retried_then_unavailable(fake: FakeConnect) -> None:
    path = f"/connectors/{SINK}/status"
    fake.script("GET", path, (200, status_json("RUNNING"), 0.5))

    with ConnectClient(fake.url, retries=1, backoff_factor=0, timeout=0.1) as connect:
        with pytest.raises(ConnectUnavailable):
            connect.status(SINK)

    assert len(fake.settled_calls("GET", path, 2)) == 2


# -- wait_for_state -----------------------------------------------------------------------------
def test_wait_for_state_waits_for_tasks(fake: FakeConnect, client: ConnectClient) -> None:
    path = f"/connectors/{SINK}/status"
    fake.script(
        "GET",
        path,
        (404, connect_error(404, f"No status found for connector {SINK}")),
        (200, status_json("RUNNING")),
        (200, status_json("RUNNING", "UNASSIGNED")),
        (200, status_json("RUNNING", "RUNNING")),
    )

    status = client.wait_for_state(SINK, {"RUNNING"}, timeout=5, poll=0.01)

    assert status.describe() == "RUNNING; tasks 0=RUNNING"
    assert len(fake.calls("GET", path)) == 4


def test_wait_for_stopped_without_tasks(fake: FakeConnect, client: ConnectClient) -> None:
    fake.script("GET", f"/connectors/{SINK}/status", (200, status_json("STOPPED")))

    assert client.wait_for_state(SINK, {"STOPPED"}, timeout=1, poll=0.01, require_tasks=False).state == "STOPPED"


def test_wait_for_state_times_out_with_last_status(fake: FakeConnect, client: ConnectClient) -> None:
    fake.script("GET", f"/connectors/{SINK}/status", (200, status_json("RUNNING", "FAILED")))

    started = time.monotonic()
    with pytest.raises(ConnectStateTimeout) as caught:
        client.wait_for_state(SINK, {"RUNNING"}, timeout=0.2, poll=0.05)

    # it waited for its deadline and then gave up (the upper bound only proves it stops; no tight margin)
    assert 0.2 <= time.monotonic() - started < 30
    error = caught.value
    assert isinstance(error, TimeoutError) and isinstance(error, ConnectError)
    assert error.last_status is not None and error.last_status.failed_tasks[0].id == 0
    assert "last seen: RUNNING; tasks 0=FAILED" in str(error) and f"'{SINK}'" in str(error)


def test_wait_for_state_stops_at_a_fail_state(fake: FakeConnect, client: ConnectClient) -> None:
    from lakebus_dagster.connect import ConnectStateFailed

    path = f"/connectors/{SINK}/status"
    fake.script("GET", path, (200, status_json("RUNNING", "RESTARTING")), (200, status_json("RUNNING", "FAILED")))

    with pytest.raises(ConnectStateFailed) as caught:
        client.wait_for_state(SINK, {"RUNNING"}, timeout=60, poll=0.01, fail_states={"FAILED"})

    assert caught.value.last_status.describe() == "RUNNING; tasks 0=FAILED"
    assert len(fake.calls("GET", path)) == 2  # it did not wait out the 60 s deadline


@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_say_which_settings_to_set(fake: FakeConnect, client: ConnectClient, status: int) -> None:
    from lakebus_dagster.connect import ConnectUnauthorized

    fake.script("GET", "/connectors", (status, connect_error(status, "User cannot access the resource.")))
    with pytest.raises(ConnectUnauthorized) as caught:
        client.list_connectors()
    assert f"HTTP {status}" in str(caught.value) and "LAKEBUS_CONNECT_USERNAME" in str(caught.value)


# -- a cluster of workers: failover and the cause of a failure -----------------------------------
#: what a Connect 3.9 worker answers between starting Jetty (``initializeServer``) and registering
#: its REST resources (``initializeResources``): Jetty's own error page, on every path
JETTY_404 = (
    b'<html>\n<head>\n<meta http-equiv="Content-Type" content="text/html;charset=utf-8"/>\n'
    b"<title>Error 404 Not Found</title>\n</head>\n<body><h2>HTTP ERROR 404 Not Found</h2>\n<table>\n"
    b"<tr><th>URI:</th><td>/connectors</td></tr>\n<tr><th>STATUS:</th><td>404</td></tr>\n"
    b"<tr><th>MESSAGE:</th><td>Not Found</td></tr>\n</table>\n\n</body>\n</html>\n"
)


def dead_urls(n: int) -> list[str]:
    """``n`` distinct URLs whose ports refuse connections (killed workers)."""
    probes = [socket.socket() for _ in range(n)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [f"http://127.0.0.1:{probe.getsockname()[1]}" for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def test_a_killed_worker_fails_over_to_the_next_at_once(fake: FakeConnect) -> None:
    """Worker 1 killed (connection refused), worker 2 serving: the request succeeds on worker 2
    without first spending the retry budget and its backoff on worker 1 (default backoff here)."""
    fake.script("GET", "/connectors", (200, [SINK]))
    started = time.monotonic()

    with ConnectClient(f"{dead_url()},{fake.url}", retries=RETRIES) as connect:
        names = connect.list_connectors(expand_status=False, expand_info=False)
        answering = connect.base_url

    assert list(names) == [SINK] and answering == fake.url
    assert time.monotonic() - started < 0.5


def test_a_worker_answering_5xx_fails_over_and_the_client_sticks_to_the_one_that_answers(
    fake: FakeConnect, fake2: FakeConnect
) -> None:
    fake.script("GET", "/connectors", (503, connect_error(503, "Service Unavailable")))
    fake2.script("GET", "/connectors", (200, [SINK]))

    with ConnectClient([fake.url, fake2.url], retries=RETRIES, backoff_factor=0) as connect:
        connect.list_connectors(expand_status=False, expand_info=False)
        connect.list_connectors(expand_status=False, expand_info=False)

    assert len(fake.calls("GET", "/connectors")) == 1  # not retried there first, not asked again
    assert len(fake2.calls("GET", "/connectors")) == 2


def test_unreachable_only_when_no_worker_answers_and_it_names_every_url() -> None:
    urls = dead_urls(2)

    with ConnectClient(",".join(urls), retries=1, backoff_factor=0) as connect:
        with pytest.raises(ConnectUnavailable) as caught:
            connect.status(SINK)

    assert caught.value.urls == tuple(urls)
    assert all(url in str(caught.value) for url in urls) and "no Kafka Connect worker answered" in str(caught.value)


def test_a_cluster_whose_only_live_worker_fails_is_that_failure_not_unreachable(fake: FakeConnect) -> None:
    fake.script("GET", "/connectors", (503, connect_error(503, "Service Unavailable")))

    with ConnectClient([dead_url(), fake.url], retries=2, backoff_factor=0) as connect:
        with pytest.raises(ConnectError) as caught:
            connect.list_connectors()

    assert type(caught.value) is ConnectError and caught.value.status == 503


@pytest.mark.parametrize("body", [JETTY_404, b"", connect_error(404, "HTTP 404 Not Found")])
def test_a_starting_worker_is_starting_and_a_deleted_connector_is_missing(fake: FakeConnect, body: Any) -> None:
    """Realistic answers, one cause each: 404 on ``GET /connectors`` (whatever its body) and a
    Jetty 404 on a connector path mean the worker is still starting; Connect's JSON 404 on a
    connector path means the connector is missing."""
    fake.script("GET", "/connectors", (404, body))
    fake.script("GET", f"/connectors/{SINK}/status", (404, JETTY_404))
    fake.script("GET", f"/connectors/{SINK}/offsets", (404, connect_error(404, f"Connector {SINK} not found")))

    with ConnectClient(fake.url, retries=1, backoff_factor=0) as connect:
        with pytest.raises(ConnectStarting) as listing:
            connect.list_connectors()
        with pytest.raises(ConnectStarting) as status:
            connect.status(SINK)
        with pytest.raises(ConnectorNotFound) as offsets:
            connect.get_offsets(SINK)

    assert listing.value.url == fake.url and listing.value.status == 404 and "not up yet" in str(listing.value)
    assert not isinstance(status.value, ConnectorNotFound)
    assert offsets.value.connector == SINK and len(fake.calls("GET", f"/connectors/{SINK}/offsets")) == 1


def test_a_starting_worker_is_skipped_for_one_that_serves(fake: FakeConnect, fake2: FakeConnect) -> None:
    fake.script("GET", "/connectors", (404, JETTY_404))
    fake2.script("GET", "/connectors", (200, [SINK]))

    with ConnectClient([fake.url, fake2.url], retries=RETRIES, backoff_factor=0) as connect:
        assert list(connect.list_connectors(expand_status=False, expand_info=False)) == [SINK]
        assert connect.base_url == fake2.url
