"""Stacks that start together share the jar cache: one Maven run per cache key, the others wait.

``make test`` starts three stacks at once; after a change under ``infra/maven`` (a new cache key)
two of them both ran Maven into the same ``.partial`` directory and both failed ("Failed to copy
artifact", then "no jars were copied"). A fake ``mvn`` on PATH stands in for Maven here: it counts
its runs, takes a second, and writes one jar per component.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

from lakebus_dagster.stack.jars import COMPONENTS

FAKE_MVN = textwrap.dedent("""\
    #!/bin/sh
    echo run >> "$FAKE_MVN_RUNS"
    sleep 1
    for arg in "$@"; do case "$arg" in -Dlakebus.jars=*) out="${arg#-Dlakebus.jars=}";; esac; done
    for c in %s; do mkdir -p "$out/$c" && : > "$out/$c/x.jar"; done
""") % " ".join(COMPONENTS)

#: one stack's `ensure_jars`, as `lakebus stack up` calls it, in its own process
STACK_UP = "from lakebus_dagster.stack.jars import ensure_jars; from lakebus_dagster.stack.local_settings import " \
           "load_stack_settings; print(ensure_jars(load_stack_settings(), quiet=True))"


def test_three_stacks_starting_together_run_maven_once_and_all_get_the_jars(tmp_path, clean_env):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mvn = bin_dir / "mvn"
    mvn.write_text(FAKE_MVN)
    mvn.chmod(mvn.stat().st_mode | stat.S_IEXEC)
    runs = tmp_path / "runs"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_MVN_RUNS": str(runs),
           "LAKEBUS_JARS_CACHE": str(tmp_path / "cache")}
    stacks = [subprocess.Popen([sys.executable, "-c", STACK_UP], env={**env, "LAKEBUS_STATE_DIR": str(tmp_path / f"s{k}")},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(3)]
    results = [(s.wait(timeout=120), *s.communicate()) for s in stacks]
    assert [code for code, _, _ in results] == [0, 0, 0], [err[-500:] for _, _, err in results]
    assert runs.read_text().count("run") == 1, "Maven ran more than once for one cache key"
    (jars,) = {Path(out.strip().splitlines()[-1]) for _, out, _ in results}
    assert all(any((jars / c).glob("*.jar")) for c in COMPONENTS)
