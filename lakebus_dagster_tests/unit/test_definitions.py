"""The code location loads: every job resolves, every resource is configured from settings."""

import dagster as dg

from lakebus_dagster.definitions import defs


def test_definitions_load():
    dg.Definitions.validate_loadable(defs)
    repo = defs.get_repository_def()
    for job in repo.get_all_jobs():
        assert defs.resolve_job_def(job.name) is not None
    assert {"kafka", "connect", "object_store", "iceberg", "spark"} <= set(defs.resources)
