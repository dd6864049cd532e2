"""Fetch the stack's jars through Maven, once, into a cache outside the repository.

The cache key is a hash of every source file under ``infra/maven`` (the poms, and the Java sources
of lakebus's own Connect plugin, which the same Maven run compiles, tests and packages into
``connect-plugins/lakebus``): change a version or the plugin and the next ``up`` resolves a fresh
directory; leave them alone and no Maven process runs at all. Maven's own local repository
(``~/.m2``) makes even a re-resolve an offline copy.

Several stacks share the cache (``make test`` starts three at once, each with its own state dir):
one Maven run per cache key at a time, under an exclusive lock on ``<key>.lock``; a stack that
waited finds the jars complete and runs none (seen racing: two runs writing one ``.partial`` both
failed, "Failed to copy artifact").
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

from lakebus_dagster.lake.jars import MAVEN_DIR, jars_dir
from lakebus_dagster.stack.errors import StackError
from lakebus_dagster.stack.local_settings import StackSettings

__all__ = ["COMPONENTS", "MAVEN_DIR", "ensure_jars", "is_fetched", "jars_dir"]
COMPONENTS = (
    "kafka",
    "rest-catalog",
    "s3proxy",
    "spark",
    "connect-plugins/iceberg",
    "connect-plugins/file",
    # Debezium's PostgreSQL source (change capture, LAKEBUS_POSTGRES=on), its plugin tarball unpacked
    "connect-plugins/debezium-connector-postgres",
    "connect-plugins/lakebus",  # lakebus's own plugin, built from infra/maven/connect-plugin-lakebus
    "jmx-exporter",  # the Prometheus JMX exporter's Java agent on the brokers and workers (stack/jmx_exporter.py)
)
_COMPLETE_MARKER = ".complete"


def is_fetched(settings: StackSettings) -> bool:
    return (jars_dir(settings) / _COMPLETE_MARKER).exists()


def ensure_jars(settings: StackSettings, *, quiet: bool = False) -> Path:
    """Return the jars directory, running Maven first if these sources were never built here (one
    run at a time per cache key, whichever stack asks: see the module's docstring)."""
    target = jars_dir(settings)
    if (target / _COMPLETE_MARKER).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        try:  # released when the file closes, also when this process dies
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not quiet:
                print(f"[stack] another stack is fetching the jars into {target}: waiting for it ...", flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / _COMPLETE_MARKER).exists():
            return target
        return _fetch(settings, target, quiet)


def _fetch(settings: StackSettings, target: Path, quiet: bool) -> Path:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise StackError("maven: `mvn` is not on PATH; install Maven (Debian package `maven`) to fetch the stack's jars")
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    log_file = settings.logs_dir / "maven-fetch.log"
    if not quiet:
        print(f"[stack] fetching jars with Maven into {target} (log: {log_file}) ...", flush=True)
    with log_file.open("w") as log:
        proc = subprocess.run(
            [mvn, "-B", "-f", str(MAVEN_DIR / "pom.xml"), "package", f"-Dlakebus.jars={staging}"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "MAVEN_OPTS": os.environ.get("MAVEN_OPTS", "-Xmx512m")},
        )
    if proc.returncode != 0:
        tail = "".join(log_file.read_text(errors="replace").splitlines(keepends=True)[-15:])
        raise StackError(f"maven: fetching the stack's jars failed (exit {proc.returncode}); see {log_file}\n{tail}")
    missing = [c for c in COMPONENTS if not any((staging / c).glob("*.jar"))]
    if missing:
        raise StackError(f"maven: no jars were copied for {', '.join(missing)}; see {log_file}")
    (staging / _COMPLETE_MARKER).write_text("ok\n")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    if not quiet:
        print(f"[stack] jars ready in {target}", file=sys.stdout, flush=True)
    return target
