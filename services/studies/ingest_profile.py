"""Study (not a test): where cortex's settle and a cold MiniLM embedding spend their time, per namespace (issue 46).

    python -m services.studies.ingest_profile [--suite longmemeval] [--option KEY=VALUE ...] [--part cortex,minilm]
                                               [--passes 3] [--out FILE.json]

The counterpart of services/studies/openclaw_profile.py for the other two slow ingests of the oracle suite, on the
suite's namespaces loaded as the suite loads them, with an EMPTY embedding cache (MEMRIG_CACHE_DIR and the dense
cache point into a temporary directory):

- cortex: cortex-mock and the fault proxy started through services/launcher.Rig, the `cortex` adapter in this
  process against the proxy, each namespace reset, ingested and settled as the runner does. Per namespace: the
  submit and the settle as the adapter saw them; per job, cortex-mock's own record (`GET /v1/jobs/{id}`): the wait
  in its queue (created -> started), its phases (`timings_ms`: extract, embed, lock, snapshot, write, install) and
  the rest of its processing (thread hand-offs); and the settle's overshoot, from the last job's finish to settle's
  return (the poll interval's idle time, and the knowledge polls after the jobs). The first pass is the cold one
  (cortex-mock embeds every fact and question); then `--passes` warm passes compare the adapter's settle poll, the
  fixed `settle_poll_ms` against the doubling one from `settle_poll_min_ms`, on each namespace in turn (order
  alternating), as a ratio of medians within this run.
- minilm: the dense backend's texts (one per message, its `dense_template`) embedded per namespace as `dense`
  embeds them (one call of the namespace's distinct texts), the model's forward timed per batch: texts, padded
  length, real tokens, padding waste, seconds, torch threads; time per text by padded length. Then `--passes`
  passes of the same texts under each setting (batch size x torch threads), interleaved per namespace, each
  setting's vectors checked against the first's (cosine). `--texts cortex`: cortex-mock's model calls instead (per
  capture window, the extracted facts, then their questions).

Prints tables and writes everything to --out (JSON). Seconds depend on the host and its load; compare the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

PHASES = ("extract", "embed", "lock", "snapshot", "write", "install")


def load_corpora(suite: str, options: dict[str, Any]) -> dict[str, Any]:
    from services.coordinator.suites.registry import get_suite

    return get_suite(suite)(options, seed=0).load().corpora


# -- cortex ------------------------------------------------------------------------------------------------------
def job_spans(jobs: list[dict[str, Any]], t_submit: float, t_end: float) -> dict[str, float]:
    """One namespace's seconds from its jobs' records (epoch times, cortex-mock's clock) and the adapter's submit
    start and settle end (the same host's epoch clock): the queue wait and each phase summed over the jobs, `other`
    the processing outside the phases, `busy` the time from the first submit to the last job's finish, `overshoot`
    from that finish to settle's return."""
    out = {"jobs": float(len(jobs)), "queue": 0.0, **{p: 0.0 for p in PHASES}, "other": 0.0}
    last = t_submit
    for j in jobs:
        out["queue"] += max(0.0, (j.get("started_at") or 0) - (j.get("created_at") or 0))
        spans = (j.get("result") or {}).get("timings_ms") or {}
        for p in PHASES:
            out[p] += spans.get(p, 0.0) / 1000.0
        out["other"] += max(0.0, ((j.get("processing_ms") or 0.0) - sum(spans.values())) / 1000.0)
        last = max(last, j.get("finished_at") or last)
    out["busy"] = last - t_submit
    out["overshoot"] = max(0.0, t_end - last)
    return out


class JobLog:
    """Wraps a CortexClient's get_job so every finished job's record is kept, and counts requests by label."""

    def __init__(self, client) -> None:
        self.done: dict[str, dict[str, Any]] = {}
        self.calls: collections.Counter[str] = collections.Counter()
        orig_get, orig_call = client.get_job, client.call

        async def get_job(job_id, timeout_ms, api_key=None):
            res = await orig_get(job_id, timeout_ms, api_key)
            if isinstance(res, dict) and res.get("status") in ("completed", "failed"):
                self.done[job_id] = res
            return res

        async def call(method, path, label, *a, **kw):
            self.calls[label] += 1
            return await orig_call(method, path, label, *a, **kw)

        client.get_job, client.call = get_job, call


async def cortex_namespace(backend, log: JobLog, ns: str, batch) -> dict[str, Any]:
    await backend.reset(ns)
    before = set(backend.jobs[ns])
    calls0 = dict(log.calls)
    t0, w0 = time.perf_counter(), time.time()
    await backend.ingest(ns, batch)
    t1 = time.perf_counter()
    submitted = [j for j in backend.jobs[ns] if j not in before]
    settled = await backend.settle(ns, 180.0)
    t2, w2 = time.perf_counter(), time.time()
    rec = {"messages": batch.message_count, "ingest_s": t1 - t0, "settle_s": t2 - t1, "settled": settled.settled,
           "polls": {k: v - calls0.get(k, 0) for k, v in log.calls.items() if v != calls0.get(k, 0)}}
    rec.update(job_spans([log.done[j] for j in submitted if j in log.done], w0, w2))
    return rec


async def run_cortex(corpora: dict[str, Any], tmp: Path, passes: int, poll_ms: float, poll_min_ms: float
                     ) -> dict[str, Any]:
    from services.adapters.cortex.backend import CortexBackend
    from services.launcher import Rig

    env = dict(os.environ, MEMRIG_CACHE_DIR=str(tmp / "cache"))  # cortex-mock's MiniLM cache: empty
    env.pop("MEMRIG_EMBEDDER", None)
    async with Rig(tmp / "procs", env=env) as rig:
        proxy = await rig.start_service("fault-proxy")
        backend = CortexBackend({"base_url": proxy.url, "mode": "full"})
        await backend.start()
        log = JobLog(backend.client)
        try:
            cold = {}
            for ns, batch in corpora.items():
                cold[ns] = await cortex_namespace(backend, log, ns, batch)
            settings = {"fixed": (poll_ms, poll_ms), "doubling": (poll_min_ms, poll_ms)}
            warm: dict[str, list[dict[str, float]]] = {k: [] for k in settings}
            for p in range(passes):
                tot = {k: collections.Counter() for k in settings}
                for i, (ns, batch) in enumerate(corpora.items()):
                    order = list(settings) if (i + p) % 2 == 0 else list(settings)[::-1]
                    for k in order:
                        backend.config["settle_poll_min_ms"], backend.config["settle_poll_ms"] = settings[k]
                        r = await cortex_namespace(backend, log, ns, batch)
                        tot[k].update({"ingest_s": r["ingest_s"], "settle_s": r["settle_s"],
                                       "overshoot": r["overshoot"], "busy": r["busy"],
                                       "job_polls": r["polls"].get("job status", 0),
                                       "knowledge_polls": r["polls"].get("knowledge", 0)})
                for k in settings:
                    warm[k].append(dict(tot[k]))
            await backend.reset(next(iter(corpora)))
        finally:
            await backend.close()
    return {"cold": cold, "warm": warm, "settings": {k: {"settle_poll_min_ms": a, "settle_poll_ms": b}
                                                      for k, (a, b) in settings.items()}}


# -- minilm ------------------------------------------------------------------------------------------------------
def dense_texts(corpora: dict[str, Any]) -> dict[str, list[str]]:
    """Per namespace, the distinct texts `dense` embeds at ingest: its documents (documents_of a store holding the
    batch) rendered with its dense_template, sorted as its _embed_reusing sorts them."""
    from services.adapters.base import SessionStore
    from services.adapters.ir_baselines.backend import IRBaselineBackend
    from services.adapters.ir_baselines.documents import documents_of, render

    cfg = IRBaselineBackend.defaults
    out = {}
    for ns, batch in corpora.items():
        st = SessionStore()
        st.apply(ns, batch)
        out[ns] = sorted({render(cfg["dense_template"], d, cfg["date_format"]) for d in documents_of(st, ns)})
    return out


def cortex_texts(corpora: dict[str, Any]) -> dict[str, list[list[str]]]:
    """Per namespace, the model calls cortex-mock makes for it: per capture window the adapter sends, the facts'
    cores, then their questions (services/cortex_mock/ingest.py, apply_ingest), from the deterministic extractor."""
    from services.adapters.cortex.backend import CortexBackend
    from services.cortex_mock.extract import SourceMessage, extract_messages

    b = CortexBackend({"base_url": "http://127.0.0.1:9"})
    out: dict[str, list[list[str]]] = {}
    for ns, batch in corpora.items():
        calls: list[list[str]] = []
        for s in batch.sessions:
            for body in b.session_bodies(ns, s):
                facts = extract_messages([SourceMessage(m["role"], m["content"], s.started_at, m["id"])
                                          for m in body["messages"]])
                facts.sort(key=lambda f: f.occurred_at)
                calls += [c for c in ([f.core for f in facts], [q for f in facts for q in f.questions]) if c]
        out[ns] = calls
    return out


class BatchLog:
    """Times the model's forward per batch (sentence-transformers calls it once per batch of a sorted call)."""

    def __init__(self, model) -> None:
        import torch

        self.rows: list[dict[str, float]] = []
        orig = model.forward

        def forward(features, *a, **kw):
            mask = features["attention_mask"]
            t0 = time.perf_counter()
            out = orig(features, *a, **kw)
            n, length = mask.shape
            real = int(mask.sum())
            self.rows.append({"texts": n, "padded_len": length, "tokens": real, "padding": 1 - real / (n * length),
                              "s": time.perf_counter() - t0, "threads": torch.get_num_threads()})
            return out

        model.forward = forward


def by_length(rows: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    buckets: dict[str, list[dict[str, float]]] = collections.defaultdict(list)
    for r in rows:
        lo = next(b for b in (256, 128, 64, 32, 0) if r["padded_len"] > b or b == 0)
        buckets[f">{lo}" if lo else "<=32"].append(r)
    return {k: {"batches": len(v), "texts": sum(r["texts"] for r in v),
                "ms_per_text": round(1000 * sum(r["s"] for r in v) / max(1, sum(r["texts"] for r in v)), 1)}
            for k, v in sorted(buckets.items(), key=lambda kv: -len(kv[1]))}


def run_minilm(corpora: dict[str, Any], tmp: Path, passes: int, settings: list[tuple[int, int]],
               cold_batch: int = 0, which: str = "dense") -> dict[str, Any]:
    import torch

    from services.common.embeddings import EmbeddingCache, MiniLMEmbedder

    calls = ({ns: [ts] for ns, ts in dense_texts(corpora).items()} if which == "dense" else cortex_texts(corpora))
    emb = MiniLMEmbedder(EmbeddingCache(tmp / "dense-cache.sqlite"))  # empty: every text is embedded
    if cold_batch:
        emb.batch_size = cold_batch
    log = BatchLog(emb._model)
    cold: dict[str, Any] = {}
    for ns, cs in calls.items():
        start, t0 = len(log.rows), time.perf_counter()
        for ts in cs:
            emb.encode(ts)
        rows = log.rows[start:]
        cold[ns] = {"texts": sum(map(len, cs)), "calls": len(cs), "s": time.perf_counter() - t0, "batches": len(rows),
                    "tokens": sum(r["tokens"] for r in rows), "padded": sum(r["texts"] * r["padded_len"] for r in rows)}
    cold_rows = list(log.rows)
    # the same texts, no cache, under each (batch size, threads): interleaved per namespace, order rotating
    model, ref = emb._model, {}
    totals = {s: [] for s in settings}
    worst = {s: 1.0 for s in settings}
    threads0 = torch.get_num_threads()
    try:
        for p in range(passes):
            tot = collections.Counter()
            for i, ts in enumerate(ts for cs in calls.values() for ts in cs):
                k = (i + p) % len(settings)
                for bs, th in settings[k:] + settings[:k]:
                    torch.set_num_threads(th)
                    t0 = time.perf_counter()
                    v = model.encode(ts, batch_size=bs, convert_to_numpy=True, show_progress_bar=False,
                                     normalize_embeddings=True)
                    tot[(bs, th)] += time.perf_counter() - t0
                    if i not in ref:
                        ref[i] = v if (bs, th) == settings[0] else None
                    if ref.get(i) is not None:
                        worst[(bs, th)] = min(worst[(bs, th)], float(np.min(np.sum(v * ref[i], axis=1))))
            for s in settings:
                totals[s].append(tot[s])
    finally:
        torch.set_num_threads(threads0)
    return {"texts_of": which, "batch_size": emb.batch_size, "cold": cold, "cold_batches": cold_rows, "by_length": by_length(cold_rows),
            "settings": {f"batch={bs} threads={th}": {"s": totals[(bs, th)], "min_cosine_vs_first": worst[(bs, th)]}
                         for bs, th in settings}}


# -- report ------------------------------------------------------------------------------------------------------
def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0


def print_cortex(res: dict[str, Any]) -> None:
    cold = res["cold"]
    msgs = sum(r["messages"] for r in cold.values())
    tot = collections.Counter()
    for r in cold.values():
        tot.update({k: v for k, v in r.items() if isinstance(v, float)})
    wall = tot["ingest_s"] + tot["settle_s"]
    print(f"cortex, cold cache: {len(cold)} namespaces, {msgs} messages, {int(tot['jobs'])} jobs; ingest+settle "
          f"{wall:.1f} s ({1000 * wall / max(msgs, 1):.1f} ms/msg); submit {tot['ingest_s']:.1f} s, settle "
          f"{tot['settle_s']:.1f} s")
    print(f"  first submit -> last job done {tot['busy']:.1f} s; settle overshoot after it {tot['overshoot']:.1f} s "
          f"({tot['overshoot'] / len(cold) * 1000:.0f} ms a namespace)")
    print("  inside the jobs (summed; two workers overlap):", ", ".join(
        f"{k} {tot[k]:.1f} s" for k in ("queue", *PHASES, "other")))
    for k, passes in res["warm"].items():
        s = res["settings"][k]
        print(f"  warm, settle poll {k} ({s['settle_poll_min_ms']:g}->{s['settle_poll_ms']:g} ms): ingest+settle "
              f"median {med([p['ingest_s'] + p['settle_s'] for p in passes]):.2f} s, overshoot "
              f"{med([p['overshoot'] for p in passes]):.2f} s, job polls {med([p['job_polls'] for p in passes]):.0f}, "
              f"knowledge polls {med([p['knowledge_polls'] for p in passes]):.0f}")
    if set(res["warm"]) >= {"fixed", "doubling"}:
        a = [p["ingest_s"] + p["settle_s"] for p in res["warm"]["fixed"]]
        b = [p["ingest_s"] + p["settle_s"] for p in res["warm"]["doubling"]]
        print(f"  doubling / fixed (ingest+settle, medians of {len(a)} passes): {med(b) / med(a):.2f}")


def print_minilm(res: dict[str, Any]) -> None:
    cold, rows = res["cold"], res["cold_batches"]
    n = sum(r["texts"] for r in cold.values())
    s = sum(r["s"] for r in cold.values())
    tokens, padded = sum(r["tokens"] for r in cold.values()), sum(r["padded"] for r in cold.values())
    thr = sorted({r["threads"] for r in rows})
    print(f"minilm ({res['texts_of']}'s texts, batch {res['batch_size']}), cold cache: {n} texts in {len(cold)} namespaces, {s:.1f} s "
          f"({1000 * s / max(n, 1):.1f} ms a text); {len(rows)} batches, {tokens / max(len(rows), 1):.0f} tokens a "
          f"batch, padding {1 - tokens / max(padded, 1):.0%} of the positions computed; torch threads {thr}")
    print("  by padded length:", "; ".join(f"{k}: {v['batches']} batches, {v['texts']} texts, {v['ms_per_text']} "
                                           "ms a text" for k, v in res["by_length"].items()))
    sets = res["settings"]
    base = med(next(iter(sets.values()))["s"])
    for k, v in sets.items():
        print(f"  {k}: median {med(v['s']):.1f} s ({med(v['s']) / base:.2f} of the first), min cosine vs the first "
              f"{v['min_cosine_vs_first']:.6f}")


def main(argv: list[str] | None = None) -> int:
    from services.coordinator.plan import parse_options

    ap = argparse.ArgumentParser(prog="python -m services.studies.ingest_profile", description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default="longmemeval")
    ap.add_argument("--option", action="append", default=[], help="suite option KEY=VALUE (repeatable)")
    ap.add_argument("--part", default="cortex,minilm", help="cortex, minilm or both (comma-separated)")
    ap.add_argument("--passes", type=int, default=3, help="passes of each compared setting (medians)")
    ap.add_argument("--namespaces", type=int, default=0, help="only the first N namespaces (0 = all)")
    ap.add_argument("--poll-ms", type=float, default=200.0, help="the adapter's settle_poll_ms (the fixed interval)")
    ap.add_argument("--poll-min-ms", type=float, default=10.0, help="the doubling poll's first interval")
    ap.add_argument("--settings", default="64x2,64x1,16x1,16x2",
                    help="MiniLM settings compared, BATCHxTHREADS, comma-separated; the first is the reference")
    ap.add_argument("--cold-batch", type=int, default=0,
                    help="MiniLM batch size of the cold profile (0 = the embedder's own, MiniLMEmbedder.BATCH_SIZE)")
    ap.add_argument("--texts", default="dense", choices=("dense", "cortex"),
                    help="minilm: dense's texts (a call per namespace) or cortex-mock's (facts and questions per job)")
    ap.add_argument("--out", help="write the figures here (JSON)")
    args = ap.parse_args(argv)
    parts = {p.strip() for p in args.part.split(",") if p.strip()}
    if not parts <= {"cortex", "minilm"} or not parts:
        ap.error(f"--part: expected cortex and/or minilm, got {args.part!r}")
    if args.passes < 1:
        ap.error("--passes must be >= 1")
    try:
        settings = [(int(b), int(t)) for b, t in (s.split("x") for s in args.settings.split(","))]
    except ValueError:
        ap.error(f"--settings: expected BATCHxTHREADS,..., got {args.settings!r}")
    corpora = load_corpora(args.suite, parse_options(args.option))
    if args.namespaces:
        corpora = dict(list(corpora.items())[: args.namespaces])
    res: dict[str, Any] = {"suite": args.suite, "namespaces": len(corpora), "passes": args.passes}
    with tempfile.TemporaryDirectory(prefix="memrig-ingprof-") as tmp:
        if "cortex" in parts:
            res["cortex"] = asyncio.run(run_cortex(corpora, Path(tmp), args.passes, args.poll_ms, args.poll_min_ms))
            print_cortex(res["cortex"])
        if "minilm" in parts:
            res["minilm"] = run_minilm(corpora, Path(tmp), args.passes, settings, args.cold_batch, args.texts)
            print_minilm(res["minilm"])
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
