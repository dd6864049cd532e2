"""Failover settings decided by data (issue 29): the Connect workers' rebalance protocol (29.2:
``sessioned`` vs ``eager``) and how fast a dead worker's tasks move (``stop12`` vs ``prompt``).

Each :data:`VARIANTS` entry is a set of worker settings (environment of the local stack) and the
sink consumers' session. In alternating blocks (e.g. ``prompt``, ``stop12``, ``prompt``, ``stop12`` ...),
the benchmark brings up its own cluster profile (3 KRaft brokers, 2 Connect workers; the state dir and
ports of :data:`benchmarks.bench_cluster_ingest.CLUSTER_ENV`) with the variant's settings,
checks that both workers' ``connect-distributed*.properties`` and their logged config carry them, and
runs the coordinator-kill scenario of the cluster failover test under the same load: events flow at
~250/s (the test's :class:`SteadyProducer`, acks=all, idempotent) into a bus of 2 partitions (2 sink
tasks, the shipped 10 s commit interval), and the worker running task 0 — the Iceberg sink's commit
coordinator — is killed with SIGKILL, every 4th time (the 1st, 5th, 9th ...) together with the broker
leading the bus's partition 0; the killed processes come back (``stack up``) once the survivor
committed, and the next kill waits for the sink to settle (tasks unmoved, a commit, no open incident).

Stalls are seen and healed by lakebus itself, not by this file: the status sensor runs as deployed
(:class:`lakebus_dagster_tests.failover_kit.SensorAsDeployed`: the shipped
policy and interval, every run it requests — ``restart_connector``, the ledger a resolved stall
launches, the ``requeue_lost_records`` after a loss — executed), its alerts go to a local webhook,
and each incident is counted by the rule that raised it (the sensor's own wording: "duplicate commit
coordinators?", "no commit coordinator?", or the coordinator watch's pending control events).

Per variant: kills (and how many with a broker), first-rows p50/p95/max (seconds from the kill to
the first Iceberg snapshot committed after it), duplicate / missing / stuck-coordinator incidents,
seconds from each incident alert to the first snapshot after it, stalls healed (a recovery notice),
restarts, records the stall ledgers found lost upstream (and re-queued), acked events missing from
the table at the end, duplicated events and offsets, acked / rows / distinct offsets, the offset
ledger's verdict at the end, and the 1-minute load average at each kill. A block whose sink never settles before its first kill (eager: BENCHMARKS.md) makes no
kill and reports its start-up instead: rebalances and task-config rewrites in the workers' logs, and
snapshots (none). The stack is stopped between blocks (the workers must restart to read the new
property) and at the end; every block's kills and alerts go to ``build/bench_failover_protocol.json``.

    python -m benchmarks bench_failover_protocol              # 2 blocks of 10 kills, prompt and stop12
    python -m benchmarks.bench_failover_protocol [kills_per_block] [rounds] [variant[:kills],...] [HH:MM deadline, UTC]
    python -m benchmarks.bench_failover_protocol 10 2 eager,sessioned 14:18   # issue 29.2's protocol comparison
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone

from benchmarks.bench_cluster_ingest import CLUSTER_ENV
from lakebus_dagster.bus.layout import UPSTREAM_ICEBERG_SINK_CLASS
from lakebus_dagster.settings import REPO_ROOT



@dataclass(frozen=True)
class Variant:
    """Worker settings (the local stack's environment) and the sink consumers' session for one arm."""

    env: dict[str, str]
    #: ``consumer.override.session.timeout.ms`` of the sink; None: the shipped :class:`SinkTuning`'s
    consumer_session_ms: int | None = None
    #: the status sensor's policy fields that differ from the shipped ones
    policy: tuple[tuple[str, object], ...] = ()
    #: ``iceberg.kafka.session.timeout.ms`` of the sink's control clients; 0: Kafka's default (45 s);
    #: None: the shipped :class:`SinkTuning`'s
    control_session_ms: int | None = None
    #: the sink's connector class; None: the shipped one (lakebus's, with stable task configs)
    connector_class: str | None = None
    #: lakebus's tasks release a coordinator on closing its partition; None: the shipped setting
    release_coordinator: bool | None = None
    #: lakebus's connector anchors the coordinators' control offsets at start; None: the shipped setting
    anchor_control_offsets: bool | None = None
    #: kills timed from the control topic to a phase of the commit cycle (:data:`PHASES`), the first
    #: of each block inside the young connector's first cycle; False: after the sink settled
    phased: bool = False

    @property
    def protocol(self) -> str:
        return self.env.get("LAKEBUS_CONNECT_PROTOCOL", "sessioned")


VARIANTS = {
    # today's shipped settings, whatever they are (the protocol comparison's "sessioned")
    "sessioned": Variant({"LAKEBUS_CONNECT_PROTOCOL": "sessioned"}),
    "eager": Variant({"LAKEBUS_CONNECT_PROTOCOL": "eager"}),
    # what shipped until stop 12: a dead worker's tasks move after the 10 s delay; a 25 s consumer
    # session outlasts that reaction (10 s worker session + 10 s delay + task start)
    "stop12": Variant({"LAKEBUS_CONNECT_PROTOCOL": "sessioned", "LAKEBUS_CONNECT_REBALANCE_DELAY_MS": "10000"}, 25_000,
                      control_session_ms=0),
    # tasks move as soon as the group sees the worker gone (10 s), so an 18 s session still outlasts
    # the reaction (by more than 25 s did above when the dead worker was not the group's leader)
    "prompt": Variant({"LAKEBUS_CONNECT_PROTOCOL": "sessioned", "LAKEBUS_CONNECT_REBALANCE_DELAY_MS": "0"}, 18_000,
                      control_session_ms=0),
    # the same, with the status sensor restarting a sink that runs two commit coordinators
    "prompt-heal": Variant({"LAKEBUS_CONNECT_PROTOCOL": "sessioned", "LAKEBUS_CONNECT_REBALANCE_DELAY_MS": "0"}, 18_000,
                           (("heal_dual_coordinators", True),), control_session_ms=0),
    # the dead coordinator's control consumer leaves its group after 10 s, not Kafka's 45 s
    "control10": Variant({"LAKEBUS_CONNECT_PROTOCOL": "sessioned", "LAKEBUS_CONNECT_REBALANCE_DELAY_MS": "10000"}, 25_000,
                         control_session_ms=10_000),
    "prompt10": Variant({"LAKEBUS_CONNECT_PROTOCOL": "sessioned", "LAKEBUS_CONNECT_REBALANCE_DELAY_MS": "0"}, 18_000,
                        control_session_ms=10_000),
    # the sink as stop 13 shipped it: Apache's connector class (its task configs change on every
    # connector start), Kafka's 45 s session for the control clients, two coordinators not healed
    # (with today's status sensor otherwise)
    "stop13": Variant({"LAKEBUS_CONNECT_PROTOCOL": "sessioned", "LAKEBUS_CONNECT_REBALANCE_DELAY_MS": "10000"}, 25_000,
                      (("heal_dual_coordinators", False),), control_session_ms=0,
                      connector_class=UPSTREAM_ICEBERG_SINK_CLASS),
    # shipped, but Apache's connector class: what the stable task configs alone change
    "upstream": Variant({"LAKEBUS_CONNECT_PROTOCOL": "sessioned"}, connector_class=UPSTREAM_ICEBERG_SINK_CLASS),
    # the sink as stop 14 shipped it: lakebus's connector class with Apache's task, whose close
    # leaves an interim coordinator running mid-rebalance (two coordinators, healed by the sensor)
    "stop14": Variant({"LAKEBUS_CONNECT_PROTOCOL": "sessioned", "LAKEBUS_CONNECT_REBALANCE_DELAY_MS": "10000"}, 25_000,
                      release_coordinator=False),
    # shipped, with the sink consumers' session at 18 s: a dead task's consumer leaves before task 0
    # restarts (an interim coordinator on task 1, which lakebus's task now stops), and after a broker
    # kill moves the group's coordinator, the dead member's session (restarted at the move) ends sooner
    "session18": Variant({"LAKEBUS_CONNECT_PROTOCOL": "sessioned", "LAKEBUS_CONNECT_REBALANCE_DELAY_MS": "10000"}, 18_000),
    # stop 14's worker delay and consumer session with today's sink task (what releasing alone gives)
    "release": Variant({"LAKEBUS_CONNECT_PROTOCOL": "sessioned", "LAKEBUS_CONNECT_REBALANCE_DELAY_MS": "10000"}, 25_000),
    # the shipped settings, each kill timed to a phase of the commit cycle, the first in a young connector
    "phases": Variant({"LAKEBUS_CONNECT_PROTOCOL": "sessioned"}, phased=True),
    # the same without the control offsets anchored at the connector's start (the young connector's loss)
    "phases-noanchor": Variant({"LAKEBUS_CONNECT_PROTOCOL": "sessioned"}, anchor_control_offsets=False, phased=True),
}
#: the phases a phased block's kills are timed to, in turn: ``young`` — the connector's first worker
#: answer (DataWritten) after it was provisioned; ``random`` — anywhere in a cycle, with the broker
#: leading the bus; ``start`` — a StartCommit; ``answered`` — a cycle's first DataWritten
PHASES = ("young", "random", "start", "answered")
#: wait for the first snapshot after a kill (a stall the sensor must heal first included)
LANDED_TIMEOUT_S = 420
#: wait for the sink to settle before a kill (a stall after the worker came back, healed, included)
SETTLE_TIMEOUT_S = 420
#: every acked event in the table within this long of the last recovery (issue 29's 3 min, + slack)
REPAIR_WAIT_S = 240
#: the incident wording of each stall rule (lakebus_dagster.monitor.stall_rules)
#: every block's kills, alerts and counts (the table printed at the end has the per-protocol sums)
DETAILS = REPO_ROOT / "build" / "bench_failover_protocol.json"
STALL_KINDS = (("duplicate", "duplicate commit coordinators?"), ("missing", "no commit coordinator?"),
               ("stuck", "control event(s) pending"), ("dual", "runs two commit coordinators"))


def _env(variant: str) -> dict[str, str]:
    return {**os.environ, **CLUSTER_ENV, **VARIANTS[variant].env}


def _stack(variant: str, *command: str) -> int:
    return subprocess.run([sys.executable, "-m", "lakebus_dagster.stack", *command], env=_env(variant),
                          cwd=REPO_ROOT).returncode


#: worker keys a variant may set, by the stack variable that sets them
WORKER_KEYS = {"connect.protocol": "LAKEBUS_CONNECT_PROTOCOL",
               "scheduled.rebalance.max.delay.ms": "LAKEBUS_CONNECT_REBALANCE_DELAY_MS"}


def _verify_variant(variant: str) -> dict[str, str]:
    """The variant's worker keys as each worker's properties file and its logged config (last value) carry them."""
    run_dir = REPO_ROOT / CLUSTER_ENV["LAKEBUS_STATE_DIR"] / "run"
    logs_dir = REPO_ROOT / CLUSTER_ENV["LAKEBUS_STATE_DIR"] / "logs"
    seen, wanted = {}, {}
    for key, name in WORKER_KEYS.items():
        if name not in VARIANTS[variant].env:
            continue
        escaped = re.escape(key)
        for suffix in ("", "-2"):
            props = (run_dir / f"connect-distributed{suffix}.properties").read_text()
            match = re.search(rf"^{escaped}=(\S+)", props, re.M)
            seen[f"connect{suffix}.properties {key}"] = match.group(1) if match else "absent"
            log = logs_dir / f"connect{suffix}.log"
            logged = re.findall(rf"{escaped} = (\S+)", log.read_text(errors="replace")) if log.exists() else []
            seen[f"connect{suffix}.log {key}"] = logged[-1] if logged else "absent"
            wanted[f"connect{suffix}.properties {key}"] = wanted[f"connect{suffix}.log {key}"] = VARIANTS[variant].env[name]
    if seen != wanted:
        raise RuntimeError(f"the workers do not run variant {variant} ({VARIANTS[variant].env}): {seen}")
    return seen


def _block(variant: str, kills: int) -> dict:
    """One block in a child process that sees only the cluster's settings (and the variant's)."""
    child = subprocess.Popen([sys.executable, "-m", "benchmarks.bench_failover_protocol", "--block", variant, str(kills)],
                             env=_env(variant), cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    line, tail = None, []
    for out in child.stdout:  # the kills' progress as it happens
        if out.startswith("RESULT "):
            line = out
        elif out.startswith("[bench_failover_protocol]"):
            print(out, end="", flush=True)
        tail = [*tail[-40:], out]
    child.wait()
    if line is None:
        raise RuntimeError(f"the {variant} block failed (exit {child.returncode}):\n{''.join(tail)[-3000:]}")
    return json.loads(line[len("RESULT "):])


#: worker log lines counted in a block's start-up (before any fault): the Connect group's rebalances,
#: and the connector's task configs written anew (each one a rebalance of its own)
LOG_COUNTS = {"rebalances": "Rebalance started", "task_config_updates": "configs updated"}


def worker_log_counts(settings, since: float) -> dict[str, int]:
    """How often each :data:`LOG_COUNTS` line appears in both workers' logs since ``since`` (epoch)."""
    from lakebus_dagster_tests.failover_kit import log_time
    from lakebus_dagster.stack import process
    from lakebus_dagster.stack.kafka_services import worker_name

    counts = dict.fromkeys(LOG_COUNTS, 0)
    for n in (1, 2):
        with process.log_file(settings, worker_name(n)).open(errors="replace") as f:
            for line in f:
                at = log_time(line)
                if at is not None and at >= since:
                    for key, pattern in LOG_COUNTS.items():
                        counts[key] += pattern in line
    return counts


def _percentile(values: list[float], q: float) -> float | None:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)] if ordered else None


def summarize(blocks: list[dict]) -> dict:
    """Per variant: the blocks' counts summed, first rows pooled (p50/p95/max)."""
    out: dict = {}
    for variant in VARIANTS:
        mine = [b for b in blocks if b["variant"] == variant]
        if not mine:
            continue
        first = [s for b in mine for s in b["first_rows_s"] if s is not None]
        p = f"{variant}_"
        out[p + "blocks"] = len(mine)
        out[p + "startup_never_settled"] = sum(1 for b in mine if b.get("startup_settled_s") is None)
        out[p + "startup_settled_s"] = [b.get("startup_settled_s") for b in mine]
        for key in ("startup_snapshots", "startup_rebalances", "startup_task_config_updates"):
            out[p + key] = [b.get(key) for b in mine]
        for key in ("kills_made", "kills_with_broker", "no_snapshot", "producer_errors", "duplicate_coordinator", "missing_coordinator",
                    "dual_coordinator",
                    "stuck_coordinator", "other_incidents", "stalls_healed", "restarts", "lost_upstream",
                    "requeues", "acked", "rows", "distinct_offsets", "missing_at_end", "duplicate_events",
                    "duplicate_offsets", "ledger_gaps_at_end", "ledger_duplicates_at_end", "errors"):
            out[p + key] = sum(b.get(key) or 0 for b in mine)
        out[p + "first_rows_p50_s"] = _percentile(first, 0.5)
        out[p + "first_rows_p95_s"] = _percentile(first, 0.95)
        out[p + "first_rows_max_s"] = max(first) if first else None
        out[p + "first_rows_s"] = [s for b in mine for s in b["first_rows_s"]]
        healing = [s for b in mine for s in b.get("incident_alert_to_rows_s", [])]
        out[p + "incident_alert_to_rows_s"] = healing
        out[p + "incident_alert_to_rows_max_s"] = max((s for s in healing if s is not None), default=None)
        kills = [x for b in mine for x in b.get("kill_log", [])]
        if any(x.get("phase") for x in kills):
            phases = sorted({x["phase"] for x in kills})
            out[p + "ledger_lost_per_kill"] = [x.get("ledger_lost", 0) for x in kills]
            out[p + "ledger_lost_by_phase"] = {ph: sum(x.get("ledger_lost", 0) for x in kills if x["phase"] == ph) for ph in phases}
            out[p + "first_rows_by_phase"] = {ph: [x["first_rows_s"] for x in kills if x["phase"] == ph] for ph in phases}
            out[p + "kills_with_loss"] = sum(1 for x in kills if x.get("ledger_lost", 0))
        loads = [x for b in mine for x in b["load_1m_at_kills"]]
        out[p + "load_1m_mean"] = round(sum(loads) / len(loads), 2) if loads else None
        out[p + "load_1m_max"] = max(loads) if loads else None
    return out


def run(kills_per_block: int = 10, blocks_per_variant: int = 2, variants: tuple[str, ...] = ("prompt", "stop12"),
        deadline: float | None = None) -> dict:
    """Alternating blocks, each on a freshly started cluster; the stack is down between and after.

    ``deadline`` (epoch seconds): a round of blocks (one per variant) starts only if, at the pace of
    the blocks so far, it ends before it — so the variants always get the same number of kills."""
    arms = [(name, int(kills or kills_per_block)) for name, _, kills in (v.partition(":") for v in variants)]
    unknown = [name for name, _ in arms if name not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variant(s) {unknown}: expected some of {sorted(VARIANTS)}")
    order = arms * blocks_per_variant
    per_round = len(arms)
    blocks: list[dict] = []
    started = time.time()

    def save() -> None:
        DETAILS.parent.mkdir(parents=True, exist_ok=True)
        DETAILS.write_text(json.dumps({"order": order, "blocks": blocks, "summary": summarize(blocks)}, indent=1) + "\n")

    try:
        for i, (variant, block_kills) in enumerate(order):
            if deadline is not None and i % per_round == 0 and i:
                pace = (time.time() - started) / i
                if time.time() + per_round * pace > deadline:
                    print(f"[bench_failover_protocol] stopping after {i} blocks: another round would end past the deadline "
                          f"({pace / 60:.1f} min per block)", flush=True)
                    break
            print(f"[bench_failover_protocol] block {i + 1}/{len(order)}: {variant}, {block_kills} kills "
                  f"(load 1-min {os.getloadavg()[0]:.2f})", flush=True)
            _stack(variant, "down")
            if _stack(variant, "up") != 0:
                raise RuntimeError(f"the cluster profile did not come up with variant {variant} ({VARIANTS[variant].env})")
            verified = _verify_variant(variant)
            try:
                block = _block(variant, block_kills)
            except RuntimeError as exc:  # keep the other blocks' numbers
                print(f"[bench_failover_protocol] {exc}", flush=True)
                continue
            block["verified"] = verified
            blocks.append(block)
            save()
            print(f"[bench_failover_protocol] BLOCK {json.dumps({k: v for k, v in block.items() if k != 'kill_log'})}", flush=True)
            print(f"[bench_failover_protocol] so far: {json.dumps(summarize(blocks))}", flush=True)
    finally:
        _stack(order[0][0], "down")
        save()
    summary = summarize(blocks)
    # the table gets numbers (a protocol with no first rows has no percentile: the details say so)
    return ({k: v for k, v in summary.items() if v is not None and not isinstance(v, list)}
            | {"order": "/".join(f"{b['variant']}:{b['kills_made']}" for b in blocks)})


# -- one block, in the child -------------------------------------------------------------------------------
def _tuned_layout_class():
    """:class:`BusLayoutResource` with the sink consumers' session of a variant (imported in the child only)."""
    from dataclasses import replace

    from lakebus_dagster.defs.resources import BusLayoutResource

    class TunedLayout(BusLayoutResource):
        consumer_session_ms: int | None = None
        control_session_ms: int | None = None
        connector_class: str | None = None
        release_coordinator: bool | None = None
        anchor_control_offsets: bool | None = None

        def layout(self):
            layout = super().layout()
            if self.connector_class is not None:
                layout = replace(layout, connector_class=self.connector_class)
            tuning = layout.tuning
            if self.consumer_session_ms is not None:
                tuning = replace(tuning, consumer_session_timeout_ms=self.consumer_session_ms)
            if self.control_session_ms is not None:
                tuning = replace(tuning, control_session_timeout_ms=self.control_session_ms or None)
            if self.release_coordinator is not None:
                tuning = replace(tuning, release_coordinator_on_close=self.release_coordinator)
            if self.anchor_control_offsets is not None:
                tuning = replace(tuning, anchor_control_offsets=self.anchor_control_offsets)
            return replace(layout, tuning=tuning)

    return TunedLayout


def measure_block(variant: str, kills: int) -> dict:
    """``kills`` kills of task 0's worker (every 4th with the partition-0 leader) under the test's load,
    the status sensor as deployed healing what it sees; then every acked event checked in the table."""
    from confluent_kafka.admin import AdminClient

    from benchmarks.bench_cluster_ingest import log_phases
    from lakebus_dagster.observe.sink_progress import sink_progress
    from lakebus_dagster.connect import ConnectClient
    from lakebus_dagster.defs.alerts import AlertResource
    from lakebus_dagster.defs.monitoring.resources import MonitoringPolicyResource
    from lakebus_dagster.defs.environment import build_resources
    from lakebus_dagster.defs.resources import BusLayoutResource, ConnectResource
    from lakebus_dagster.lake.catalog import load_catalog
    from lakebus_dagster.ledger import Ledger, ledger_complete
    from lakebus_dagster.settings import load_local_secrets
    from lakebus_dagster.stack import manager, process
    from lakebus_dagster.stack.kafka_services import broker_name, worker_name
    from lakebus_dagster.stack.local_settings import load_stack_settings
    from lakebus_dagster_tests.failover_kit import ControlWatch, SensorAsDeployed, SteadyProducer, provision, snapshots_after
    from lakebus_dagster_tests.integration.webhook import alert_webhook

    settings = load_stack_settings()
    load_local_secrets(settings)
    protocol = VARIANTS[variant].protocol
    assert settings.profile == "cluster" and settings.connect_protocol == protocol, (settings.profile, settings.connect_protocol)
    tag = f"fo{variant[:4]}{uuid.uuid4().hex[:6]}"
    layout_resource = _tuned_layout_class()(name_suffix=tag, bus_partitions=2, replication_factor=3, min_insync_replicas=2,
                                            consumer_session_ms=VARIANTS[variant].consumer_session_ms,
                                            control_session_ms=VARIANTS[variant].control_session_ms,
                                            connector_class=VARIANTS[variant].connector_class,
                                            release_coordinator=VARIANTS[variant].release_coordinator,
                                            anchor_control_offsets=VARIANTS[variant].anchor_control_offsets)
    with alert_webhook(f"bench_failover_protocol_{tag}") as (url, received):
        resources = {**build_resources(), "layout": layout_resource,
                     "alerts": AlertResource(sink="webhook", webhook_url=url, body_format="generic"),
                     "monitoring_policy": MonitoringPolicyResource(**dict(VARIANTS[variant].policy))}
        layout = layout_resource.layout()
        bus, table, connector = layout.bus_topic.name, layout.routes["bet"], layout.connector_name
        urls = [f"http://{settings.host}:{settings.connect_port(n)}" for n in (1, 2)]
        with ConnectClient(tuple(urls)) as c:  # a block cut short leaves its sink running: its
            for leftover in c.list_connectors(expand_status=False, expand_info=False):  # coordinator loads the workers
                if leftover.startswith("events-iceberg-sink-fo"):
                    print(f"[bench_failover_protocol] deleting {leftover}, left by an interrupted block", flush=True)
                    c.delete(leftover)
        phased = VARIANTS[variant].phased
        watch = ControlWatch(settings.kafka.bootstrap_servers, layout.control_topic.name, f"connect-{connector}")
        watch.start()
        provision(settings, resources, layout)
        sensor = SensorAsDeployed({**resources, "connect": ConnectResource(url=",".join(urls))})
        client = ConnectClient(tuple(urls))
        catalog = load_catalog(settings)
        stamps: list[float] = []  # arrival time of each alert in `received` (the webhook keeps none)

        def tick() -> None:
            sensor.tick_if_due()
            stamps.extend([time.time()] * (len(received) - len(stamps)))

        def open_incidents() -> int:
            kinds = [a.get("kind") for a in received]
            return kinds.count("incident") - kinds.count("recovery")

        watched: dict = {"since": time.time(), "last": None}

        def settled():
            tick()
            status = client.status(connector)
            now = tuple(sorted((t.id, t.state, t.worker_id) for t in status.tasks))
            if now != watched["last"] or len(status.tasks) != 2 or any(t.state != "RUNNING" for t in status.tasks):
                watched.update(since=time.time(), last=now)
                return None
            return (time.time() - watched["since"] >= 10 and open_incidents() == 0
                    and snapshots_after(catalog, table, int(watched["since"] * 1000)) and status)

        def wait(predicate, timeout: float):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if value := predicate():
                    return value
                time.sleep(0.5)
            return None

        producer = SteadyProducer(settings.kafka.bootstrap_servers, bus)
        producer.start()
        first_rows: list[float | None] = []
        kill_log: list[dict] = []
        errors = 0
        started_at = time.time()
        try:
            # before any fault: the sink must settle once (tasks unmoved, a commit); if it never does
            # in SETTLE_TIMEOUT_S, the scenario cannot run on this protocol and no kill is made
            ready = True if phased else wait(settled, SETTLE_TIMEOUT_S)
            startup = {"startup_settled_s": round(time.time() - started_at, 1) if ready else None,
                       "startup_snapshots": len(snapshots_after(catalog, table, int(started_at * 1000))),
                       **{f"startup_{k}": v for k, v in worker_log_counts(settings, started_at).items()}}
            print(f"[bench_failover_protocol] {variant} start-up: {json.dumps(startup)}", flush=True)
            for k in range(kills if ready else 0):
                phase = PHASES[k % len(PHASES)] if phased else None
                if phase == "young" and k:  # one young connector per block: its first kill
                    phase = "answered"
                running = (ready if k == 0 and not phased else True if phase == "young" else wait(settled, SETTLE_TIMEOUT_S))
                if phase == "young":
                    seen = watch.next_event("DataWritten", 0, SETTLE_TIMEOUT_S)  # the first one ever
                elif phase == "random":
                    time.sleep(random.uniform(0, layout.tuning.commit_interval_ms / 1000))
                elif phase in ("start", "answered"):
                    seen = watch.next_event("StartCommit" if phase == "start" else "DataWritten", time.time(), 120)
                if phase in ("young", "start", "answered") and seen is None:
                    errors += 1
                    print(f"[bench_failover_protocol] {variant} kill {k + 1}: no {phase} event on the control topic", flush=True)
                if phase is not None:
                    running = wait(lambda: (st := client.status(connector)) and any(t.id == 0 and t.worker_id for t in st.tasks) and st, 120)
                if not running:  # counted, and the kill goes ahead on whatever runs task 0 now
                    errors += 1
                    print(f"[bench_failover_protocol] {variant} kill {k + 1}: not settled after {SETTLE_TIMEOUT_S}s "
                          f"({watched['last']}, open incidents {open_incidents()})", flush=True)
                    running = client.status(connector)
                coordinator = next((t.worker_id for t in running.tasks if t.id == 0), None)
                number = next((n for n in (1, 2) if coordinator and coordinator.endswith(f":{settings.connect_port(n)}")), 1)
                victims = [worker_name(number)]
                if (phase == "random") if phased else k % 4 == 0:
                    leader = AdminClient({"bootstrap.servers": settings.kafka.bootstrap_servers}).list_topics(timeout=10)
                    victims.insert(0, broker_name(leader.topics[bus].partitions[0].leader))
                alerts_before, restarts_before = len(received), len(sensor.restarts)
                # two coordinators running at the kill? (overlapping finished cycles in the last 80 s)
                overlaps = sink_progress(layout, client, resources["kafka"].clients(), resources["iceberg"]).overlapping_cycles
                dual_at_kill = None if overlaps is None else sum(1 for p in overlaps if min(p) >= (time.time() - 80) * 1000)
                load = os.getloadavg()[0]
                killed = time.time()
                for name in victims:
                    proc = process.find_process(settings, name)
                    if proc is not None:
                        proc.kill()
                        proc.wait(30)

                def landed():
                    tick()
                    after = snapshots_after(catalog, table, int(killed * 1000))
                    return after and after[0] / 1000 - killed

                seconds = wait(landed, LANDED_TIMEOUT_S)
                first_rows.append(round(seconds, 1) if seconds else None)
                # where the seconds went, from the surviving worker's log (election, first cycle, timeouts)
                survivor = worker_name(2 if number == 1 else 1)
                phases = log_phases(process.log_file(settings, survivor), killed, connector)
                manager.up(settings)  # the operator brings the killed processes back
                kill_log.append({"kill": k + 1, "phase": phase, "killed_at": killed, "victims": victims, "first_rows_s": first_rows[-1], "load_1m": round(load, 2),
                                 "survivor_phases_s": phases, "overlapping_cycles_at_kill": dual_at_kill,
                                 "restarts": len(sensor.restarts) - restarts_before,
                                 "alerts": [f"{a.get('kind')}: {a.get('title', '')[:160]}" for a in received[alerts_before:]]})
                print(f"[bench_failover_protocol] {variant} kill {k + 1}: {json.dumps(kill_log[-1])}", flush=True)
            # the last victim's rejoin under the same load as every other kill's (a stall it causes is
            # seen with records owed, as after the others): the sink settles once more before the load stops
            if ready and not wait(settled, SETTLE_TIMEOUT_S):
                errors += 1
                print(f"[bench_failover_protocol] {variant}: not settled after the last kill", flush=True)
        finally:
            producer.stop.set()
            producer.join(200)
            watch.stop.set()
        # every incident closed (a recovery notice follows 90 s after its condition ended)
        if ready:  # (a sink that never committed has nothing to repair: no wait for it)
            wait(lambda: tick() or open_incidents() == 0, 300)
        acked = {(p, o): oid for oid, p, o in producer.acked}
        ids: Counter = Counter()

        def every_acked_event():
            nonlocal ids
            tick()
            exists = catalog.table_exists(table)  # a sink that never committed never created it
            got = catalog.load_table(table).scan(selected_fields=("order_id",)).to_arrow().column("order_id").to_pylist() if exists else []
            ids = Counter(got)
            return set(got) >= set(acked.values())

        wait(every_acked_event, REPAIR_WAIT_S if ready else 1)
        positions: Counter = Counter()
        if catalog.table_exists(table):
            rows = catalog.load_table(table).scan(selected_fields=("_kafka_partition", "_kafka_offset")).to_arrow()
            positions = Counter(zip(rows.column("_kafka_partition").to_pylist(), rows.column("_kafka_offset").to_pylist()))
        incidents = [(a.get("title", "") + " " + a.get("text", ""), t) for a, t in zip(received, stamps) if a.get("kind") == "incident"]
        counts = {kind: sum(1 for text, _ in incidents if marker in text) for kind, marker in STALL_KINDS}
        # issue 29's "healed — rows flowing again — <= 60 s after its incident alert": from each
        # incident alert's arrival to the first snapshot committed after it
        snapshots = snapshots_after(catalog, table, int(started_at * 1000))
        alert_to_rows = [next((round(ms / 1000 - t, 1) for ms in snapshots if ms / 1000 > t), None) for _, t in incidents]
        recoveries = [a for a in received if a.get("kind") == "recovery"]
        healed = sum(1 for a in recoveries if any(m in a.get("title", "") + a.get("text", "")
                                                  for m in ("committed nothing", "two commit coordinators")))
        # the offset ledger as offset_ledger_job runs it (grace 0: the sink's offsets are at the end)
        # (0 with ``ledger_error`` when it cannot run: a sink that never committed has no table to read)
        ledger: dict = {"ledger_gaps_at_end": 0, "ledger_duplicates_at_end": 0}
        try:
            with ConnectClient(tuple(urls)) as c:
                verdict = ledger_complete(Ledger.from_kafka_config(layout, settings.kafka.client_config(), catalog, c)).verdict
            ledger = {"ledger_gaps_at_end": sum(len(v) for v in verdict.gaps.values()),
                      "ledger_duplicates_at_end": len(verdict.duplicates)}
        except Exception as exc:  # noqa: BLE001 - e.g. no table: the ledger has nothing to read
            ledger["ledger_error"] = f"{type(exc).__name__}: {exc}"[:300]
        # records each ledger run found lost upstream, charged to the kill before it
        for x, nxt in zip(kill_log, [*kill_log[1:], None]):
            x["ledger_lost"] = sum(n for t, n in sensor.stall_ledgers
                                   if t >= x["killed_at"] and (nxt is None or t < nxt["killed_at"]))
        client.delete(connector)
        client.close()
    return {
        **startup, "kills_made": len(kill_log), "block_s": round(time.time() - started_at, 1),
        **ledger,
        "variant": variant, "protocol": protocol, "consumer_session_ms": layout.tuning.consumer_session_timeout_ms,
        "control_session_ms": layout.tuning.control_session_timeout_ms, "connector_class": layout.connector_class,
        "kills": kills, "kills_with_broker": sum(1 for x in kill_log if len(x["victims"]) > 1),
        "first_rows_s": first_rows, "no_snapshot": first_rows.count(None),
        "duplicate_coordinator": counts["duplicate"], "missing_coordinator": counts["missing"],
        "stuck_coordinator": counts["stuck"], "dual_coordinator": counts["dual"],
        "other_incidents": len(incidents) - sum(counts.values()), "stalls_healed": healed,
        "incident_alert_to_rows_s": alert_to_rows,
        "restarts": len(sensor.restarts), "lost_upstream": sum(n for _, n in sensor.stall_ledgers),
        "requeues": len(sensor.requeues), "acked": len(acked), "producer_errors": len(producer.errors),
        "rows": sum(positions.values()), "distinct_offsets": len(positions),
        "missing_at_end": len(set(acked.values()) - set(ids)),
        "duplicate_events": sum(n - 1 for n in ids.values() if n > 1),
        "duplicate_offsets": sum(n - 1 for n in positions.values() if n > 1),
        "errors": errors, "load_1m_at_kills": [x["load_1m"] for x in kill_log],
        "alert_kinds": [a.get("kind") for a in received], "kill_log": kill_log,
    }


def main(argv: list[str]) -> int:
    if "--block" in argv:
        i = argv.index("--block")
        print("RESULT " + json.dumps(measure_block(argv[i + 1], int(argv[i + 2]))), flush=True)
        return 0
    from benchmarks.__main__ import finish, measure_into, new_run

    args = argv[1:]
    kills = int(args[0]) if args else 10
    blocks = int(args[1]) if len(args) > 1 else 2
    variants = tuple(args[2].split(",")) if len(args) > 2 else ("prompt", "stop12")
    # optional 4th argument: the wall-clock deadline (UTC, HH:MM today) no pair of blocks may run past
    deadline = None
    if len(args) > 3:
        hh, mm = map(int, args[3].split(":"))
        now = datetime.now(timezone.utc)
        deadline = now.replace(hour=hh, minute=mm, second=0, microsecond=0).timestamp()
    record = new_run()
    measure_into(record, "bench_failover_protocol", lambda: run(kills, blocks, variants, deadline))
    return finish(record)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
