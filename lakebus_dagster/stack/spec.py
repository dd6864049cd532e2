"""A row of the stack's service table: :class:`ServiceSpec`, a frozen declaration of one kind of service.

Why a declaration and not a function per service: the stack's services used to be built by nested
closures (one per service, 80-130 lines each) and their order was written twice. A spec holds the
static facts as fields (main class, classpath, launcher, timeout, what it depends on, how many of it
a profile runs) and what depends on the settings (ports, config files, probes) as *builders*:
plain functions of a :class:`Node`. :meth:`ServiceSpec.bind` turns a spec and a node into the
:class:`~lakebus_dagster.stack.service.Service` the engine (:mod:`.engine`) starts, so the engine
knows no service by name and the table (:mod:`.services`) is the one place that orders them.
"""

from __future__ import annotations

from collections.abc import Callable
import signal
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

from lakebus_dagster.settings import REPO_ROOT
from lakebus_dagster.stack.local_settings import StackSettings
from lakebus_dagster.stack.service import Service, spark_class_script

#: how a service is launched: ``java -cp``, Spark's ``spark-class`` (a Spark daemon),
#: ``spark-class SparkSubmit`` (a Spark application), ``exec``: a native server whose whole command
#: line ``args`` builds (PostgreSQL; its markers ride along as settings, see :func:`.process.markers`),
#: or ``python -m`` (a lakebus module: ``main_class`` names it); :meth:`Service.argv` builds the command line
Launcher = Literal["java", "spark-class", "spark-submit", "exec", "python"]


@dataclass(frozen=True)
class Node:
    """One instance of a spec in one stack: what a spec's builders read."""

    settings: StackSettings
    jars: Path
    java: str
    #: the S3 key pair (read once per build: every service that needs it gets the same pair)
    credentials: tuple[str, str]
    #: 1-based: broker 2 of the cluster profile is ``Node(number=2)``
    number: int = 1

    @property
    def suffix(self) -> str:
        """``""`` for the first node, ``-n`` for node *n*: its name's, config file's and data dir's suffix."""
        return "" if self.number == 1 else f"-{self.number}"


def _no_args(node: Node) -> list[str]:
    return []


def _no_env(node: Node) -> dict[str, str]:
    return {}


def one(profile: str) -> int:
    """Every profile runs one of it."""
    return 1


def always(settings: StackSettings) -> bool:
    """A service of every stack (not switched by a setting)."""
    return True


@dataclass(frozen=True)
class ServiceSpec:
    """One kind of service: its facts, and builders (functions of a :class:`Node`) for the rest."""

    #: the first node's name (the pid file, log file and ``-Dlakebus.service`` marker); node n: ``name-n``
    name: str
    main_class: str
    port: Callable[[Node], int]
    heap: Callable[[Node], str]
    #: the readiness probe: True once the service answers (any exception counts as "not yet")
    probe: Callable[[Node], bool]
    #: what the probe waits for, as ``stack up`` says it
    probe_text: Callable[[Node], str]
    #: seconds ``up`` waits for the probe after starting it
    timeout: float
    #: the specs that must be healthy before this one starts (all their replicas); ``up`` starts a
    #: service as soon as these are, beside whatever else is starting; the table's order honours
    #: them too (checked at import), so ``down`` stops dependents first
    depends_on: tuple[str, ...] = ()
    launcher: Launcher = "java"
    #: folders under the jars dir whose jars form the classpath (``java`` launcher only)
    classpath_dirs: tuple[str, ...] = ()
    args: Callable[[Node], list[str]] = _no_args
    jvm_props: Callable[[Node], list[str]] = _no_args
    env: Callable[[Node], dict[str, str]] = _no_env
    #: writes the config files and creates the data dirs, just before the process starts
    prepare: Callable[[Node], None] | None = None
    #: runs on every ``up`` once the service is healthy (started now or already running); a line to print, or None
    on_ready: Callable[[Node], str | None] | None = None
    #: runs once after a fresh start became healthy, after ``on_ready``; a line to print, or None
    after_start: Callable[[Node], str | None] | None = None
    #: how many of it a profile runs (a name of :data:`lakebus_dagster.settings.PROFILES`)
    replicas: Callable[[str], int] = one
    #: several replicas are started before any is waited for (see :attr:`Service.start_group`)
    start_together: bool = False
    #: whether this stack runs it at all (an optional service: PostgreSQL with LAKEBUS_POSTGRES=on)
    enabled: Callable[[StackSettings], bool] = always
    #: the signal ``down`` stops it with (PostgreSQL: SIGINT, a fast shutdown; SIGTERM would wait for
    #: every client to disconnect)
    stop_signal: int = signal.SIGTERM
    #: the deploy/ file it starts from (:mod:`.deploy_files`; a failed start names it), or ""
    source: str = ""
    #: the port its Prometheus metrics are served on (the JMX exporter agent: :mod:`.jmx_exporter`), or None
    metrics_port: Callable[[Node], int] | None = None

    def node_name(self, number: int) -> str:
        return self.name if number == 1 else f"{self.name}-{number}"

    def names(self, settings: StackSettings) -> list[str]:
        """The names of its services in this stack (its profile, its switches), in start order."""
        if not self.enabled(settings):
            return []
        return [self.node_name(n) for n in range(1, self.replicas(settings.profile) + 1)]

    def nodes(self, settings: StackSettings, jars: Path, java: str, credentials: tuple[str, str]) -> list[Node]:
        if not self.enabled(settings):
            return []
        return [Node(settings, jars, java, credentials, n) for n in range(1, self.replicas(settings.profile) + 1)]

    def bind(self, node: Node) -> Service:
        """The service the engine starts for ``node``: every builder applied, the hooks bound to the node."""
        together = self.start_together and self.replicas(node.settings.profile) > 1
        return Service(
            name=self.node_name(node.number),
            port=self.port(node),
            main_class=self.main_class,
            classpath_dirs=list(self.classpath_dirs),
            heap=self.heap(node),
            health=partial(self.probe, node),
            health_text=self.probe_text(node),
            args=self.args(node),
            jvm_props=self.jvm_props(node),
            # a Python service runs this checkout's lakebus (the venv may hold another's)
            env={**self.env(node), **({"PYTHONPATH": str(REPO_ROOT)} if self.launcher == "python" else {})},
            prepare=partial(self.prepare, node) if self.prepare else None,
            timeout=self.timeout,
            spark_class=spark_class_script() if self.launcher.startswith("spark") else None,
            command=self.launcher == "exec",
            spark_submit=self.launcher == "spark-submit",
            python_module=self.launcher == "python",
            start_group=self.name if together else None,
            spec=self.name,
            depends_on=self.depends_on,
            on_ready=partial(self.on_ready, node) if self.on_ready else None,
            after_start=partial(self.after_start, node) if self.after_start else None,
            source=self.source,
            metrics_port=self.metrics_port(node) if self.metrics_port else None,
        )


def check_order(table: tuple[ServiceSpec, ...]) -> None:
    """Raise unless every spec comes after the specs it depends on (and names are unique)."""
    seen: set[str] = set()
    for spec in table:
        if spec.name in seen:
            raise ValueError(f"service table: {spec.name!r} twice")
        missing = [d for d in spec.depends_on if d not in seen]
        if missing:
            raise ValueError(f"service table: {spec.name!r} depends on {', '.join(missing)}, which must come before it")
        seen.add(spec.name)
