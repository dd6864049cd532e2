"""heartbeat_sensor evaluated the way the daemon does (``evaluate_tick`` on a context built from the
definitions, cursors chained) against a real HTTP server on 127.0.0.1: it pings when the URL is set
and the interval is due, not again before, skips saying how to switch it on when the URL is unset,
and a failing URL is a skip reason and a log warning naming the URL, never an exception."""

from __future__ import annotations

import http.server
import threading

import dagster as dg
import pytest

from lakebus_dagster.defs import heartbeat
from lakebus_dagster.defs.heartbeat import sensors
from lakebus_dagster_tests.clocks import FixedClock
from lakebus_dagster.defs.heartbeat.resources import HeartbeatResource, heartbeat_resource
from lakebus_dagster.setting_readers import SettingsReader

NOW = [1_000_000.0]


class _Server:
    """A local HTTP server that records the paths it was asked for and answers ``status``."""

    def __init__(self, status: int = 200) -> None:
        self.hits: list[str] = []
        self.status = status
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                outer.hits.append(self.path)
                self.send_response(outer.status)
                self.end_headers()
                self.wfile.write(b"OK")

            def log_message(self, *_):
                return None

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = _Server()
    yield s
    s.close()


@pytest.fixture(autouse=True)
def _clock():
    NOW[0] = 1_000_000.0


def tick(resource: HeartbeatResource, cursor: str | None = None):
    """One daemon-style evaluation of the shipped domain's sensor with ``resource``."""
    defs = heartbeat.build_defs(resource)
    sensor = defs.resolve_sensor_def("heartbeat_sensor")
    with dg.instance_for_test() as instance, dg.build_sensor_context(
            cursor=cursor, instance=instance, definitions=defs, sensor_name=sensor.name,
            resources={**defs.resources, "clock": FixedClock(at=NOW[0])}) as ctx:
        result = sensor.evaluate_tick(ctx)
    return result, (result.cursor if result.cursor is not None else cursor)


def test_heartbeat_pings_when_due_and_not_again_before_the_interval(server):
    resource = HeartbeatResource(url=f"{server.base}/ping/check", interval_minutes=5)
    result, cursor = tick(resource)
    assert server.hits == ["/ping/check"] and not result.run_requests
    assert "heartbeat sent to" in result.skip_message and "HTTP 200" in result.skip_message
    NOW[0] += 4 * 60 + 59  # before the interval: no second ping
    result, cursor = tick(resource, cursor)
    assert server.hits == ["/ping/check"] and "next in" in result.skip_message
    NOW[0] += 1  # due
    result, cursor = tick(resource, cursor)
    assert server.hits == ["/ping/check", "/ping/check"]
    NOW[0] += 60
    tick(resource, cursor)
    assert len(server.hits) == 2


def test_heartbeat_is_off_unless_the_url_is_set_and_says_how_to_switch_it_on(server, monkeypatch):
    monkeypatch.delenv("LAKEBUS_HEARTBEAT_URL", raising=False)
    resource = heartbeat_resource(SettingsReader())
    assert resource.url is None and resource.interval_minutes == 5
    result, cursor = tick(resource)
    assert "set LAKEBUS_HEARTBEAT_URL" in result.skip_message and cursor is None and server.hits == []
    # set: the code location reads it as an EnvVar (a secret), with the configured interval
    monkeypatch.setenv("LAKEBUS_HEARTBEAT_URL", f"{server.base}/ping/check")
    monkeypatch.setenv("LAKEBUS_HEARTBEAT_INTERVAL_MINUTES", "2")
    resource = heartbeat_resource(SettingsReader())
    assert resource.interval_minutes == 2
    tick(resource)
    assert server.hits == ["/ping/check"]


@pytest.mark.parametrize("status", [500, 404])
def test_a_refusing_url_is_a_skip_reason_and_a_warning_naming_it_then_retried(server, status, capfd):
    server.status = status
    resource = HeartbeatResource(url=f"{server.base}/ping/check")
    result, cursor = tick(resource)  # no exception: the tick ends with a reason
    message = f"heartbeat ping to {server.base}/ping/check answered HTTP {status}"
    assert message in result.skip_message and cursor is None
    assert message in capfd.readouterr().err  # the tick's log: a warning
    server.status = 200
    result, cursor = tick(resource, cursor)  # the next tick tries again, at once
    assert len(server.hits) == 2 and "heartbeat sent" in result.skip_message


def test_an_unreachable_url_is_a_skip_reason_naming_it(capfd):
    dead = _Server()
    url = f"{dead.base}/ping/check"
    dead.close()  # nothing listens on that port any more
    result, cursor = tick(HeartbeatResource(url=url))
    assert f"heartbeat ping to {url} failed" in result.skip_message and cursor is None
    assert f"heartbeat ping to {url} failed" in capfd.readouterr().err


def test_a_bad_heartbeat_setting_fails_the_load_naming_it(monkeypatch):
    monkeypatch.setenv("LAKEBUS_HEARTBEAT_URL", "not a url")
    with pytest.raises(ValueError, match="LAKEBUS_HEARTBEAT_URL"):
        heartbeat_resource(SettingsReader())
    monkeypatch.delenv("LAKEBUS_HEARTBEAT_URL")
    monkeypatch.setenv("LAKEBUS_HEARTBEAT_INTERVAL_MINUTES", "0")
    with pytest.raises(ValueError, match="LAKEBUS_HEARTBEAT_INTERVAL_MINUTES"):
        heartbeat_resource(SettingsReader())


def test_the_code_location_ships_the_heartbeat_sensor_running_with_its_resource():
    from lakebus_dagster.definitions import defs

    sensor = defs.resolve_sensor_def("heartbeat_sensor")
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING and "heartbeat" in defs.resources
