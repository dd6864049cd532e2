"""The demo instance's dagster.yaml: no newsletter dialog, lakebus's concurrency limits, and hand-made settings survive."""

import yaml

from lakebus_dagster.stack.dagster_ui import write_instance_config


def test_instance_config_turns_the_newsletter_dialog_off(tmp_path):
    path = write_instance_config(tmp_path)
    assert yaml.safe_load(path.read_text()) == {
        "nux": {"enabled": False},
        "concurrency": {
            "runs": {"max_concurrent_runs": 6, "tag_concurrency_limits": [
                {"key": "lakebus/exclusive", "value": "provisioning", "limit": 1},
                {"key": "lakebus/exclusive", "value": "lakehouse", "limit": 1},
                # as deploy/dagster.yaml: one run per partition key (lakebus_dagster/deployment/instance.py)
                {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}, "limit": 1},
            ]},
            "pools": {"default_limit": 2},
        },
        # only runs tagged dagster/max_retries are retried (the DWS jobs, the gap-fill runs)
        "run_retries": {"enabled": True, "max_retries": 0},
    }


def test_instance_config_keeps_other_settings(tmp_path):
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\nnux:\n  enabled: true\n")
    config = yaml.safe_load(write_instance_config(tmp_path).read_text())
    assert config["telemetry"] == {"enabled": False} and config["nux"] == {"enabled": False}
    # a hand-made run queue is kept as it is (Dagster refuses both forms at once)
    (tmp_path / "dagster.yaml").write_text("run_queue:\n  max_concurrent_runs: 3\n")
    config = yaml.safe_load(write_instance_config(tmp_path).read_text())
    assert config == {"run_queue": {"max_concurrent_runs": 3}, "nux": {"enabled": False}, "run_retries": {"enabled": True, "max_retries": 0}}
    # and a hand-made retry policy too
    (tmp_path / "dagster.yaml").write_text("run_retries:\n  enabled: false\n")
    assert yaml.safe_load(write_instance_config(tmp_path).read_text())["run_retries"] == {"enabled": False}


def test_the_local_instance_limits_lakehouse_runs_and_spark_steps_as_dagster_reads_them(tmp_path):
    """The generated dagster.yaml is valid for Dagster and means what deploy/dagster.yaml means:
    one lakehouse write and one provisioning run at a time, at most 2 steps of the `spark` pool."""
    import dagster as dg

    from lakebus_dagster.defs.lakehouse.constants import EXCLUSIVE_TAG, SPARK_POOL
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
