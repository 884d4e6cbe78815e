"""Scale runs of the memory backends: grow each backend 1k → 10k → 100k memories and, at every size, measure
ingest throughput, retrieve latency on every path (in-process, gRPC, and for Cortex directly and through the
fault proxy), RSS and disk per memory, with the numpy floor timed in the same loop over the same queries.

Side by side: for every query the paths (and the floor) are timed one after the other, the order rotating
per query and pass, so load from the rest of the machine hits them alike; at least three passes over the
queries, each figure the median of the passes' figures, the floor the minimum of its passes, differences
(gRPC hop, proxy cost) medians of paired differences, the machine's load recorded per step (passes.py). Latencies are client-observed
(`time.perf_counter_ns` around the call, as the runner records them); percentiles are exact (stats.py).

- openclaw, openclaw-2026-02, full-context, none: one backend process (through the launcher, `storage: file`
  for OpenClaw so disk is real) and one in-process instance (`InProcessBackendClient`, same class, same
  config), each ingesting the same memories; RSS and disk come from the process's Stats.
- cortex-fast, cortex: one cortex-mock process and one fault-proxy process; the memories are ingested once
  (the two differ only in recall mode) by an in-process adapter talking to the mock directly; retrieve is
  timed in-process directly, in-process through the proxy, and through gRPC (a backend process configured
  through the proxy, as the registry starts it). RSS and disk are the mock's. Ingest (extraction) is the slow
  part: a size whose projected ingest time exceeds the step budget is reported as not run, with the figure.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from services.adapters.base import BackendContext
from services.adapters.client import GrpcBackendClient, InProcessBackendClient
from services.common.types import RetrieveQuery
from services.launcher import Rig
from services.perf import synth
from services.perf.floor import FLOOR_K, floor_topk
from services.perf.passes import (
    MIN_PASSES,
    LoadProbe,
    flatten,
    floor_of_passes,
    median_of_passes,
    paired_difference_ms,
)
from services.perf.stats import loglog_slope, per_item, percentiles_ms, project_seconds, ratio

NS = "perf"
TOP_K = 6
REFERENCES = ("full-context", "none")
LOCAL_KIND = {"openclaw": "documents_with_paths", "openclaw-2026-02": "documents_with_paths",
              "full-context": "sessions", "none": "sessions"}
CORTEX_MODE = {"cortex-fast": "fast", "cortex": "full"}
UNIT = {"documents_with_paths": "chunk (one document = one file = one chunk)", "sessions": "message",
        "documents": "document (the mock extracts facts from it)"}
# The plugin's 2 s recall budget would turn a slow retrieve into a silent empty result; the benchmark measures
# the memory system's cost, so the budget is lifted (recorded in results.json).
CORTEX_CONFIG = {"recall_timeout_ms": 120000}


class FloorSource:
    """The vectors of the first n memories and of the queries, for the numpy floor (same vectors as the
    backends index: OpenClaw's own matrix when it has been built, else the texts embedded here)."""

    def __init__(self, texts: list[str], embedder_name: str):
        self.texts = texts
        self.embedder_name = embedder_name
        self.matrices: dict[int, np.ndarray] = {}
        self.source: dict[int, str] = {}
        self._emb = None

    @property
    def embedder(self):
        if self._emb is None:
            from services.common.embeddings import get_embedder

            self._emb = get_embedder(self.embedder_name, use_cache=False)
        return self._emb

    def offer(self, n: int, matrix: np.ndarray, source: str) -> None:
        if n not in self.matrices and matrix.shape[0] == n and matrix.shape[1] > 0:
            self.matrices[n] = np.ascontiguousarray(matrix, dtype=np.float32)
            self.source[n] = source

    def matrix(self, n: int) -> np.ndarray:
        if n not in self.matrices:
            self.matrices[n] = self.embedder.encode(self.texts[:n])
            self.source[n] = f"memory texts embedded with {self.embedder.name}"
        return self.matrices[n]

    def query_vectors(self, qs: list[str]) -> np.ndarray:
        return self.embedder.encode([q.strip() for q in qs])


async def time_paths(paths: dict[str, Any], queries: list[str], floor: tuple[np.ndarray, np.ndarray] | None,
                     warmup: int = 3, passes: int = MIN_PASSES
                     ) -> tuple[dict[str, list[list[int]]], dict[str, int], dict[str, int]]:
    """`passes` passes over the queries; in each, per query, every path once (the order rotating with the query
    and the pass) and then the floor. Returns ns samples per path and pass (index i of every path's pass list is
    the same query, so paths can be differenced pair by pair), and the non-empty / degraded result counts of
    the first pass (one per query)."""
    names = list(paths)
    lat: dict[str, list[list[int]]] = {n: [[] for _ in range(passes)] for n in names}
    nonempty = dict.fromkeys(names, 0)
    degraded = dict.fromkeys(names, 0)
    if floor is not None:
        lat["floor"] = [[] for _ in range(passes)]
    mat, qv = floor if floor is not None else (None, None)
    for i, q in enumerate(queries[:warmup]):
        rq = RetrieveQuery(query=q, top_k=TOP_K, reference_time=synth.REFERENCE_TIME)
        for name in names:
            await paths[name].retrieve(NS, rq)
        if mat is not None:
            floor_topk(mat, qv[i % len(queries)], FLOOR_K)
    for p in range(passes):
        for i, q in enumerate(queries):
            rq = RetrieveQuery(query=q, top_k=TOP_K, reference_time=synth.REFERENCE_TIME)
            r = (i + p) % len(names) if names else 0
            for name in names[r:] + names[:r]:
                res, ns = await paths[name].retrieve(NS, rq)
                lat[name][p].append(ns)
                if p == 0:
                    nonempty[name] += bool(res.memories or res.formatted_context)
                    degraded[name] += bool(res.degraded)
            if mat is not None:
                t0 = time.perf_counter_ns()
                floor_topk(mat, qv[i], FLOOR_K)
                lat["floor"][p].append(time.perf_counter_ns() - t0)
    return lat, nonempty, degraded


def summarise_step(n: int, lat: dict[str, list[list[int]]], primary_grpc: str, primary_inproc: str
                   ) -> dict[str, Any]:
    """Per path the median over passes of each pass's percentiles; the floor the minimum of its passes' p50s;
    the gRPC hop the median of paired (same query, back to back) differences; and the ratios the report quotes."""
    pcts = {k: median_of_passes(v) for k, v in lat.items()}
    floor_p50 = floor_of_passes(lat.get("floor", []))
    g, ip = pcts.get(primary_grpc, {}), pcts.get(primary_inproc, {})
    both = primary_grpc in lat and primary_inproc in lat
    return {
        "n": n, "retrieve": pcts, "passes": max((len(v) for v in lat.values()), default=0),
        "floor_p50_ms": floor_p50,
        "floor_p50_passes_ms": (pcts.get("floor") or {}).get("p50_passes"),
        "ratio_grpc_to_floor_p50": ratio(g.get("p50"), floor_p50),
        "ratio_inprocess_to_floor_p50": ratio(ip.get("p50"), floor_p50),
        "grpc_hop_p50_ms": paired_difference_ms(flatten(lat[primary_grpc]), flatten(lat[primary_inproc]))
        if both else None,
        "grpc_hop_p99_ms": paired_difference_ms(flatten(lat[primary_grpc]), flatten(lat[primary_inproc]), 99)
        if both else None,
        "ratio_grpc_to_inprocess_p50": ratio(g.get("p50"), ip.get("p50")),
    }


def project_step_s(history: list[tuple[int, int, float]], n: int) -> tuple[float | None, float]:
    """Projected seconds to grow to n memories from the ingest steps so far [(start, stop, memories/s)]: the
    per-memory time is taken to grow as size^e, e fitted on the steps' midpoints (0 with a single step), so an
    ingest that slows as the store grows (the cortex-mock compares each new fact with the stored ones) is not
    projected as linear. Returns (seconds, e)."""
    if not history:
        return None, 0.0
    mids = [(a + b) / 2 for a, b, _ in history]
    e = loglog_slope(mids, [1 / r if r else None for _, _, r in history]) if len(history) >= 2 else None
    e = max(0.0, e or 0.0)
    a, b, r = history[-1]
    base = project_seconds(n - b, r)
    if base is None:
        return None, e
    return base * (((b + n) / 2) / mids[-1]) ** e, e


def _plan_sizes(sizes: list[int], have: int, history: list[tuple[int, int, float]],
                max_step_s: float) -> tuple[int | None, str]:
    """The next size to run, or (None, reason) when its projected ingest time is over the budget."""
    rate = history[-1][2] if history else None
    for n in sizes:
        if n <= have:
            continue
        proj, e = project_step_s(history, n)
        if proj is not None and proj > max_step_s:
            return None, (f"not run: ingesting {n - have:,} more memories would take ~{proj:,.0f} s at the measured "
                          f"{rate:,.0f} memories/s, per-memory time growing as size^{e:.2f} (step budget {max_step_s:,.0f} s; --max-step-s or --sizes)")
        return n, ""
    return None, ""


async def _ingest(client, kind: str, texts: list[str], start: int, stop: int, batch: int,
                  settle_timeout_s: float) -> dict[str, float]:
    t0 = time.perf_counter()
    nb = 0
    for s in range(start, stop, batch):
        await client.ingest(NS, synth.batch_for(kind, texts, s, min(stop, s + batch)))
        nb += 1
    t1 = time.perf_counter()
    st = await client.settle(NS, settle_timeout_s)
    t2 = time.perf_counter()
    return {"items": stop - start, "batches": nb, "ingest_s": t1 - t0, "settle_s": t2 - t1,
            "items_per_s": (stop - start) / (t2 - t0) if t2 > t0 else None, "settled": st.settled,
            "counts": dict(st.counts)}


async def run_local(name: str, rig: Rig, texts: list[str], sizes: list[int], qsets: dict[int, list[str]],
                    floors: FloorSource, opts: dict[str, Any], log: Callable[[str], None]) -> dict[str, Any]:
    """openclaw*, full-context, none: a backend process and an in-process instance, grown side by side."""
    kind = LOCAL_KIND[name]
    cfg = {"storage": "file"} if name.startswith("openclaw") else {}
    out: dict[str, Any] = {"backend": name, "reference": name in REFERENCES, "unit": UNIT[kind], "config": cfg,
                           "paths": {"grpc": "gRPC", "in_process": "in-process"}, "sizes": []}
    data_dir = Path(opts["data_dir"]) / "inproc" / name
    proc = await rig.start_backend(name, config=cfg, embedder=opts["embedder"])
    grpc = GrpcBackendClient(proc.url, name=name, deadline_s=300.0, ingest_deadline_s=3600.0)
    ctx = BackendContext(embedder_name=opts["embedder"], data_dir=data_dir,
                         embedding_cache_path=str(data_dir / "embed-cache.sqlite"))
    inproc = InProcessBackendClient.from_spec(name, config=cfg, context=ctx)
    try:
        await grpc.reset(NS)
        await inproc.reset(NS)
        rss0 = (await grpc.stats())["rss_bytes"]
        out["rss_baseline_bytes"] = rss0
        have, history = 0, []
        while True:
            n, reason = _plan_sizes(sizes, have, history, opts["max_step_s"])
            if n is None:
                for m in sizes:
                    if m > have and reason:
                        out["sizes"].append({"n": m, "status": "not run", "reason": reason})
                break
            log(f"{name}: ingest {have:,} -> {n:,}")
            ig = await _ingest(grpc, kind, texts, have, n, opts["batch"], opts["settle_timeout_s"])
            ii = await _ingest(inproc, kind, texts, have, n, opts["batch"], opts["settle_timeout_s"])
            both = ig["ingest_s"] + ig["settle_s"] + ii["ingest_s"] + ii["settle_s"]
            if both > 0:  # the next step ingests on both paths again
                history.append((have, n, (n - have) / both))
            have = n
            st = await grpc.stats(NS)
            be = inproc.host.backend
            idx = getattr(be, "_index", None)
            if idx is not None and NS in getattr(idx, "_matrices", {}):
                floors.offer(n, idx._matrices[NS].matrix, f"{name}'s own chunk matrix (same vectors)")
            qs = qsets[n]
            floor = (floors.matrix(n), floors.query_vectors(qs))
            log(f"{name}: {len(qs)} queries × {opts.get('passes', MIN_PASSES)} passes at {n:,}")
            load = LoadProbe()
            load.start()
            lat, nonempty, degraded = await time_paths({"in-process": inproc, "gRPC": grpc}, qs, floor,
                                                       passes=opts.get("passes", MIN_PASSES))
            step = summarise_step(n, lat, "gRPC", "in-process")
            step.update({
                "status": "ok", "load": load.stop(),
                "ingest": {"grpc": ig, "in_process": ii},
                "ingest_items_per_s_grpc": ig["items_per_s"], "ingest_items_per_s_in_process": ii["items_per_s"],
                "settled": bool(ig["settled"] and ii["settled"]),
                "rss_bytes": st["rss_bytes"], "rss_per_memory_bytes": per_item(st["rss_bytes"], rss0, n),
                "disk_bytes": st["disk_bytes"], "disk_per_memory_bytes": st["disk_bytes"] / n if n else None,
                "nonempty_results": nonempty, "degraded": degraded, "queries": len(qs),
                "floor_vectors": floors.source.get(n, ""),
                "counters": st.get("counters", {}),
            })
            out["sizes"].append(step)
            if name.startswith("openclaw") and be is not None:
                step["breakdown"] = openclaw_breakdown(be, qs, floors.query_vectors(qs))
    finally:
        await grpc.close()
        await inproc.close()
        rig.stop(f"backend/{name}")
        shutil.rmtree(data_dir, ignore_errors=True)
    return out


def openclaw_breakdown(backend, qs: list[str], qvecs: np.ndarray) -> dict[str, Any]:
    """Where an in-process OpenClaw search spends its time: the vector side, the FTS side, the whole
    `search` (merge/decay/MMR included) and retrieve's per-call chunk-row map (as services/studies/
    openclaw_port_speed.py splits it)."""
    from services.adapters.openclaw import fts as ftsmod
    from services.adapters.openclaw.presets import candidate_count

    p = backend.params
    cand = candidate_count(TOP_K, p["candidate_multiplier"], p["candidate_cap"])
    now_ms = int(synth.REFERENCE_TIME.timestamp() * 1000)
    idx = backend.index
    parts: dict[str, list[int]] = {"vector": [], "fts": [], "search": [], "chunk_rows": []}
    for q, v in zip(qs, qvecs, strict=True):
        t0 = time.perf_counter_ns()
        idx.search_vector(NS, v, cand)
        t1 = time.perf_counter_ns()
        idx.search_keyword(NS, ftsmod.build_fts_query(q, p["fts_token_regex"]), cand, backend.model,
                           lambda r: ftsmod.bm25_rank_to_score(r, p["bm25_mapping"]))
        t2 = time.perf_counter_ns()
        backend.search(NS, q, TOP_K, v, now_ms)
        t3 = time.perf_counter_ns()
        idx.chunk_rows(NS)
        t4 = time.perf_counter_ns()
        for k, d in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            parts[k].append(d)
    return {k: percentiles_ms(v) for k, v in parts.items()}


def _du(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        try:
            if p.is_file():
                total += p.stat().st_size
        except OSError:
            pass
    return total


async def run_cortex(names: list[str], rig: Rig, texts: list[str], sizes: list[int], qsets: dict[int, list[str]],
                     floors: FloorSource, opts: dict[str, Any], log: Callable[[str], None],
                     proxy_bench: Callable | None = None) -> list[dict[str, Any]]:
    """cortex-fast and cortex over one cortex-mock (ingested once) and one fault proxy."""
    from services.adapters.cortex.backend import CortexBackend

    mock_dir = Path(opts["data_dir"]) / "cortex-mock"
    mock = await rig.start_service("cortex-mock", extra=["--embedder", opts["embedder"], "--data-dir", str(mock_dir)])
    proxy = await rig.start_service("fault-proxy", extra=["--seed", "0"])
    outs = {n: {"backend": n, "reference": False, "unit": UNIT["documents"], "config": {**CORTEX_CONFIG,
                "mode": CORTEX_MODE[n]}, "paths": {"grpc": "gRPC via proxy", "in_process": "in-process direct"},
                "sizes": []} for n in names}
    # the writer's settle waits as long as the step may take (the adapter's own default gives up after 180 s)
    writer = InProcessBackendClient(CortexBackend({"base_url": mock.url, "mode": "fast", **CORTEX_CONFIG,
                                                   "settle_timeout_s": opts["settle_timeout_s"]}))
    clients: dict[str, dict[str, Any]] = {}
    grpcs = []
    try:
        for n in names:
            proc = await rig.start_backend(n, config=dict(CORTEX_CONFIG), embedder=opts["embedder"])
            g = GrpcBackendClient(proc.url, name=n, deadline_s=300.0)
            grpcs.append(g)
            mode = CORTEX_MODE[n]
            clients[n] = {
                "in-process direct": InProcessBackendClient(CortexBackend({"base_url": mock.url, "mode": mode,
                                                                           **CORTEX_CONFIG})),
                "in-process via proxy": InProcessBackendClient(CortexBackend({"base_url": proxy.url, "mode": mode,
                                                                              **CORTEX_CONFIG})),
                "gRPC via proxy": g,
            }
        await writer.reset(NS)
        ps = psutil.Process(mock.pid)
        rss0 = ps.memory_info().rss
        for o in outs.values():
            o["rss_baseline_bytes"] = rss0
            o["rss_of"] = "cortex-mock process"
        have, history = 0, []
        while True:
            n, reason = _plan_sizes(sizes, have, history, opts["max_step_s"])
            if n is None:
                for m in sizes:
                    if m > have and reason:
                        for o in outs.values():
                            o["sizes"].append({"n": m, "status": "not run", "reason": reason})
                break
            log(f"cortex: ingest {have:,} -> {n:,} (extraction-bound)")
            ing = await _ingest(writer, "documents", texts, have, n, min(opts["batch"], 2000),
                                opts["settle_timeout_s"])
            if ing["items_per_s"]:
                history.append((have, n, ing["items_per_s"]))
            have = n
            rss, disk = ps.memory_info().rss, _du(mock_dir)
            qs = qsets[n]
            floor = (floors.matrix(n), floors.query_vectors(qs))
            for name in names:
                log(f"{name}: {len(qs)} queries × {opts.get('passes', MIN_PASSES)} passes at {n:,}")
                load = LoadProbe()
                load.start()
                lat, nonempty, degraded = await time_paths(clients[name], qs, floor,
                                                           passes=opts.get("passes", MIN_PASSES))
                step = summarise_step(n, lat, "gRPC via proxy", "in-process direct")
                step.update({
                    "status": "ok", "load": load.stop(), "ingest": {"in_process_direct": ing},
                    "ingest_items_per_s_grpc": None, "ingest_items_per_s_in_process": ing["items_per_s"],
                    "settled": bool(ing["settled"]),
                    "facts": ing["counts"].get("total_memories"),
                    "rss_bytes": rss, "rss_per_memory_bytes": per_item(rss, rss0, n),
                    "disk_bytes": disk, "disk_per_memory_bytes": disk / n if n else None,
                    # medians of paired differences: the same query on both paths, back to back
                    "proxy_added_p50_ms": paired_difference_ms(flatten(lat["in-process via proxy"]),
                                                               flatten(lat["in-process direct"])),
                    "grpc_hop_p50_ms": paired_difference_ms(flatten(lat["gRPC via proxy"]),
                                                            flatten(lat["in-process via proxy"])),
                    "nonempty_results": nonempty, "degraded": degraded, "queries": len(qs),
                    "floor_vectors": floors.source.get(n, ""),
                })
                outs[name]["sizes"].append(step)
        if proxy_bench is not None:
            outs[names[0]]["proxy_passthrough"] = await proxy_bench(mock.url, proxy.url, qsets[have] if have else [])
    finally:
        await writer.close()
        for cs in clients.values():
            for c in cs.values():
                await c.close()
        for n in names:
            rig.stop(f"backend/{n}")
        rig.stop("fault-proxy")
        rig.stop("cortex-mock")
        shutil.rmtree(mock_dir, ignore_errors=True)
    return [outs[n] for n in names]
