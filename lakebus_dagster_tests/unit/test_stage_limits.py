"""make test cannot hang: a stage past its limit is killed and named, a test past its own limit fails."""

from __future__ import annotations

import lakebus_dagster_tests.stages as stages


def test_a_stage_past_its_limit_is_stopped_and_named(tmp_path, monkeypatch, capsys):
    hang = tmp_path / "test_hang.py"
    hang.write_text("import time\n\ndef test_hangs():\n    time.sleep(600)\n")
    monkeypatch.setattr(stages, "BUILD", tmp_path)
    monkeypatch.setitem(stages.LIMITS, "unit", (300, 3))
    code = stages.Stages([]).pytest("unit", [str(hang), "-p", "no:cacheprovider"])
    out = capsys.readouterr().out
    assert code == 124
    assert "stage unit: STOPPED after its limit of 3s" in out


def test_a_test_past_its_own_limit_fails_the_stage(tmp_path, monkeypatch):
    slow = tmp_path / "test_slow.py"
    slow.write_text("import time\n\ndef test_slow():\n    time.sleep(600)\n")
    monkeypatch.setattr(stages, "BUILD", tmp_path)
    monkeypatch.setitem(stages.LIMITS, "unit", (2, 120))
    assert stages.Stages([]).pytest("unit", [str(slow), "-p", "no:cacheprovider"]) == 1
    assert "Timeout" in (tmp_path / "junit-unit.xml").read_text()


def test_every_stage_has_limits_and_a_test_fits_in_its_stage():
    assert set(stages.LIMITS) == {"unit", "integration", "daemon", "lake", "cluster", "secured", "cdc"}
    for name, (per_test, whole) in stages.LIMITS.items():
        assert 0 < per_test <= whole, name
