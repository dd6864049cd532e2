"""The demo instance's dagster.yaml (deploy/dagster.yaml with the declared overlay): lakebus's concurrency limits as Dagster reads them."""

import yaml

from lakebus_dagster.stack.dagster_ui import write_instance_config


def test_the_local_instance_is_rewritten_from_deploy_on_every_start(tmp_path):
    """No newsletter dialog, no telemetry (deploy/dagster.yaml's), and a hand edit does not survive
    ``up``: the instance is deploy/'s (edit its template), see unit/test_deploy_files_run.py."""
    config = yaml.safe_load(write_instance_config(tmp_path).read_text())
    assert config["nux"] == {"enabled": False} and config["telemetry"] == {"enabled": False}
    # only runs tagged dagster/max_retries are retried (the DWS jobs, the gap-fill runs)
    assert config["run_retries"] == {"enabled": True, "max_retries": 0}
    (tmp_path / "dagster.yaml").write_text("run_queue:\n  max_concurrent_runs: 3\n")
    assert yaml.safe_load(write_instance_config(tmp_path).read_text())["concurrency"]["runs"]["max_concurrent_runs"] == 6


def test_the_local_instance_limits_lakehouse_runs_and_spark_steps_as_dagster_reads_them(tmp_path):
    """The generated dagster.yaml is valid for Dagster and means what deploy/dagster.yaml means:
    one lakehouse write and one provisioning run at a time, at most 2 steps of the `spark` pool."""
    import dagster as dg

    from lakebus_dagster.defs.lakehouse.constants import EXCLUSIVE_TAG
    from lakebus_dagster.defs.spark import SPARK_POOL
    from lakebus_dagster.definitions import defs

    write_instance_config(tmp_path)
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        concurrency = instance.get_concurrency_config()
        assert concurrency.pool_config.default_pool_limit == 2
        limits = concurrency.run_queue_config.tag_concurrency_limits
        assert {(lim["key"], str(lim["value"]), lim["limit"]) for lim in limits} == {
            (EXCLUSIVE_TAG, "provisioning", 1), (EXCLUSIVE_TAG, "lakehouse", 1),
            ("dagster/partition", str({"applyLimitPerUniqueValue": True}), 1)}
    # every step that runs Spark is in that pool
    graph = defs.resolve_asset_graph()
    dws = [k for k in graph.get_all_asset_keys() if k.path[0] == "dws"]
    assert dws and all(graph.get(k).pools == {SPARK_POOL} for k in dws)
    maintenance = defs.resolve_job_def("lakehouse_maintenance")
    assert {node.definition.pool for node in maintenance.nodes_in_topological_order} == {SPARK_POOL}
