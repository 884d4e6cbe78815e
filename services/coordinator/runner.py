"""Run one suite over a set of backends and write the run directory.

Phases: start backends (as processes through the launcher, or in-process, or at given addresses) → describe →
reset/ingest/settle every namespace → probes × conditions with bounded concurrency (a namespace's first timed
retrieve on a backend right after its untimed Prepare, recorded in run.json as setup), each sample appended to
samples.jsonl as it finishes → score → report. A backend that fails (at start, ingest or mid-run) is recorded
with its reason; the others finish. Re-running into the same directory runs only what is missing.

With `reuse` on (`memrig bench` and `bench-all` unless --fresh), a backend whose suite result is stored under an
unchanged key (services/coordinator/reuse.py) is not started: its samples are copied into samples.jsonl, its cost
and Prepare records into run.json, which says where they came from (`backends[].reused`, `reuse`); scoring and the
verdict are recomputed as usual. Every result measured whole is stored.

run.json is one object, services/coordinator/run_record.py's RunRecord: the run's identity once the LLM roles are
known, the backends' status, the cost and Prepare records, the caches' deltas; every write of it goes through it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from services.adapters.client import GrpcBackendClient, InProcessBackendClient
from services.common import interrupt
from services.common.embeddings import default_cache_path
from services.common.errors import BackendError, BackendFailed, BackendUnavailable, MemrigError
from services.common.llm_client import LLMClient, LLMConfig
from services.coordinator import costs
from services.coordinator import views as replay_views
from services.coordinator.context import ProbeContext
from services.coordinator.metrics import shown
from services.coordinator.results import RESULTS_ROOT, RunDir, new_run_id, sample_key
from services.coordinator.reuse import Reuse
from services.coordinator.reuse import owner as reuse_owner
from services.coordinator.run_record import RunRecord, amend
from services.coordinator.suites.base import Condition, Probe, Suite
from services.coordinator.suites.registry import get_suite
from services.launcher import Rig

ProgressFn = Callable[[dict[str, Any]], None]
# How many backends start at once: two took 0.52 of the time one at a time did here (docs/results/bench-all.md,
# services/studies/backend_starts.py).
START_AT_ONCE = 2
# A backend's first Describe is part of its start: the IR baselines load their embedder on it (seconds here, over
# 60 s on a host loaded 5x over its cores), so it gets this long, not the per-call deadline.
START_DEADLINE_S = 300.0
CHECKPOINT_S = 30.0  # a streamed run writes its cost records to run.json at most this often


@dataclass
class RunConfig:
    suite: str
    backends: list[str]
    out_dir: str | None = None
    seed: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    resume: bool = True
    concurrency: int = 4
    # Backends ingesting (and, for a namespace-scoped suite, probing) at the same time: each backend is its own
    # process, so two lanes keep a 2-core host busy while one waits on another process (OpenClaw's Node sidecar).
    lanes: int = 2
    judge_passes: int = 1
    embedder: str | None = None
    targets: dict[str, str] = field(default_factory=dict)  # backend -> host:port already running
    in_process: bool = False
    settle_timeout_s: float = 600.0
    # LLM role -> mock | local | env (services/common/llm_roles.py); empty: every role as the environment says
    llm_roles: dict[str, str] = field(default_factory=dict)
    # Stored results (services/coordinator/reuse.py): "on" reuses every suite × backend result whose key is
    # unchanged and stores what it measures; "store" (--fresh) measures everything and stores it; "off" neither.
    reuse: str = "off"
    # Per-call deadlines of a backend over gRPC (services/adapters/client.py): Describe, Reset, Retrieve, Stats; and
    # Ingest, Prepare. A backend that accepts a call and never answers fails it at the deadline, named with the
    # call, and the run goes on without it.
    deadline_s: float = 60.0
    ingest_deadline_s: float = 600.0
    # An Ingest's deadline grows with its messages past ingest_deadline_s: a namespace arrives in one Ingest, and a
    # BEAM 1M conversation holds ~2,000 messages, and OpenClaw indexed BEAM at 0.2-0.5 s a message here with a cold
    # embedding cache, 1.1 s under heavy load (docs/results/beam.md). Above the adapter's own per-message allowance (openclaw-real: 2 s), so the
    # adapter's timeout, which names what it was waiting for, fires first.
    ingest_deadline_per_message_s: float = 3.0
    # A namespace's Settle may take this long a message past settle_timeout_s: the questions come after the whole
    # conversation, so they must find it indexed. Cortex indexes asynchronously, and cortex-mock took 0.2-0.45 s a
    # message to extract and embed BEAM conversations here; at a fixed 180 s every 500K and 1M conversation of the
    # whole-split cortex run was searched with most of its messages still queued (docs/results/beam.md).
    settle_s_per_message: float = 1.0

    def settle_timeout_for(self, messages: int) -> float:
        """The Settle timeout of a namespace of `messages` messages."""
        return max(self.settle_timeout_s, self.settle_s_per_message * max(0, int(messages)))


@dataclass
class RunOutcome:
    run_dir: Path
    state: str  # "succeeded" | "partial" | "failed"
    metrics: dict[str, Any]
    failures: dict[str, str]
    reused: dict[str, str] = field(default_factory=dict)  # backend -> "reused from RUN, measured at TIME"


def _client_for(cfg: LLMConfig, made: dict[int, LLMClient], by_config: list[tuple[LLMConfig, LLMClient]]) -> LLMClient:
    """One client per distinct endpoint configuration (roles on the same endpoint share its client)."""
    for c, client in by_config:
        if c == cfg:
            return client
    client = LLMClient(cfg)
    by_config.append((cfg, client))
    made[id(client)] = client
    return client


class TerminalProgress:
    """One updating line with an ETA on a terminal; a line per 10% otherwise."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self._last_decile = -1

    def __call__(self, ev: dict[str, Any]) -> None:
        done, total = ev.get("done", 0), ev.get("total", 0)
        eta = ev.get("eta_seconds")
        eta_s = f" ETA {eta:,.0f}s" if eta is not None else ""
        count = f"{done}/{total}" if total else ""
        line = f"[{ev.get('run_id', '')}] {ev.get('phase', '')}: {count}{eta_s} {ev.get('message', '')}"
        if self.tty:
            self.stream.write("\r\x1b[2K" + line[:160])
            if ev.get("phase") in ("done", "failed"):
                self.stream.write("\n")
            self.stream.flush()
        else:
            decile = int(10 * done / total) if total else 0
            if ev.get("phase") not in ("probes", "namespaces") or decile != self._last_decile or done == total:
                self._last_decile = decile
                print(line, file=self.stream, flush=True)


async def run_suite(cfg: RunConfig, progress: ProgressFn | None = None, rig: Rig | None = None) -> RunOutcome:
    suite_cls = get_suite(cfg.suite)
    suite: Suite = suite_cls(cfg.options, seed=cfg.seed)
    run_dir = RunDir(cfg.out_dir or (RESULTS_ROOT / new_run_id(cfg.suite)))
    run_dir.clear_stale_temp()  # half-written files of a run killed in this directory
    if not cfg.resume and run_dir.samples_path.exists():
        run_dir.samples_path.unlink()
    emit = progress or (lambda ev: None)
    run_id = run_dir.run_id

    own_rig = rig is None
    rig = rig or Rig(run_dir.path / "procs")
    rig.set_embedder(cfg.embedder)
    # run.json (services/coordinator/run_record.py): the embedding cache is read now, before anything embeds
    record = RunRecord(run_dir, cfg, default_cache_path(rig.env))
    clients: dict[str, Any] = {}
    failures, describes = record.failures, record.describes
    llm_clients: dict[int, LLMClient] = {}
    t_start = time.monotonic()
    try:
        emit({"run_id": run_id, "phase": "load", "done": 0, "total": 0})
        data = suite.load()
        shown.load()  # the grader's lazy loads, before anything is timed

        # -- LLM roles, then backends --------------------------------------------------------------
        roles = await rig.ensure_llm_roles(cfg.llm_roles)
        by_config: list[tuple[LLMConfig, LLMClient]] = []
        llm = _client_for(roles["answerer"], llm_clients, by_config)
        judge_llm = _client_for(roles["judge"], llm_clients, by_config)
        compaction_llm = _client_for(roles["compaction"], llm_clients, by_config)
        record.identify(suite, data, roles)
        record.write()
        reuse = None if cfg.reuse == "off" else Reuse(suite, data, cfg, roles, rig.env, read=cfg.reuse == "on")
        stored = {n: e for n in cfg.backends if reuse is not None and (e := reuse.lookup(n)) is not None}

        async def start(name: str) -> None:
            emit({"run_id": run_id, "phase": "start", "message": name})
            try:
                deadlines = {"deadline_s": cfg.deadline_s, "ingest_deadline_s": cfg.ingest_deadline_s,
                             "ingest_deadline_per_message_s": cfg.ingest_deadline_per_message_s}
                if name in cfg.targets:
                    clients[name] = GrpcBackendClient(cfg.targets[name], name=name, **deadlines)
                elif cfg.in_process:
                    from services.adapters.base import BackendContext

                    clients[name] = InProcessBackendClient.from_spec(
                        name, context=BackendContext(embedder_name=cfg.embedder, llm_config=roles["flush"],
                                                     compaction_llm_config=roles["compaction"]))
                else:
                    proc = await rig.start_backend(name, embedder=cfg.embedder)
                    clients[name] = GrpcBackendClient(proc.url, name=name, **deadlines)
                describes[name] = await clients[name].describe(deadline=max(cfg.deadline_s, START_DEADLINE_S))
            except Exception as e:  # any start failure is reported, others go on
                failures[name] = f"start failed: {type(e).__name__}: {e}"
                clients.pop(name, None)

        # Backends start START_AT_ONCE at a time (each spends seconds importing torch and loading its embedder, or
        # starting a Node sidecar); the records keep the order of cfg.backends.
        starts = asyncio.Semaphore(START_AT_ONCE)

        async def start_bounded(name: str) -> None:
            async with starts:
                await start(name)

        for name in cfg.backends:
            if name in stored:  # a stored result stands in for it: not started unless another condition needs it
                describes[name] = stored[name].records.get("describe") or {}
        await asyncio.gather(*(start_bounded(n) for n in cfg.backends if n not in stored))
        record.backends_started()
        caps, conditions, reused = await _conditions_and_reused(suite, data, cfg.backends, reuse, stored, clients,
                                                                describes, failures, start)
        record.reused = reused
        record.result_keys = {n: reuse.key(n) for n in cfg.backends} if reuse is not None else {}
        record.write()

        done = run_dir.done_keys()
        trusted = record.own_samples(conditions, data.probes, done)
        if reuse is not None:
            _copy_reused(run_dir, reuse, reused, done, lambda m: emit({"run_id": run_id, "phase": "reuse",
                                                                        "message": m}))
        work = [(p, c) for p in data.probes for c in conditions if sample_key(c, p) not in done]
        needed = {b for _, c in work for b in c.backends}

        retrieve_params = {b: (suite.retrieve_top_k(b), suite.retrieve_mode(b)) for b in clients}
        streamed = suite.namespace_scoped and conditions and all(len(c.backends) == 1 for c in conditions)
        # one replay for backends that store the same state (services/coordinator/views.py)
        probe_ns = ({b: {p.namespace for p, c in work if c.backends[0] == b} for b in clients} if streamed
                    else {b: set(data.corpora) for b in clients})
        views = replay_views.plan(cfg.backends, describes, set(clients), {b for b in clients if b not in failures
                                                                         and b not in reused}, probe_ns)
        probe_clients = {**clients, **{b: replay_views.ViewClient(clients[a], a, v) for b, (a, v) in views.items()}}
        record.replay_views = {b: {"replay_of": a, "view": v} for b, (a, v) in views.items()}
        ctx = ProbeContext(probe_clients, data.corpora, llm, judge_llm, run_dir.path, suite.name,
                           judge_passes=cfg.judge_passes, retrieve_params=retrieve_params,
                           compaction_llm=compaction_llm)

        if streamed:
            # per backend, one namespace at a time: ingest, its probes, release (bounded memory, flat cost)
            record.ingested(await run_streamed(suite, ctx, data, work, failures, run_dir, cfg, emit, rig,
                                               record.prev.get("ingest", {}), record.ingested, views))
        else:
            await _ingest_then_probes(suite, ctx, data, work, needed, clients, caps, failures, run_dir, cfg, emit,
                                      record.ingested, views)
        total = len(work)

        # -- score + report -------------------------------------------------------------------------
        # Prepare (untimed setup before each namespace's first timed retrieve): its time is setup, not latency
        record.prepared(ctx.prepare_summary())
        record.close(llm_clients)
        if reuse is not None:
            record.store_results(reuse, conditions, data.probes, trusted)
        record.finished(time.monotonic() - t_start)
        metrics, state = finalize(run_dir, suite)
        emit({"run_id": run_id, "phase": "done", "done": total, "total": total, "message": str(run_dir.path)})
        return RunOutcome(run_dir.path, state, metrics, failures, {n: e.label for n, e in reused.items()})
    finally:
        for client in llm_clients.values():
            await client.close()
        for c in clients.values():
            try:
                await c.close()
            except Exception:
                pass
        if own_rig:
            rig.stop_all()


async def _ingest_then_probes(suite: Suite, ctx: ProbeContext, data, work, needed: set[str], clients, caps,
                              failures: dict[str, str], run_dir: RunDir, cfg: RunConfig, emit: ProgressFn,
                              ingested: Callable[[dict[str, Any]], None],
                              views: dict[str, tuple[str, str]] | None = None) -> None:
    """Every backend's namespaces ingested first (then `ingested(info)`), then every probe: for a suite whose
    probes read several namespaces or several backends at once. A backend of `views` ingests nothing: the one whose
    replay it reads does (even with no probes of its own left), and its record is that replay's."""
    run_id = run_dir.run_id
    views = {b: av for b, av in (views or {}).items() if b in needed}
    needed = (set(needed) - set(views)) | {a for a, _ in views.values()}
    ingest_info: dict[str, Any] = {}
    lanes = asyncio.Semaphore(max(1, cfg.lanes))

    async def ingest_backend(name: str) -> None:
        t0 = time.perf_counter()
        try:
            wanted = suite.namespaces_for(name, caps.get(name, {}), data.corpora)
            corpora = {ns: b for ns, b in data.corpora.items() if ns in wanted}
            info = await ingest_corpora(clients[name], corpora, ctx.backend_namespace,
                                        cfg.settle_timeout_for, lambda m, n=name: emit(
                                            {"run_id": run_id, "phase": "ingest", "message": f"{n} {m}"}))
            info["duration_s"] = time.perf_counter() - t0
            ingest_info[name] = info
        except Exception as e:
            failures[name] = f"ingest failed: {type(e).__name__}: {e}"

    async def ingest_group(group: list[str]) -> None:
        async with lanes:
            for name in group:
                await ingest_backend(name)

    await asyncio.gather(*(ingest_group(g) for g in
                           heaviest_first(lane_groups([n for n in sorted(needed) if n in clients]))))
    for b, (a, _) in views.items():
        if a in failures:
            failures.setdefault(b, f"its replay is {a}'s, which failed: {failures[a]}"[:400])
        elif a in ingest_info:
            ingest_info[b] = {**ingest_info[a], "replay_of": a, "namespaces": {
                ns: replay_views.shared_record(r, a) for ns, r in (ingest_info[a].get("namespaces") or {}).items()}}
    ingested({n: ingest_info[n] for n in sorted(ingest_info)})

    sem = asyncio.Semaphore(max(1, cfg.concurrency))
    total, finished = len(work), 0
    t_probes = time.monotonic()

    async def one(probe: Probe, cond: Condition) -> None:
        nonlocal finished
        async with sem:
            sample = await run_one(suite, ctx, probe, cond, failures)
            run_dir.append_sample(sample)
            finished += 1
            elapsed = time.monotonic() - t_probes
            eta = elapsed / finished * (total - finished) if finished else None
            emit({"run_id": run_id, "phase": "probes", "done": finished, "total": total, "eta_seconds": eta})

    emit({"run_id": run_id, "phase": "probes", "done": 0, "total": total})
    await asyncio.gather(*(one(p, c) for p, c in work))


# Which lanes start first when there are more lane groups than lanes: by the role of their heaviest member. OpenClaw's
# own profiles (one Node process each, its Worker threads, seconds a namespace) and the memory systems under test
# take most of a suite's lane time; started last, one of them ran alone at the end while the other lane sat idle.
LANE_FIRST = ("native", "memory")


def heaviest_first(groups: list[list[str]]) -> list[list[str]]:
    """`groups` with those holding a backend of a LANE_FIRST role first (in LANE_FIRST's order), otherwise in the
    order given. A name the registry does not know ranks with the memory systems (someone's own system)."""
    from services.adapters.registry import get_spec

    def rank(name: str) -> int:
        try:
            role = get_spec(name).role
        except KeyError:
            role = "memory"
        return LANE_FIRST.index(role) if role in LANE_FIRST else len(LANE_FIRST)

    return sorted(groups, key=lambda g: min(rank(n) for n in g))


def lane_groups(backends: list[str]) -> list[list[str]]:
    """Backends that must not run side by side, grouped (each group in the order given, groups by their first
    member): those whose specs require a common service process. `cortex` and `cortex-fast` share one cortex-mock,
    where the same rig namespace is the same tenant: side by side, one's Reset would wipe the other's memories.
    A name the registry does not know (a --target) shares nothing."""
    from services.adapters.registry import get_spec

    def requires(name: str) -> set[str]:
        try:
            return set(get_spec(name).requires)
        except KeyError:
            return set()

    groups: list[tuple[set[str], list[str]]] = []
    for name in backends:
        need = requires(name)
        joined = [g for g in groups if g[0] & need]
        merged_need, merged = set(need), []
        for g in joined:
            merged_need |= g[0]
            merged += g[1]
            groups.remove(g)
        groups.append((merged_need, sorted([*merged, name], key=backends.index)))
    return sorted((g[1] for g in groups), key=lambda g: backends.index(g[0]))


async def embed_counters(client) -> dict[str, int] | None:
    """The backend's embedder counters from Stats (services/common/embeddings.embedder_counters), {} when it reports
    none; None when Stats fails (the figures are then missing, the run goes on)."""
    try:
        counters = (await client.stats(""))["counters"]
    except Exception:  # a backend's Stats is not what this run measures
        return None
    return {k: int(v) for k, v in counters.items() if k.startswith("embed_")}


async def ingest_namespace(client, bns: str, batch, settle_timeout_s: float) -> dict[str, Any]:
    """Reset, ingest and settle one namespace; its counts and times (seconds), and, when the backend's Stats reports
    its embedder's counters, `texts_embedded` / `texts_cached`: the texts its ingest and settle ran the model on and
    those the shared embedding cache answered (an ingest figure with nothing embedded was paid for by an earlier run).
    The Stats calls fall outside the timed spans."""
    before = await embed_counters(client)
    await client.reset(bns)
    t0 = time.perf_counter()
    counts = await client.ingest(bns, batch)
    t1 = time.perf_counter()
    settled = await client.settle(bns, settle_timeout_s)
    t2 = time.perf_counter()
    rec = {**counts, "ingest_s": t1 - t0, "settle_s": t2 - t1, "settled": settled.settled,
           "items_indexed": settled.items_indexed, "items_pending": settled.items_pending}
    after = await embed_counters(client)
    for key, name in (("embed_texts_embedded", "texts_embedded"), ("embed_texts_cached", "texts_cached")):
        if before is not None and after and key in after:  # absent before: its embedder was made in this namespace
            rec[name] = after[key] - before.get(key, 0)
    return rec


def lane_eta(lanes: dict[str, tuple[int, int, float | None]], slots: int) -> float | None:
    """Seconds until a streamed run ends, from each lane's own pace: `lanes` {backend: (messages it ingested so far,
    messages it has still to ingest, seconds since it started, None before)}, `slots` lanes at a time. A lane's
    pace is its seconds per message so far (its questions and releases included); a lane that has not finished a
    namespace yet takes the slowest pace seen, so an early ETA errs long rather than short (before, one rate for
    every message made the first ETA of a run whose cheap backends reported first far too short). The ETA: the
    longest time a running lane still needs, or all the lanes' remaining work spread over the slots, whichever is
    more. None while no lane has a pace; 0 when nothing is left."""
    if not any(left for _, left, _ in lanes.values()):
        return 0.0
    paces = {n: elapsed / done for n, (done, _, elapsed) in lanes.items() if done and elapsed is not None}
    if not paces:
        return None
    slowest = max(paces.values())
    work = {n: left * paces.get(n, slowest) for n, (_, left, _) in lanes.items() if left}
    running = [work[n] for n, (_, left, elapsed) in lanes.items() if left and elapsed is not None]
    return max(max(running, default=0.0), sum(work.values()) / max(1, slots))


async def run_streamed(suite: Suite, ctx: ProbeContext, data, work: list[tuple[Probe, Condition]],
                       failures: dict[str, str], run_dir: RunDir, cfg: RunConfig, emit: ProgressFn,
                       rig: Rig | None, prev_ingest: dict[str, Any],
                       checkpoint: Callable[[dict[str, Any]], None] = lambda info: None,
                       views: dict[str, tuple[str, str]] | None = None) -> dict[str, Any]:
    """A namespace-scoped suite (Suite.namespace_scoped): per backend (`lanes` backends at a time, each its own
    process; lanes=1: one after another, so each one's cost is its own), one namespace at a time: reset, ingest,
    settle, that namespace's probes (bounded by `concurrency`), then Reset again to release it, so a backend holds one haystack, never the run's.
    Returns run.json's "ingest": per backend, per namespace in the order ingested, what `ingest_namespace` records
    plus `release_s`, `rss_bytes` (the backend's processes right after settle; services/launcher.Rig.backend_rss)
    and `retrieve_ms` (each probe's timed retrieve), the raw material of services/coordinator/costs.py. Progress:
    namespaces done of all, with an ETA from each lane's messages still to ingest at its own pace (`lane_eta`).
    What is done so far goes to `checkpoint` at most every CHECKPOINT_S seconds, and once more when the command is
    interrupted (services/common/interrupt.py runs it before the exit), so an interrupted run keeps every finished
    namespace's cost record. Before, the records of the last CHECKPOINT_S seconds were lost while their samples were
    kept, so a resumed run skipped those namespaces and the cost table placed every later one at the wrong message
    count.
    `views` ({B: (A, view)}, services/coordinator/views.py): B has no lane of its own; its probes of a namespace run
    in A's lane right after A's, before A releases the namespace, and its records are A's replay's."""
    run_id = run_dir.run_id
    views = views or {}
    lanes: dict[str, dict[str, list[tuple[Probe, Condition]]]] = {}
    for p, c in work:
        lanes.setdefault(c.backends[0], {}).setdefault(p.namespace, []).append((p, c))
    riders: dict[str, list[str]] = {}
    rider_lanes: dict[str, dict[str, list[tuple[Probe, Condition]]]] = {}
    for b, (a, _) in views.items():
        if b in lanes:
            riders.setdefault(a, []).append(b)
            rider_lanes[b] = lanes.pop(b)
    every = [*lanes.values(), *rider_lanes.values()]
    total_ns = sum(len(v) for v in every)
    lanes_left = {ns: sum(1 for v in every if ns in v) for v in every for ns in v}
    done_ns = 0
    last_checkpoint = time.monotonic()
    lane_msgs = {name: sum(data.corpora[ns].message_count for ns in nss) for name, nss in lanes.items()}
    lane_done = dict.fromkeys(lanes, 0)
    lane_t0: dict[str, float] = {}
    sem = asyncio.Semaphore(max(1, cfg.concurrency))
    info: dict[str, Any] = {}
    this_pass = next_pass(prev_ingest)

    async def one(probe: Probe, cond: Condition) -> dict[str, Any]:
        async with sem:
            sample = await run_one(suite, ctx, probe, cond, failures)
            run_dir.append_sample(sample)
            return sample

    lane_slots = asyncio.Semaphore(max(1, cfg.lanes))

    async def group_run(group: list[str]) -> None:
        async with lane_slots:
            for name in group:
                await lane_run(name)

    async def lane_run(name: str) -> None:
        nonlocal done_ns, last_checkpoint
        client = ctx.clients.get(name)
        lane = info[name] = {"namespaces": dict((prev_ingest.get(name) or {}).get("namespaces") or {}),
                             "mode": "streamed", "lanes": max(1, cfg.lanes)}
        t_lane = time.perf_counter()
        lane_t0[name] = time.monotonic()
        for ns, items in lanes[name].items():
            bns = ctx.backend_namespace(ns)
            # the pass (0, then 1 per resume) and its lanes: a resumed pass starts fresh backend processes, and the
            # cost table counts a namespace's messages from the start of its own pass (services/coordinator/costs.py)
            rec: dict[str, Any] = {"messages": data.corpora[ns].message_count, "pass": this_pass,
                                   "lanes": max(1, cfg.lanes)}
            if client is not None and name not in failures:
                try:
                    rec.update(await ingest_namespace(client, bns, data.corpora[ns],
                                                      cfg.settle_timeout_for(rec["messages"])))
                except Exception as e:
                    failures[name] = f"ingest failed: {type(e).__name__}: {e}"
                    rec["error"] = failures[name]
                rec["rss_bytes"] = rig.backend_rss(name) if rig is not None else None
            samples = await asyncio.gather(*(one(p, c) for p, c in items))
            rec["retrieve_ms"] = [s["retrievals"][name]["latency_ms"] for s in samples
                                  if s.get("status") == "ok" and (s.get("retrievals") or {}).get(name)]
            for b in riders.get(name, []):  # their probes on this replay, before it is released
                if name in failures:
                    failures.setdefault(b, f"its replay is {name}'s, which failed: {failures[name]}"[:400])
                await ride(b, ns, rec)
            if client is not None and name not in failures:
                t0 = time.perf_counter()
                try:
                    await client.reset(bns)
                    rec["release_s"] = time.perf_counter() - t0
                except Exception as e:  # the scores stand; only the memory is not given back
                    rec["release_error"] = f"{type(e).__name__}: {e}"[:300]
            ctx.forget(name, [p.id for p, _ in items])
            lanes_left[ns] -= 1
            if not lanes_left[ns]:  # every backend is done with it: the grader's index of its corpus goes too
                ctx.release(ns)
            lane["namespaces"][ns] = rec
            done_ns += 1 + sum(1 for b in riders.get(name, []) if ns in rider_lanes[b])
            lane_done[name] += rec["messages"]
            # what an interrupt writes: copies, taken here on the run's thread, never read while they change
            latest["info"] = {n: {**info[n], "namespaces": dict(info[n]["namespaces"])} for n in sorted(info)}
            now = time.monotonic()
            eta = lane_eta({n: (lane_done[n], lane_msgs[n] - lane_done[n], now - lane_t0[n] if n in lane_t0 else None)
                            for n in lanes}, cfg.lanes)
            emit({"run_id": run_id, "phase": "namespaces", "done": done_ns, "total": total_ns,
                  "eta_seconds": eta, "message": f"{name} {ns}: {rec['messages']} messages"})
            if time.monotonic() - last_checkpoint >= CHECKPOINT_S:
                last_checkpoint = time.monotonic()
                checkpoint({n: info[n] for n in sorted(info)})
        lane["duration_s"] = time.perf_counter() - t_lane
        for b in riders.get(name, []):
            info.setdefault(b, {"namespaces": {}, "mode": "streamed", "replay_of": name})["duration_s"] = \
                lane["duration_s"]

    async def ride(b: str, ns: str, host_rec: dict[str, Any]) -> None:
        """B's probes of namespace ns on A's replay; B's record of it is A's replay's, with B's own retrieve times."""
        host = views[b][0]
        lane = info.setdefault(b, {"namespaces": dict((prev_ingest.get(b) or {}).get("namespaces") or {}),
                                   "mode": "streamed", "lanes": max(1, cfg.lanes), "replay_of": host})
        items = rider_lanes[b].get(ns, [])
        if not items:
            return
        samples = await asyncio.gather(*(one(p, c) for p, c in items))
        rec = replay_views.shared_record(host_rec, host)
        rec["retrieve_ms"] = [s["retrievals"][b]["latency_ms"] for s in samples
                              if s.get("status") == "ok" and (s.get("retrievals") or {}).get(b)]
        ctx.forget(b, [p.id for p, _ in items])
        lanes_left[ns] -= 1
        lane["namespaces"][ns] = rec

    latest: dict[str, Any] = {}
    hook = interrupt.on_exit(lambda: checkpoint(latest["info"]) if latest else None)
    try:
        await asyncio.gather(*(group_run(g) for g in heaviest_first(lane_groups(sorted(lanes)))))
    finally:
        interrupt.forget(hook)
    return {n: info[n] for n in sorted(info)}


async def _conditions_and_reused(suite: Suite, data, backends: list[str], reuse: Reuse | None,
                                 stored: dict[str, Any], clients: dict[str, Any], describes: dict[str, Any],
                                 failures: dict[str, str], start: Callable[[str], Any]
                                 ) -> tuple[dict[str, dict[str, str]], list[Condition], dict[str, Any]]:
    """(capabilities, conditions, reused): the suite's conditions over the started and the stored backends, and the stored results that fit them
    (services/coordinator/reuse.py `confirm`). A stored backend whose result does not fit is started and measured;
    one whose result fits but that a condition measured here also reads (arclight's "native + X") is started too,
    its own result still reused. Repeated until nothing more starts."""
    while True:
        caps = {n: {c["name"]: c["detail"] for c in (d or {}).get("capabilities") or []} for n, d in describes.items()}
        conditions = suite.conditions([n for n in backends if n in clients or n in stored], caps)
        reused = reuse.confirm(stored, conditions, data.probes) if reuse is not None else {}
        in_work = {b for c in conditions if reuse_owner(c) not in reused for b in c.backends}
        late = [n for n in stored if n not in clients and n not in failures and (n not in reused or n in in_work)]
        if not late:
            return caps, conditions, reused
        for n in late:
            if n not in reused:
                del stored[n]
                describes.pop(n, None)
            await start(n)


def _copy_reused(run_dir: RunDir, reuse: Reuse, reused: dict[str, Any], done: set[str],
                 say: Callable[[str], None]) -> None:
    """Append each reused result's samples that --out does not hold yet; say what is reused and why the others
    are measured."""
    for n, e in reused.items():
        say(f"{n}: {e.label}")
        for s in e.samples:
            if s["key"] not in done:
                run_dir.append_sample(s)
                done.add(s["key"])
    for n, why in reuse.why.items():
        if n not in reused:
            say(f"{n}: measured ({why})")


def next_pass(prev_ingest: dict[str, Any]) -> int:
    """The pass number of a run that resumes after `prev_ingest` (run.json's "ingest" so far): 0 for a fresh run,
    else one more than any earlier record's (a record written before passes were numbered counts as pass 0)."""
    seen = [costs.pass_of(r) for lane in (prev_ingest or {}).values() if isinstance(lane, dict)
            for r in (lane.get("namespaces") or {}).values() if isinstance(r, dict)]
    return max(seen) + 1 if seen else 0


async def ingest_corpora(client, corpora, ns_fn, settle_timeout: Callable[[int], float],
                         note=lambda m: None) -> dict[str, Any]:
    """Each corpus into its namespace, one after another; `settle_timeout(messages)` is a namespace's Settle timeout
    (RunConfig.settle_timeout_for)."""
    info: dict[str, Any] = {"namespaces": {}}
    for ns, batch in corpora.items():
        rec = info["namespaces"][ns] = await ingest_namespace(client, ns_fn(ns), batch,
                                                              settle_timeout(batch.message_count))
        note(f"{ns}: {rec['messages_accepted']} messages, settled={rec['settled']}")
    return info


async def run_one(suite: Suite, ctx: ProbeContext, probe: Probe, cond: Condition,
                  failures: dict[str, str]) -> dict[str, Any]:
    base = {
        "key": sample_key(cond, probe),
        "suite": suite.name,
        "condition": cond.name,
        "condition_context": list(cond.context),
        "probe_id": probe.id,
        "category": probe.category,
        "question": probe.question,
        "ground_truth": probe.ground_truth,
        "expected": probe.expected,
        "evidence_ids": probe.evidence_ids,
        "namespace": probe.namespace,
        "meta": probe.meta,
    }
    dead = [b for b in cond.backends if b in failures]
    if dead:
        return {**base, "status": "error", "error": f"backend {dead[0]} unavailable: {failures[dead[0]]}"}
    t0 = time.perf_counter()
    try:
        body = await suite.run_probe(ctx, probe, cond)
        return {**base, **body, "status": "ok", "duration_ms": (time.perf_counter() - t0) * 1000}
    except (BackendUnavailable, BackendFailed) as e:
        # the backend is down or fails for good (services/common/errors.py): no later probe will pass, so the
        # rest of its probes are recorded as errors without calling it
        failures.setdefault(e.backend, f"failed mid-run: {e.code}: {str(e)[:300]}")
        return {**base, "status": "error", "error": str(e)[:500]}
    except BackendError as e:  # this call alone failed (UNIMPLEMENTED, RESOURCE_EXHAUSTED, ...)
        return {**base, "status": "error", "error": str(e)[:500]}
    except (MemrigError, TimeoutError, ValueError, RuntimeError, OSError) as e:
        return {**base, "status": "error", "error": f"{type(e).__name__}: {e}"[:500],
                "traceback": traceback.format_exc()[-1500:]}


def sitting_elapsed(run: dict[str, Any]) -> float | None:
    """Seconds since this sitting's run began (run.json's `started_monotonic`), or None when run.json was written by
    an earlier process: a resumed run stopped before it wrote its own still holds the earlier sitting's start, and
    CLOCK_MONOTONIC is the machine's, so the difference would span the gap between the sittings."""
    t0 = run.get("started_monotonic")
    if not isinstance(t0, int | float):
        return None
    elapsed = time.monotonic() - t0
    if time.time() - elapsed < psutil.Process().create_time() - 1.0:  # began before this process did
        return None
    return round(elapsed, 3)


def mark_interrupted(run_dir: RunDir) -> str:
    """Ctrl-C during `memrig bench` (services/common/interrupt.py; runs in the main thread while the run's
    writes are held): run.json records the interrupt, the samples that finished are scored and reported as an
    interrupted run; returns the one line the CLI prints."""
    run = run_dir.read_run()
    ok = sum(1 for s in run_dir.samples() if s.get("status") == "ok")
    if not run.get("suite"):
        return f"interrupted before the run started: nothing written in {run_dir.path}"
    stop: dict[str, Any] = {"at": datetime.now(UTC).isoformat(timespec="seconds"), "samples_ok": ok}
    if (elapsed := sitting_elapsed(run)) is not None:
        stop["elapsed_s"] = elapsed
    amend(run_dir, interrupted=stop)
    try:
        _, state = finalize(run_dir, html=False)
    except Exception as e:  # the samples are kept whatever scoring makes of them
        return (f"interrupted: kept {ok} finished sample(s) in {run_dir.path}; scoring them failed ({type(e).__name__}: "
                f"{e}); `memrig report {run_dir.path}` retries")
    return (f"interrupted: kept {ok} finished sample(s); report of what finished: {run_dir.path / 'report.md'} "
            "(rerun with the same --out to resume)")


PROBES_FILE = "probes.jsonl"


def write_probe_values(run_dir: RunDir, suite: Suite, ok: list[dict[str, Any]]) -> Path | None:
    """probes.jsonl: every per-probe value the suite's scoring and the verdict use, one line per (condition, probe):
    {"condition", "backend", "probe_id", "cluster" (the independent unit, or null), "values": {metric: value}}. A
    reader can recompute any verdict cell (means, intervals, paired tests) from it alone. A suite without per-probe
    values writes none."""
    try:
        pv = suite.probe_values(ok)
    except NotImplementedError:
        return None
    lines = []
    for cond in sorted(pv.values):
        metrics = pv.values[cond]
        for pid in sorted({p for m in metrics.values() for p in m}):
            lines.append(json.dumps({"condition": cond, "backend": pv.backend_of.get(cond, cond), "probe_id": pid,
                                     "cluster": (pv.clusters or {}).get(pid),
                                     "values": {m: v[pid] for m, v in sorted(metrics.items()) if pid in v}},
                                    default=str))
    return run_dir.write_text(PROBES_FILE, "".join(x + "\n" for x in lines))


def finalize(run_dir: RunDir, suite: Suite | None = None, html: bool = True) -> tuple[dict[str, Any], str]:
    """(Re)compute metrics.json and report.md from run.json + samples.jsonl."""
    from services.coordinator.report import render_report
    from services.coordinator.verdict import VERDICT_HEADING, VerdictError, one_suite_verdict

    run = run_dir.read_run()
    if suite is None:
        suite = get_suite(run["suite"])(run.get("options"), seed=run.get("seed", 0))
    samples = run_dir.samples()
    ok = [s for s in samples if s.get("status") == "ok"]
    metrics = suite.score(ok)
    metrics["judge"] = run.get("judge")
    metrics["llm"] = run.get("llm")
    if not (run.get("judge") or {}).get("offline_mock", True):
        from services.coordinator import judge_agreement

        agreement = judge_agreement.compute(ok, suite.name, seed=run.get("seed", 0))
        if agreement:
            metrics["judge_agreement"] = agreement
    if table := costs.cost_table(run.get("ingest") or {}):
        metrics["costs"] = table
    if (groups := suite.cost_groups(run.get("data") or {})) and \
            (by_group := costs.group_table(run.get("ingest") or {}, groups[1], groups[2])):
        metrics["costs_by_group"] = {"label": groups[0], "backends": by_group}
    metrics["samples"] = {"ok": len(ok), "error": len(samples) - len(ok)}
    errors = [s for s in samples if s.get("status") != "ok"]
    failures = dict(run.get("failures") or {})
    state = "succeeded" if not errors and not failures else ("partial" if ok else "failed")
    if run.get("interrupted"):
        state = "interrupted"
    metrics["state"] = state
    run_dir.write_json("metrics.json", metrics)
    write_probe_values(run_dir, suite, ok)
    verdict_md = ""
    try:
        verdict, verdict_md = one_suite_verdict(run_dir.path, loaded=(run, metrics, suite, ok))
        run_dir.write_json("verdict.json", verdict)
    except (VerdictError, NotImplementedError) as e:  # a suite without per-probe values, or no headline
        verdict_md = f"{VERDICT_HEADING}\n\nNo verdict for this run: {e}\n"
    run_dir.write_text("report.md", render_report(run, metrics, suite, errors, failures, verdict_md))
    if not html:  # an interrupted run: report.md now, the plots by `memrig report`
        return metrics, state
    try:
        from services.coordinator.report_html import render_html

        render_html(run_dir.path)
    except ModuleNotFoundError:
        pass
    return metrics, state
