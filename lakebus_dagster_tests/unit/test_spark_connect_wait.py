"""A step rides out a Spark Connect server that does not answer for a while (a restart), saying so in
its log, and fails naming the endpoint once the wait ran out. Real sockets on loopback; the clock
and the sleep are the test's, so no time passes."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from lakebus_dagster_tests.clocks import ManualTime
from lakebus_dagster.lake.spark import SPARK_CONNECT_WAIT_S, SparkConnectUnreachable, wait_for_connect


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_server_that_starts_listening_during_the_wait_is_attached_to():
    port, clock, said = _free_port(), ManualTime(), []
    with socket.socket() as listener:
        def sleep(seconds: float) -> None:  # the server comes up 6 s into the wait
            clock.sleep(seconds)
            if clock.now >= 6 and listener.getsockname()[1] != port:
                listener.bind(("127.0.0.1", port))
                listener.listen()

        wait_for_connect(f"sc://127.0.0.1:{port}", 60, 1.0, said.append, clock=clock, sleep=sleep)
    assert 6 <= clock.now < 10
    assert len(said) == 1 and said[0].startswith(f"Spark Connect at sc://127.0.0.1:{port} is unreachable ("), said
    assert "trying again for 60 more s" in said[0]


def test_a_server_that_never_answers_fails_once_the_wait_ran_out_naming_the_endpoint():
    port, clock, said = _free_port(), ManualTime(), []
    with pytest.raises(SparkConnectUnreachable, match=rf"Spark Connect at sc://127.0.0.1:{port} is unreachable.*lakebus stack up"):
        wait_for_connect(f"sc://127.0.0.1:{port}", 30, 1.0, said.append, clock=clock, sleep=clock.sleep)
    assert 28 <= clock.now <= 30
    assert len(said) == 3, said  # at the start, then about every 10 s: not one line per attempt


def test_no_wait_fails_at_the_first_refusal():
    port, clock = _free_port(), ManualTime()
    with pytest.raises(SparkConnectUnreachable):
        wait_for_connect(f"sc://127.0.0.1:{port}", 0, 1.0, clock=clock, sleep=clock.sleep)
    assert clock.now == 0


def test_the_runbook_states_the_shipped_wait():
    runbook = Path(__file__).parents[2] / "docs" / "runbooks" / "spark-connect-down.md"
    assert f"does not\nanswer within {SPARK_CONNECT_WAIT_S:.0f} s" in runbook.read_text()


def test_the_setting_defaults_to_the_shipped_wait_and_reaches_the_resource(clean_env):
    from lakebus_dagster import envvars
    from lakebus_dagster.defs.environment import build_resources
    from lakebus_dagster.settings import load_settings

    assert float(envvars.BY_NAME["LAKEBUS_SPARK_CONNECT_WAIT_S"].default) == SPARK_CONNECT_WAIT_S
    assert build_resources(load_settings())["spark"].connect_wait_s == SPARK_CONNECT_WAIT_S
    clean_env.setenv("LAKEBUS_SPARK_CONNECT_WAIT_S", "15")
    assert build_resources(load_settings())["spark"].connect_wait_s == 15.0
