"""The code location loads, and every job's resources are configured by the code location itself
(``build_resources``): none falls back to a default or a missing key when deployed. Which test proves
each definition: ``test_every_definition_has_a_test.py``."""

import dagster as dg

from lakebus_dagster.definitions import defs


def test_definitions_load():
    dg.Definitions.validate_loadable(defs)
    configured = set(defs.resources)
    assert {"kafka", "connect", "object_store", "iceberg", "spark", "layout", "alerts"} <= configured
    for job in defs.get_repository_def().get_all_jobs():
        unconfigured = job.required_resource_keys - {"io_manager"} - configured
        assert not unconfigured, f"job {job.name} needs resources the code location does not configure: {sorted(unconfigured)}"
