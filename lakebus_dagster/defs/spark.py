"""The Spark resource of the DWS, maintenance and current-state steps: a session on the long-lived
Spark Connect server (``sc://``), or an embedded one (dagster-pyspark's lazy session) when no server
is configured; and the pool every such step runs in (:data:`SPARK_POOL`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pydantic import Field, PrivateAttr

from lakebus_dagster.defs.lake_access import LakeAccess
from lakebus_dagster.lake.spark import SPARK_CONNECT_WAIT_S, prepare_driver_env, spark_conf, spark_jars

#: the Dagster pool of every step that runs Spark (the DWS and current-state assets, maintenance):
#: the instance's ``concurrency.pools.default_limit`` bounds how many run at once across all runs,
#: since they share one Spark Connect server's executor (2 cores locally: a limit of 2)
SPARK_POOL = "spark"


class LakeSparkResource(LakeAccess):
    """A Spark session for the DWS and maintenance steps, over the Iceberg REST catalog and S3FileIO.

    With ``remote`` (``sc://host:port``, the default from LAKEBUS_SPARK_REMOTE) the step attaches to
    a long-lived Spark Connect server in about a second and gets a session of its own there: the
    catalog is configured once, server-side; temp views and SQL confs stay within the step's
    session. Without it, dagster-pyspark's lazy embedded session: a Spark application per step,
    configured from the typed fields (the EnvVar S3 keys included — no secret in ``spark_config``).

    ``spark_config`` is for tuning and wins over the defaults; with ``remote`` it holds runtime SQL
    confs of the session (``spark.sql.shuffle.partitions``, ...), since the server owns the rest.

    The embedded session is dagster-pyspark's :class:`LazyPySparkResource`, used through its public
    ``spark_session`` (composition, not a subclass: nothing here depends on its private attributes).
    """

    remote: str | None = Field(default=None, description="sc://host:port of a Spark Connect server; None: an embedded session")
    connect_timeout_s: float = Field(default=3.0, description="how long one attempt waits for the server's port")
    connect_wait_s: float = Field(
        default=SPARK_CONNECT_WAIT_S,
        description="how long resource init keeps trying a server that does not answer before it fails the step "
        "(a restart of the server is ridden out; a longer outage fails the step, and the run's retries try again)",
    )
    master: str = "local[2]"
    driver_memory: str = "2g"
    jars_dir: str | None = Field(
        default=None,
        description="directory holding spark/*.jar (the Iceberg runtime + AWS bundle) for an embedded session; "
        "None with a Spark Connect server, which has its own (so the code location does not hash infra/maven "
        "to locate jars it never uses)",
    )
    spark_config: dict[str, Any] = Field(default_factory=dict)
    _session: Any = PrivateAttr(default=None)
    _session_seconds: float | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """With a server: wait up to ``connect_wait_s`` for its port, then fail the step at resource
        init in one line naming the endpoint (the gRPC client alone would retry for ten minutes).

        Why wait at all: the run's automatic retries follow a failure at once, with no delay, so a
        step that failed on its first refused connection spent every retry within the seconds a
        server restart takes (measured locally: the server answers ~12 s after its start)."""
        if self.remote:
            from lakebus_dagster.lake.spark import SparkConnectUnreachable, wait_for_connect

            def progress(message: str) -> None:
                context.log.warning(message)

            try:
                wait_for_connect(self.remote, self.connect_wait_s, self.connect_timeout_s, progress)
            except SparkConnectUnreachable as exc:
                raise dg.Failure(str(exc), allow_retries=False) from None

    @property
    def session_seconds(self) -> float | None:
        """How long getting the step's session took (attach, or an embedded application's start)."""
        return self._session_seconds

    @property
    def spark_session(self) -> Any:
        """The step's session, opened on first use (a step that never touches Spark starts none)."""
        if self._session is None:
            started = time.monotonic()
            try:
                self._session = self._open_session()
            finally:
                self._session_seconds = round(time.monotonic() - started, 2)
        return self._session

    def _open_session(self) -> Any:
        if self.remote:
            from lakebus_dagster.lake.spark import attach

            # setup_for_execution probed the endpoint already
            return attach(self.remote, {k: str(v) for k, v in self.spark_config.items()}, probe=False)
        prepare_driver_env()
        conf = spark_conf(self.endpoints(), master=self.master, driver_memory=self.driver_memory, jars=spark_jars(self._jars()))
        return LazyPySparkResource(spark_config={**conf, **self.spark_config}).spark_session

    def _jars(self) -> Path:
        if not self.jars_dir:
            raise dg.Failure("LakeSparkResource: an embedded session (no `remote`) needs `jars_dir`, the directory "
                             "holding spark/*.jar; build_resources sets it when LAKEBUS_SPARK_REMOTE=local", allow_retries=False)
        return Path(self.jars_dir)

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        """Release the step's server-side session (its temp views, cached plans); an embedded
        session ends with the step's process."""
        if self.remote and self._session is not None:
            self._session.stop()
            self._session = None
