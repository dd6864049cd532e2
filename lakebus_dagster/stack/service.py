"""What a local service is (classpath, main class, generated config, health probe), the one
command-line builder (:meth:`Service.argv`: ``java -cp``, ``spark-class``, spark-submit, a native
server's own command line (PostgreSQL) or ``python -m`` (the secured profile's catalog gate)) and the
small helpers every service spec uses to write its config files.

A :class:`Service` is a spec (:mod:`.spec`) bound to one stack's settings: everything the engine
(:mod:`.engine`) needs to start it, probe it and say what it waits for."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import requests

from lakebus_dagster.stack.errors import StackError
from lakebus_dagster.stack.local_settings import StackSettings

#: The client (C1) JIT compiler only. The dev stack's JVMs are started often (every ``up``, every
#: test stage, every worker a failover test kills) and carry little data: C2's optimising
#: compilations of Kafka, Connect, the catalog and Spark cost more CPU than they ever pay back.
#: Measured on the 2-core reference machine (a fresh default stack, then the seed-flow and
#: DWS-hour tests): the stack's JVMs used 111 CPU-s instead of 219, ``up`` took 16 s instead of
#: 27 s, the tests 78 s instead of 104 s. Production (deploy/) runs the JVMs' defaults.
CLIENT_COMPILER_ONLY = "-XX:TieredStopAtLevel=1"

JVM_FLAGS = [
    "-XX:+UseSerialGC",  # smallest footprint; these services are lightly loaded
    CLIENT_COMPILER_ONLY,
    "-XX:MaxMetaspaceSize=256m",
    "-XX:ReservedCodeCacheSize=96m",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
]


@dataclass(frozen=True)
class Service:
    name: str
    port: int
    main_class: str
    classpath_dirs: list[str]
    heap: str
    health: Callable[[], bool]
    health_text: str
    args: list[str] = field(default_factory=list)
    jvm_props: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    prepare: Callable[[], None] | None = None
    timeout: float = 90.0
    #: run through this ``spark-class`` script (Spark's own launcher: classpath, module options)
    #: instead of ``java -cp``; the JVM flags and markers reach it as SPARK_DAEMON_JAVA_OPTS
    spark_class: str | None = None
    #: with ``spark_class``: the service is a Spark *application* started by spark-submit (its
    #: ``main_class`` the application's; the driver JVM gets the flags and markers as driver options
    #: and ``heap`` as driver memory), not a daemon of Spark's own
    spark_submit: bool = False
    #: run ``main_class`` as a Python module of lakebus (``sys.executable -m <module>``) instead of a
    #: JVM; the markers are passed as its first arguments (the module ignores ``-D…`` arguments), so
    #: the pid file, the log and the health probe work as for the JVMs
    python_module: bool = False
    #: services of one start group are all started before any is waited for. The brokers of a
    #: KRaft cluster must be (broker 1 alone can never elect a controller, waiting for it first
    #: would time out); the workers of a Connect cluster may be (their start-up overlaps)
    start_group: str | None = None
    #: ``args`` is the whole command line (a native server, not a JVM: PostgreSQL); it carries the
    #: markers itself (see :func:`lakebus_dagster.stack.process.markers`)
    command: bool = False
    #: the kind of service (its spec's name: every broker is a "kafka")
    spec: str = ""
    #: the kinds of service that must all be healthy before this one starts (see ServiceSpec.depends_on)
    depends_on: tuple[str, ...] = ()
    #: run once the service is healthy, before anything after it starts (e.g. the secured broker's ACLs);
    #: returns a line to print, or None
    on_ready: Callable[[], str | None] | None = None
    #: run once after a fresh start became healthy (after ``on_ready``; e.g. S3's bucket); a line to print, or None
    after_start: Callable[[], str | None] | None = None
    #: the deploy/ file its configuration is read from (a failed start names it), or ""
    source: str = ""
    #: where it serves Prometheus metrics (the JMX exporter agent), or None
    metrics_port: int | None = None

    def argv(self, settings: StackSettings, jars: Path, java: str, markers: list[str]) -> list[str]:
        if self.command:
            return list(self.args)
        if self.python_module:
            return [sys.executable, "-m", self.main_class, *markers, *self.args]
        if self.spark_class:
            opts = " ".join([*JVM_FLAGS, *markers, *self.jvm_props])
            java_home = Path(java).resolve().parent.parent
            if self.spark_submit:
                return ["env", f"JAVA_HOME={java_home}", self.spark_class, "org.apache.spark.deploy.SparkSubmit",
                        "--class", self.main_class, "--driver-memory", self.heap, "--driver-java-options", opts, *self.args]
            # `env` and spark-class both exec: the pid recorded is the JVM's
            return ["env", f"SPARK_DAEMON_JAVA_OPTS={opts}", f"SPARK_DAEMON_MEMORY={self.heap}", f"JAVA_HOME={java_home}",
                    self.spark_class, self.main_class, *self.args]
        classpath = os.pathsep.join(str(jars / d / "*") for d in self.classpath_dirs)
        return [
            java,
            "-Xms64m",
            f"-Xmx{self.heap}",
            *JVM_FLAGS,
            *markers,
            *self.jvm_props,
            "-cp",
            classpath,
            self.main_class,
            *self.args,
        ]


def pyspark_home() -> Path:
    """The pyspark package is a Spark distribution (bin/spark-class, jars/): the local standalone cluster runs from it."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        raise StackError("spark: the pyspark package is not installed (it provides the standalone master and worker)")
    return Path(spec.origin).parent


def spark_class_script() -> str:
    """Spark's own launcher (classpath, module options) of the pyspark distribution."""
    return str(pyspark_home() / "bin" / "spark-class")


def write_file(path: Path, text: str, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def properties(values: Mapping[str, object]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


#: (logger, level) below the root's INFO: Kafka's client chatter, the plugin scanner, Hadoop and Parquet
LOGGER_LEVELS = (
    ("org.apache.kafka.clients", "WARN"),
    ("org.apache.kafka.common.utils.AppInfoParser", "WARN"),
    ("org.apache.kafka.connect.runtime.isolation", "WARN"),
    ("org.reflections", "ERROR"),
    ("kafka.request.logger", "WARN"),
    ("org.apache.hadoop", "WARN"),
    ("org.apache.parquet", "WARN"),
)

#: The brokers' and workers' Log4j 2 configuration (Kafka 4 logs through Log4j 2; its properties format):
#: everything at INFO to stdout, which the stack writes to the service's log file, in Kafka's own pattern.
LOG4J2 = properties(
    {
        "status": "warn",
        "appender.stdout.type": "Console",
        "appender.stdout.name": "STDOUT",
        "appender.stdout.layout.type": "PatternLayout",
        "appender.stdout.layout.pattern": "[%d] %p %m (%c)%n",
        "rootLogger.level": "INFO",
        "rootLogger.appenderRef.stdout.ref": "STDOUT",
        **{key: value for n, (name, level) in enumerate(LOGGER_LEVELS)
           for key, value in ((f"logger.l{n}.name", name), (f"logger.l{n}.level", level))},
    }
)
#: its file name in the stack's run dir
LOG4J2_FILE = "log4j2.properties"


def http_ok(url: str, predicate: Callable[[requests.Response], bool] = lambda r: True,
            auth: tuple[str, str] | None = None, headers: dict[str, str] | None = None, verify: str | bool = True) -> bool:
    resp = requests.get(url, timeout=2, auth=auth, headers=headers, verify=verify)
    return resp.status_code == 200 and predicate(resp)
