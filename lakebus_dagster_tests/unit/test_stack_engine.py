"""The engine's start order, on fake services and a fake clock: a service starts only once what it
depends on is healthy, independent chains overlap, a start group starts together, and a service that
dies or never answers fails ``up`` naming it. (The real start-ups run in every integration stage.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lakebus_dagster.stack import engine
from lakebus_dagster.stack.errors import StackError
from lakebus_dagster.stack.service import Service
from lakebus_dagster_tests.clocks import ManualTime


SETTINGS = SimpleNamespace(host="127.0.0.1")


class FakeProc:
    def __init__(self, alive: bool = True) -> None:
        self.alive = alive


@pytest.fixture
def world(monkeypatch, tmp_path):
    """Services that become healthy ``boot_s`` after they were started; what started when."""
    clock = ManualTime()
    started: dict[str, float] = {}
    monkeypatch.setattr(engine, "time", clock)  # the engine's clock only
    monkeypatch.setattr(engine.process, "is_alive", lambda proc: proc.alive)
    monkeypatch.setattr(engine.process, "log_file", lambda settings, name: tmp_path / f"{name}.log")
    monkeypatch.setattr(engine.process, "tail", lambda path: "")
    monkeypatch.setattr(engine.process, "find_process", lambda settings, name: None)  # nothing runs yet
    monkeypatch.setattr(engine.process, "port_in_use", lambda host, port: port in busy_ports)
    procs: dict[str, FakeProc] = {}
    busy_ports: set[int] = set()

    def start(settings, svc, jars, java, names):
        started[svc.name] = clock.now
        names.append(svc.name)
        procs[svc.name] = FakeProc()
        return procs[svc.name]

    monkeypatch.setattr(engine, "_start", start)
    return clock, started, procs, busy_ports


def svc(name: str, boot_s: float, world, *, spec: str = "", depends_on: tuple[str, ...] = (), group: str | None = None,
        timeout: float = 90.0, port: int = 0) -> Service:
    clock, started, *_ = world
    return Service(name=name, port=port, main_class="x", classpath_dirs=[], heap="1m", health_text=f"{name} answers",
                   health=lambda: name in started and clock.now - started[name] >= boot_s, timeout=timeout,
                   spec=spec or name, depends_on=depends_on, start_group=group)


def test_each_service_starts_once_its_dependencies_are_healthy_and_chains_overlap(world):
    clock, started, *_ = world
    services = [svc("s3", 5, world), svc("kafka", 10, world), svc("rest-catalog", 4, world, depends_on=("s3",)),
                svc("connect", 6, world, depends_on=("kafka", "s3", "rest-catalog")),
                svc("spark-master", 9, world), svc("spark-worker", 9, world, depends_on=("spark-master",))]

    names = engine.start_all(SETTINGS, services, None, "java")

    assert sorted(names) == sorted(s.name for s in services)
    assert started["s3"] == started["kafka"] == started["spark-master"] == 0  # nothing to wait for
    assert 5 <= started["rest-catalog"] < 6  # S3 healthy at 5 s
    assert 10 <= started["connect"] < 11  # after the slowest of its three: kafka at 10 s
    assert 9 <= started["spark-worker"] < 10  # the Spark chain beside the ingest's, not after it
    assert clock.now < 19  # the longest chain (spark-master 9 + spark-worker 9), not the sum (43 s)


def test_a_start_group_starts_together_and_replicas_outside_one_wait_for_each_other(world):
    _, started, *_ = world
    services = [svc("kafka", 5, world, group="kafka"), svc("kafka-2", 5, world, spec="kafka", group="kafka"),
                svc("connect", 3, world, depends_on=("kafka",)), svc("connect-2", 3, world, spec="connect", depends_on=("kafka",))]

    engine.start_all(SETTINGS, services, None, "java")

    assert started["kafka"] == started["kafka-2"] == 0
    assert 5 <= started["connect"] < 6  # after both brokers
    assert started["connect-2"] >= started["connect"] + 3  # not a start group: after the first is healthy


def test_a_service_that_dies_fails_up_naming_it_and_its_dependents_never_start(world, monkeypatch):
    clock, started, procs, _ = world
    services = [svc("s3", 100, world), svc("rest-catalog", 1, world, depends_on=("s3",))]

    def die_at_3_s(seconds):
        clock.now += seconds
        if clock.now >= 3:
            procs["s3"].alive = False

    monkeypatch.setattr(clock, "sleep", die_at_3_s)
    with pytest.raises(StackError, match=r"^s3: exited \(s3 answers\)"):
        engine.start_all(SETTINGS, services, None, "java")
    assert "rest-catalog" not in started


def test_a_service_that_never_answers_fails_up_after_its_timeout(world):
    clock, *_ = world
    services = [svc("connect", 1e9, world, timeout=30)]

    with pytest.raises(StackError, match=r"connect: did not become healthy within 30s \(connect answers\)"):
        engine.start_all(SETTINGS, services, None, "java")
    assert 30 <= clock.now < 32


def test_a_busy_port_of_any_service_fails_up_before_anything_starts(world):
    _, started, _, busy_ports = world
    busy_ports.add(15002)
    services = [svc("s3", 1, world, port=9000), svc("spark-master", 1, world, port=7077),
                svc("spark-connect", 1, world, port=15002, depends_on=("spark-master",))]

    with pytest.raises(StackError, match=r"^spark-connect: port 127.0.0.1:15002 is already in use"):
        engine.start_all(SETTINGS, services, None, "java")
    assert started == {}


def test_a_busy_metrics_port_fails_up_before_anything_starts(world):
    """A broker's or worker's JMX exporter agent that cannot listen stops its JVM at start: checked first too."""
    from dataclasses import replace

    _, started, _, busy_ports = world
    busy_ports.add(8088)
    services = [svc("s3", 1, world, port=9000), replace(svc("connect", 1, world, port=8083), metrics_port=8088)]

    with pytest.raises(StackError, match=r"^connect: metrics port 127.0.0.1:8088 is already in use"):
        engine.start_all(SETTINGS, services, None, "java")
    assert started == {}
