"""What lake_incident_sensor reads from the Dagster instance, as
:class:`~lakebus_dagster.monitor.lake_incidents.LakeOutcome` s: finished DWS runs (the DWS jobs' and
the implicit asset job's — declarative automation, backfills, UI materializations — that built DWS
tables) and the latest DWS / freshness check evaluation per check and partition.

Dagster APIs used beyond the decorated public ones (pinned by ``unit/test_lake_incidents.py``):
``instance.all_logs`` (a failed step's error, a failing check's description) and
``instance.event_log_storage.get_asset_check_partition_info`` (the check status per partition,
cursored by storage id).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

import dagster as dg

from lakebus_dagster.defs.lakehouse.checks import NO_DUPLICATE_KEYS, NO_NULL_KEYS, RECONCILES
from lakebus_dagster.defs.lakehouse.constants import EXCLUSIVE_TAG
from lakebus_dagster.defs.lakehouse.partitions import HOUR_KEY_FORMAT
from lakebus_dagster.defs.lakehouse.schedules import PARTITION_RANGE_END_TAG, PARTITION_RANGE_START_TAG
from lakebus_dagster.monitor.lake_incidents import LakeOutcome

#: Dagster's implicit asset job: the runs of declarative automation, backfills and UI materializations
AUTOMATION_JOB = "__ASSET_JOB"
PARTITION_TAG = "dagster/partition"
#: the label of a run (or check evaluation) with no partition
UNPARTITIONED = "all"
ROOT_RUN_TAG = "dagster/root_run_id"
DWS_CHECKS = (RECONCILES, NO_NULL_KEYS, NO_DUPLICATE_KEYS)
#: the check ``build_last_update_freshness_checks`` gives each ODS asset (see checks.ods_freshness)
FRESHNESS_CHECK = "freshness_check"
#: what the freshness check's evaluation carries when the table was ever committed to
LAST_UPDATED_KEY = "dagster/last_updated_timestamp"
#: a failure that ended longer ago than this opens no incident (a first tick on an old instance)
LOOKBACK_S = 7 * 24 * 3600.0
#: runs read per job and tick: far above what a tick sees (the runs that changed since the last
#: tick; on the first, 7 days of them); a run past it in one tick would be missed
MAX_RUNS_PER_TICK = 5000
#: a range is expanded into at most this many partitions
MAX_RANGE_PARTITIONS = 24 * 400


# -- partitions -----------------------------------------------------------------------------------
def partitions_of_range(start: str, end: str) -> frozenset[str]:
    """The partition keys of a range of hourly (``2025-11-25-09:00``) or daily keys; a range of
    keys in neither format stands for itself (closed only by the same range)."""
    for fmt, step in ((HOUR_KEY_FORMAT, timedelta(hours=1)), ("%Y-%m-%d", timedelta(days=1))):
        try:
            first, last = datetime.strptime(start, fmt), datetime.strptime(end, fmt)
        except ValueError:
            continue
        keys, at = [], first
        while at <= last and len(keys) < MAX_RANGE_PARTITIONS:
            keys.append(at.strftime(fmt))
            at += step
        return frozenset(keys)
    return frozenset({f"{start}...{end}"})


def run_partitions(tags: dict[str, str]) -> tuple[str, frozenset[str]]:
    """(label, partition keys) of a run: its ``dagster/partition``, its range, or ``("all", ∅)``
    (an unpartitioned run: closed only by another one)."""
    if PARTITION_TAG in tags:
        return tags[PARTITION_TAG], frozenset({tags[PARTITION_TAG]})
    start, end = tags.get(PARTITION_RANGE_START_TAG), tags.get(PARTITION_RANGE_END_TAG)
    if start and end:
        return (start if start == end else f"{start}...{end}"), partitions_of_range(start, end)
    return UNPARTITIONED, frozenset()


def _where(label: str) -> str:
    return "every partition" if label == UNPARTITIONED else f"partitions {label}" if "..." in label else f"partition {label}"


def _rerun(job: str, tags: dict[str, str]) -> str:
    if job == AUTOMATION_JOB:
        return "rerun: the DWS job of the table's grain for these partitions (runbook), or Materialize them in the UI"
    if PARTITION_TAG in tags:
        return f"rerun: lakebus launch {job} --tag {PARTITION_TAG}={tags[PARTITION_TAG]}"
    return (f"rerun: lakebus launch {job} --tag {PARTITION_RANGE_START_TAG}={tags.get(PARTITION_RANGE_START_TAG)} "
            f"--tag {PARTITION_RANGE_END_TAG}={tags.get(PARTITION_RANGE_END_TAG)}")


# -- DWS runs -------------------------------------------------------------------------------------
def _passed(family: str, label: str, partitions: frozenset[str], detail: tuple[str, ...],
            assets: frozenset[str] | None = None) -> LakeOutcome:
    """A success: it opens nothing (its key is its family), it closes what it covers."""
    return LakeOutcome(family, family, label, partitions, True, detail=detail, assets=assets)


def _ended(record) -> float:
    return record.end_time if record.end_time is not None else record.update_timestamp.timestamp()


def _finished_runs(instance: dg.DagsterInstance, jobs: Sequence[str], after: float) -> list:
    """Runs of ``jobs`` and of the implicit asset job that ended (FAILURE or SUCCESS) after ``after``, oldest first.
    A run's update time is never before its end, so ``updated_after`` finds every one of them."""
    since = datetime.fromtimestamp(after, tz=timezone.utc)
    records = []
    for job in (*jobs, AUTOMATION_JOB):
        records += instance.get_run_records(
            filters=dg.RunsFilter(job_name=job, statuses=[dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.SUCCESS],
                                  updated_after=since),
            limit=MAX_RUNS_PER_TICK, order_by="update_timestamp", ascending=True)
    return sorted((r for r in records if _ended(r) > after), key=_ended)


def _error_headline(error) -> str:
    """The innermost cause of a step's error, first line (Dagster wraps user errors in its own)."""
    while error is not None and getattr(error, "cause", None) is not None:
        error = error.cause
    lines = (getattr(error, "message", "") or "").strip().splitlines()
    return (lines[0] if lines else "no error message")[:300]


def _failed_steps(instance: dg.DagsterInstance, run_id: str) -> tuple[dict[str, str], str]:
    """The run's failed steps with their error headlines, and the run failure's own message."""
    steps, run_message = {}, ""
    for entry in instance.all_logs(run_id, of_type={dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.RUN_FAILURE}):
        event = entry.dagster_event
        if event is None:
            continue
        if event.event_type == dg.DagsterEventType.STEP_FAILURE:
            steps.setdefault(entry.step_key or "?", _error_headline(event.step_failure_data.error))
        else:
            run_message = (event.message or "").strip().splitlines()[0][:300] if event.message else ""
    return steps, run_message


def _run_outcome(instance: dg.DagsterInstance, record, dws: frozenset[dg.AssetKey]) -> LakeOutcome | None:
    """A finished DWS run as an outcome; None for an implicit-asset-job run that built no DWS table."""
    run = record.dagster_run
    tags = dict(run.tags)
    selected = frozenset(k.to_user_string() for k in (run.asset_selection or ()) if k in dws)
    if run.job_name == AUTOMATION_JOB and not selected and (run.asset_selection or tags.get(EXCLUSIVE_TAG) != "lakehouse"):
        return None
    label, partitions = run_partitions(tags)
    assets = selected or None
    ended = datetime.fromtimestamp(_ended(record), tz=timezone.utc).isoformat(timespec="seconds")
    if run.status == dg.DagsterRunStatus.SUCCESS:
        return _passed("dws", label, partitions, (f"run {run.run_id} of {run.job_name} succeeded for {_where(label)} at {ended}",),
                       assets)
    steps, run_message = _failed_steps(instance, run.run_id)
    tables = sorted(k.to_user_string() for k in dws if k.path[-1] in steps)
    root = tags.get(ROOT_RUN_TAG)
    attempt = f"a retry of run {root}" if root else "first attempt"
    lines = [f"run {run.run_id} ({attempt}) of {run.job_name} failed at {ended} for {_where(label)}"]
    lines += [f"step {step}: {headline}" for step, headline in sorted(steps.items())[:3]] or [run_message or "no step failed"]
    lines.append(_rerun(run.job_name, tags))
    on = f" ({', '.join(tables or sorted(selected))})" if tables or selected else ""
    return LakeOutcome("dws", f"dws:{run.job_name}:{label}", label, partitions, False,
                       summary=f"DWS run {run.job_name} failed for {_where(label)}{on}", detail=tuple(lines),
                       assets=frozenset(tables) or assets)


def run_outcomes(instance: dg.DagsterInstance, jobs: Sequence[str], dws: frozenset[dg.AssetKey],
                 after: float) -> tuple[list[LakeOutcome], float]:
    """The outcomes of the DWS runs that ended after ``after`` and the new watermark."""
    records = _finished_runs(instance, jobs, after)
    outcomes = [o for r in records if (o := _run_outcome(instance, r, dws)) is not None]
    return outcomes, max([after, *(_ended(r) for r in records)])


# -- checks ---------------------------------------------------------------------------------------
class _Runs:
    """Run records and check evaluations looked up once per tick."""

    def __init__(self, instance: dg.DagsterInstance):
        self.instance, self._records, self._evaluations = instance, {}, {}

    def record(self, run_id: str):
        if run_id and run_id not in self._records:
            self._records[run_id] = self.instance.get_run_record_by_id(run_id)
        return self._records.get(run_id)

    def evaluation(self, run_id: str, key: dg.AssetCheckKey, partition: str | None):
        """The run's evaluation of ``key`` (for ``partition``), or None."""
        if run_id not in self._evaluations:
            entries = self.instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION) if run_id else []
            self._evaluations[run_id] = [e.dagster_event.event_specific_data for e in entries if e.dagster_event]
        return next((ev for ev in reversed(self._evaluations[run_id])
                     if ev.asset_check_key == key and getattr(ev, "partition", None) == partition), None)


def _check_scope(info, runs: _Runs, fresh: bool) -> tuple[str, frozenset[str]]:
    """(label, partitions) a check evaluation concerns: its partition, its run's range, or unpartitioned."""
    if fresh:
        return "", frozenset()
    if info.partition_key is not None:
        return info.partition_key, frozenset({info.partition_key})
    record = runs.record(info.latest_planned_run_id)
    return run_partitions(dict(record.dagster_run.tags)) if record is not None else (UNPARTITIONED, frozenset())


def _check_failure_lines(info, runs: _Runs, where: str) -> tuple[str, ...]:
    record = runs.record(info.latest_planned_run_id)
    evaluation = runs.evaluation(info.latest_planned_run_id, info.check_key, info.partition_key)
    severity = getattr(getattr(evaluation, "severity", None), "value", "ERROR")
    lines = [f"{info.check_key.name} on {info.check_key.asset_key.to_user_string()} failed ({severity}) for {where}"]
    if evaluation is not None and evaluation.description:
        lines.append(evaluation.description[:500])
    if record is not None:
        lines.append(f"run {record.dagster_run.run_id} of {record.dagster_run.job_name}")
    return tuple(lines)


def _never_committed(evaluation) -> bool:
    """A freshness failure without a last update: the ODS table does not exist yet (the sink creates
    it with its first record; an event nobody sent has none). Not stale, so no news: a sink that
    writes nothing has its own incidents on the connector side."""
    return evaluation is not None and LAST_UPDATED_KEY not in (evaluation.metadata or {})


def _check_outcome(info, runs: _Runs, ods: frozenset[dg.AssetKey], now: float) -> LakeOutcome | None:
    key = info.check_key
    asset, fresh = key.asset_key.to_user_string(), key.asset_key in ods
    label, partitions = _check_scope(info, runs, fresh)
    family = f"fresh:{asset}" if fresh else f"check:{asset}:{key.name}"
    if info.latest_execution_status.value == "SUCCEEDED":
        return _passed(family, label, partitions, (f"{key.name} on {asset} passed for {_where(label) if not fresh else 'the table'}",))
    record = runs.record(info.latest_planned_run_id)
    if record is not None and now - _ended(record) > LOOKBACK_S:
        return None
    if fresh and _never_committed(runs.evaluation(info.latest_planned_run_id, key, None)):
        return None
    if fresh:
        return LakeOutcome(family, f"fresh:{asset}", label, partitions, False, detail=_check_failure_lines(info, runs, "the table"),
                           summary=f"ODS table {asset} is stale: {key.name} failed")
    return LakeOutcome(family, f"check:{asset}:{key.name}:{label}", label, partitions, False,
                       summary=f"DWS check {key.name} failed on {asset} for {_where(label)}",
                       detail=_check_failure_lines(info, runs, _where(label)))


def check_outcomes(instance: dg.DagsterInstance, keys: Sequence[dg.AssetCheckKey], ods: frozenset[dg.AssetKey],
                   after: int, now: float) -> tuple[list[LakeOutcome], int]:
    """The outcomes of the check evaluations stored after storage id ``after`` (the latest per
    check and partition; one still planned, or an older one returned for a newer materialization,
    is no news) and the new watermark."""
    infos = instance.event_log_storage.get_asset_check_partition_info(list(keys), after_storage_id=after)
    news = sorted((i for i in infos if i.latest_check_event_storage_id > after
                   and i.latest_execution_status.value in ("SUCCEEDED", "FAILED")),
                  key=lambda i: i.latest_check_event_storage_id)
    runs = _Runs(instance)
    outcomes = [o for i in news if (o := _check_outcome(i, runs, ods, now)) is not None]
    return outcomes, max([after, *(i.latest_check_event_storage_id for i in infos)])
