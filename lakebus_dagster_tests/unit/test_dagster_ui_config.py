"""The demo instance's dagster.yaml: no newsletter dialog, and hand-made settings survive."""

import yaml

from lakebus_dagster.stack.dagster_ui import write_instance_config


def test_instance_config_turns_the_newsletter_dialog_off(tmp_path):
    path = write_instance_config(tmp_path)
    assert yaml.safe_load(path.read_text()) == {"nux": {"enabled": False}}


def test_instance_config_keeps_other_settings(tmp_path):
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\nnux:\n  enabled: true\n")
    config = yaml.safe_load(write_instance_config(tmp_path).read_text())
    assert config == {"telemetry": {"enabled": False}, "nux": {"enabled": False}}
