"""The ledger run a resolved stall launches, and the re-queue that follows it, judge with the same
short grace (issue 29.4); both run configs are valid for the shipped jobs."""

from __future__ import annotations

import dagster as dg
import pytest

from lakebus_dagster.bus.layout import SinkTuning
from lakebus_dagster.definitions import defs
from lakebus_dagster.defs.ledger.checks import ledger_grace_of_run
from lakebus_dagster.monitor.stall import settled_after_seconds
from lakebus_dagster.secret_env import S3_ACCESS_KEY_VAR, S3_SECRET_KEY_VAR



@pytest.fixture(autouse=True)
def s3_keys(monkeypatch):
    """Validating a run config resolves the resources' EnvVars: the S3 keys, which only the local
    stack's secrets.env sets (absent in make test's unit stage on a fresh clone)."""
    monkeypatch.setenv(S3_ACCESS_KEY_VAR, "unit-test")
    monkeypatch.setenv(S3_SECRET_KEY_VAR, "unit-test")


STALL_LEDGER_CONFIG = {"ops": {"offset_ledger": {"config": {"grace_s": 80.0}}}}


def test_the_grace_after_a_stall_is_two_commit_cycles_of_the_shipped_tuning():
    tuning = SinkTuning()
    assert settled_after_seconds(tuning.commit_interval_ms, tuning.commit_timeout_ms) == 80.0
    assert settled_after_seconds(60_000, 30_000) == 180.0  # a 60 s interval: three minutes


def test_the_stall_ledger_config_is_valid_for_the_ledger_job_and_its_grace_is_read_back():
    assert dg.validate_run_config(defs.resolve_job_def("offset_ledger_job"), STALL_LEDGER_CONFIG)
    run = dg.DagsterRun(job_name="offset_ledger_job", run_config=STALL_LEDGER_CONFIG)
    assert ledger_grace_of_run(run) == 80.0
    assert ledger_grace_of_run(dg.DagsterRun(job_name="offset_ledger_job", run_config={})) is None


def test_the_requeue_takes_the_grace_as_config():
    config = {"ops": {"requeue_lost_records_op": {"config": {"grace_s": 80.0}}}}
    assert dg.validate_run_config(defs.resolve_job_def("requeue_lost_records"), config)
