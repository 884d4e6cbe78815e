"""`make bench-perf` / `memrig bench-perf`: how each memory system's cost grows with its memory, and what the
rig itself costs, measured side by side in one run (the measurement rules: services/perf/README.md).

    memrig bench-perf [--out DIR] [--sizes 1000,10000,100000] [--million] [--backends a,b,...]
                      [--embedder hash|minilm|wordllama] [--queries 100] [--seed 0] [--max-step-s 300]
                      [--embedders minilm,wordllama,hash] [--no-ann] [--ann-sizes ...] [--keep-data]

Writes DIR (default results/<run-id>-perf): results.json (every figure), report.md (the tables and the pass/miss
of the issue's targets) and PNG plots (log-log latency against memory count; bytes per memory).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from services.common import subcommand
from services.common.errors import InputError
from services.perf import backends as bk
from services.perf import synth
from services.perf.floor import ann_available, ann_measure, best_ann_point, time_floor
from services.perf.passes import MIN_PASSES
from services.perf.render import markdown, plots
from services.perf.stats import (
    added_target,
    ann_target,
    loglog_slope,
    openclaw_target,
    overhead_target,
    percentiles_ms,
)

DEFAULT_BACKENDS = "openclaw,openclaw-2026-02,cortex-fast,cortex,full-context,none"
DEFAULT_SIZES = "1000,10000,100000"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """`memrig bench-perf`'s flags (services/common/subcommand.py)."""
    ap.description = __doc__.split("\n\n")[0]
    ap.formatter_class = argparse.RawDescriptionHelpFormatter
    ap.add_argument("--out", default=None, help="results directory (default results/<run-id>-perf)")
    ap.add_argument("--sizes", default=DEFAULT_SIZES, help=f"memory counts, ascending (default {DEFAULT_SIZES})")
    ap.add_argument("--million", action="store_true", help="also run 1,000,000 memories (opt-in: long)")
    ap.add_argument("--backends", default=DEFAULT_BACKENDS, help=f"comma-separated (default {DEFAULT_BACKENDS})")
    ap.add_argument("--embedder", default="wordllama", choices=["hash", "minilm", "wordllama"],
                    help="embedder of every backend and the floor (default wordllama: a real model fast enough to "
                         "embed 100k memories here; minilm's ingest would take hours, see the embedder table; "
                         "hash is 384-dim like minilm but its vectors are not a model's)")
    ap.add_argument("--queries", type=int, default=100, help="retrieve queries per size and path (per pass)")
    ap.add_argument("--passes", type=int, default=MIN_PASSES,
                    help=f"interleaved timing passes over the queries (>= {MIN_PASSES}; each figure is the median "
                         "of the passes' figures, the floor the minimum)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=10000, help="memories per Ingest call")
    ap.add_argument("--max-step-s", type=float, default=300.0,
                    help="skip (and report) a size whose projected ingest time exceeds this (default 300)")
    ap.add_argument("--settle-timeout-s", type=float, default=3600.0)
    ap.add_argument("--embedders", default="minilm,wordllama,hash", help="embedders to time ('' = none)")
    ap.add_argument("--no-ann", action="store_true", help="skip the usearch HNSW measurement")
    ap.add_argument("--ann-sizes", default=None,
                    help="vector counts for the ANN measurement (default: --sizes plus 300000, so growth past 100k "
                         "is measured)")
    ap.add_argument("--ann-efs", default="16,64,256", help="usearch expansion_search values")
    ap.add_argument("--coordinator-samples", type=int, default=500)
    ap.add_argument("--proxy-rounds", type=int, default=200)
    ap.add_argument("--keep-data", action="store_true", help="keep the backends' data directories")
    ap.add_argument("--openclaw-real-sizes", default=None,
                    help="chunk counts for openclaw-real vs the port through gRPC (default 1000,10000 when --backends "
                         "has the openclaw port, else skipped; '' = skip; skipped with the reason when OpenClaw is "
                         "not installed)")


def check(a: argparse.Namespace) -> None:
    """The flags' rules, and the lists derived from them (size_list, backend_list, ann_size_list)."""
    a.size_list = sorted({int(s) for s in a.sizes.split(",") if s.strip()} | ({1_000_000} if a.million else set()))
    if not a.size_list or any(n < 10 or n % 10 for n in a.size_list):
        raise InputError("--sizes", "positive multiples of 10 (sessions hold 10 messages)")
    a.backend_list = [b.strip() for b in a.backends.split(",") if b.strip()]
    unknown = [b for b in a.backend_list if b not in bk.LOCAL_KIND and b not in bk.CORTEX_MODE]
    if unknown:
        raise InputError("--backends", f"unknown {unknown}; known: "
                                       f"{sorted(list(bk.LOCAL_KIND) + list(bk.CORTEX_MODE))}")
    if a.passes < MIN_PASSES:
        raise InputError("--passes", f"at least {MIN_PASSES} (a figure timed once flips between runs)")
    if a.no_ann:
        a.ann_size_list = []  # nothing is generated, embedded or queried for the ANN sizes
    elif a.ann_sizes is None:
        extra = {300_000} if max(a.size_list) >= 100_000 and max(a.size_list) < 300_000 else set()
        a.ann_size_list = sorted(set(a.size_list) | extra)
    else:
        a.ann_size_list = sorted({int(s) for s in a.ann_sizes.split(",") if s.strip()})


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The flags of `argv`, checked (a broken rule exits 2 with the usage line)."""
    return subcommand.parse(sys.modules[__name__], argv, "memrig bench-perf")


def measured_sizes(a: argparse.Namespace) -> list[int]:
    """Every size that needs memories and a query set: the scale sizes, plus the ANN sizes unless --no-ann."""
    return sorted(set(a.size_list) | set(a.ann_size_list))


def with_load(target: dict[str, Any], step: dict[str, Any] | None) -> dict[str, Any]:
    """The target's verdict, flagged when the step it comes from ran on a loaded machine."""
    load = (step or {}).get("load") or {}
    if load.get("under_load"):
        target["under_load"] = True
        target["note"] = (f"measured under load ({load['load_per_core']} runnable per core > "
                          f"{load['limit_per_core']}): rerun on a quiet machine before trusting this verdict")
    return target


def compute_targets(res: dict[str, Any]) -> dict[str, dict[str, Any]]:
    t: dict[str, dict[str, Any]] = {}
    oc = next((b for b in res["backends"] if b["backend"] == "openclaw"), None)
    step = next((s for s in (oc or {}).get("sizes", []) if s["n"] == 100_000 and s.get("status") == "ok"), None)
    t["OpenClaw gRPC retrieve at 100k chunks ≤ 3× floor + 2 ms (p50)"] = (
        with_load(openclaw_target(step["retrieve"]["gRPC"].get("p50"), step.get("floor_p50_ms")), step)
        if step else {"status": "not measured", "note": "openclaw at 100,000 not in this run"})
    pp = (res.get("overhead") or {}).get("proxy_passthrough") or {}
    x = pp.get("retrieve_fast") or pp.get("health")
    if x and x.get("added_p50_ms") is not None:
        t["fault proxy adds < 1 ms at p50"] = added_target(x["added_p50_ms"])
        t["fault proxy adds < 1 ms at p50"]["note"] = "median of paired differences"
    else:
        t["fault proxy adds < 1 ms at p50"] = {"status": "not measured", "note": "no cortex run"}
    fastest, who, fastest_step = None, "", None
    for b in res["backends"]:
        if b.get("reference") or b.get("status") == "error":
            continue
        for s in b["sizes"]:
            p = s.get("retrieve", {}).get(b["paths"]["grpc"], {}).get("p50") if s.get("status") == "ok" else None
            if p is not None and (fastest is None or p < fastest):
                fastest, who, fastest_step = p, f"{b['backend']} gRPC p50 at {s['n']:,}", s
    co = (res.get("overhead") or {}).get("coordinator")
    ot = overhead_target(co["per_probe_overhead"].get("p50") if co else None, fastest)
    if who:
        ot["note"] = f"fastest = {who}"
    if fastest_step is not None:
        ot = with_load(ot, fastest_step) if (fastest_step.get("load") or {}).get("under_load") else ot
    t["rig per-probe overhead < 5% of the fastest backend's retrieve"] = ot
    ann = res.get("ann") or {}
    past = [a for a in ann.get("sizes", []) if a.get("status") == "ok" and a["n"] >= 100_000 and a.get("best")]
    if len(past) >= 2:
        slope = loglog_slope([a["n"] for a in past], [a["best"]["latency"]["p50"] for a in past])
        t["ANN: sub-linear growth past 100k at recall@10 ≥ 0.95"] = ann_target(
            slope, min(a["best"]["recall_at_10"] for a in past))
    else:
        t["ANN: sub-linear growth past 100k at recall@10 ≥ 0.95"] = {
            "status": "not measured", "note": "needs two ANN sizes ≥ 100,000 (--ann-sizes)"}
    return t


class Bench:
    def __init__(self, args: argparse.Namespace, argv: list[str]):
        from services.coordinator.results import RESULTS_ROOT, new_run_id, provenance

        self.a = args
        self.out = Path(args.out) if args.out else RESULTS_ROOT / new_run_id("perf")
        self.out.mkdir(parents=True, exist_ok=True)
        self.data = self.out / "data"
        self.t0 = time.monotonic()
        cmd = "memrig bench-perf " + " ".join(shlex.quote(x) for x in argv)
        self.res: dict[str, Any] = {
            "benchmark": "bench-perf", "run_id": self.out.name, "command": cmd.strip(), "seed": args.seed,
            "synthetic": True, "embedder": args.embedder, "sizes": args.size_list, "queries": args.queries,
            "load_average_start": [round(x, 2) for x in os.getloadavg()],
            "args": subcommand.flags(args), "backends": [], "overhead": {}, "notes": [],
            **provenance(),
        }

    def log(self, msg: str) -> None:
        print(f"[bench-perf {time.monotonic() - self.t0:7.1f}s] {msg}", file=sys.stderr, flush=True)

    def save(self) -> None:
        (self.out / "results.json").write_text(json.dumps(self.res, indent=2, default=str))

    async def run(self) -> dict[str, Any]:
        from services.launcher import Rig

        a = self.a
        sizes = measured_sizes(a)
        nmax = max(sizes)
        self.log(f"generating {nmax:,} synthetic memories (seed {a.seed})")
        texts = synth.memories(nmax, a.seed)
        qsets = {n: synth.queries(texts, n, a.queries, a.seed) for n in sizes}
        floors = bk.FloorSource(texts, a.embedder)
        self.res["embedder_valid_for_reports"] = floors.embedder.valid_for_reports
        env = dict(os.environ)
        env.update({"MEMRIG_DATA_ROOT": str(self.data / "procs"), "MEMRIG_CACHE_DIR": str(self.data / "cache"),
                    "MEMRIG_EMBEDDER": a.embedder})
        opts = {"embedder": a.embedder, "data_dir": str(self.data), "batch": a.batch, "max_step_s": a.max_step_s,
                "settle_timeout_s": a.settle_timeout_s, "passes": a.passes}
        rig = Rig(self.out / "procs", env=env)
        try:
            for name in [b for b in a.backend_list if b in bk.LOCAL_KIND]:
                try:
                    self.res["backends"].append(await bk.run_local(name, rig, texts, a.size_list, qsets, floors,
                                                                   opts, self.log))
                except Exception as e:  # one backend failing never stops the others
                    self.log(f"{name} failed: {type(e).__name__}: {e}")
                    self.res["backends"].append({"backend": name, "status": "error",
                                                 "reason": f"{type(e).__name__}: {e}"[:500], "sizes": []})
                self.save()
            cortex = [b for b in a.backend_list if b in bk.CORTEX_MODE]
            if cortex:
                from services.perf.overhead import proxy_passthrough

                async def pbench(direct, proxied, qs):
                    self.log("fault proxy passthrough vs direct")
                    return await proxy_passthrough(direct, proxied, qs, a.proxy_rounds)

                try:
                    outs = await bk.run_cortex(cortex, rig, texts, a.size_list, qsets, floors, opts, self.log, pbench)
                    for o in outs:
                        pp = o.pop("proxy_passthrough", None)
                        if pp:
                            self.res["overhead"]["proxy_passthrough"] = pp
                    self.res["backends"].extend(outs)
                except Exception as e:
                    self.log(f"cortex failed: {type(e).__name__}: {e}")
                    for n in cortex:
                        self.res["backends"].append({"backend": n, "status": "error",
                                                     "reason": f"{type(e).__name__}: {e}"[:500], "sizes": []})
                self.save()
        finally:
            rig.stop_all()
        # Keep the backends' order of the command line.
        order = {n: i for i, n in enumerate(a.backend_list)}
        self.res["backends"].sort(key=lambda b: order.get(b["backend"], 99))

        from services.perf.overhead import coordinator_per_probe

        self.log("coordinator per-probe overhead")
        self.res["overhead"]["coordinator"] = await coordinator_per_probe(a.coordinator_samples)
        self.save()

        self.res["embedders"] = []
        for name in [e.strip() for e in a.embedders.split(",") if e.strip()]:
            from services.perf.embedders import embedder_throughput

            self.log(f"embedder {name}")
            self.res["embedders"].append(await asyncio.to_thread(embedder_throughput, name))
        self.save()

        if not a.no_ann:
            self.res["ann"] = self.ann(floors, qsets)
            self.save()
        return self.res

    def ann(self, floors: bk.FloorSource, qsets: dict[int, list[str]]) -> dict[str, Any]:
        a = self.a
        out: dict[str, Any] = {"sizes": [], "note": (
            "usearch HNSW (connectivity 16, expansion_add 64, inner product on unit rows) over the same vectors as "
            "the floor; the backends' own vector search stays exact (the ANN is an option measured beside it). "
            "Recall@10 against the exact numpy top-10 of the same queries.")}
        if not ann_available():
            out["status"] = "usearch not installed (pip install -e '.[ann]')"
            return out
        efs = tuple(int(x) for x in a.ann_efs.split(",") if x.strip())
        for n in a.ann_size_list:
            self.log(f"ANN at {n:,} vectors")
            try:
                mat = floors.matrix(n)
                qv = floors.query_vectors(qsets[n])
                r = ann_measure(mat, qv, efs)
                r["floor_p50_ms"] = percentiles_ms(time_floor(mat, qv, 10)).get("p50")
                r["best"] = best_ann_point(r["points"])
                r["status"] = "ok"
                r["vectors"] = floors.source.get(n, "")
                out["sizes"].append(r)
            except Exception as e:
                out["sizes"].append({"n": n, "status": "error", "reason": f"{type(e).__name__}: {e}"[:300]})
            self.save()
        ok = [s for s in out["sizes"] if s.get("status") == "ok" and s.get("best")]
        out["growth_exponent_best"] = loglog_slope([s["n"] for s in ok], [s["best"]["latency"]["p50"] for s in ok])
        out["growth_exponent_floor"] = loglog_slope([s["n"] for s in ok], [s["floor_p50_ms"] for s in ok])
        return out

    def finish(self) -> None:
        self.res["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
        self.res["duration_s"] = time.monotonic() - self.t0
        self.res["targets"] = compute_targets(self.res)
        not_run = [f"{b['backend']} at {s['n']:,}" for b in self.res["backends"] for s in b.get("sizes", [])
                   if s.get("status") == "not run"]
        if not_run:
            self.res["notes"].append("Not run (projected ingest over the step budget, reasons in the table): "
                                     + ", ".join(not_run))
        self.res["notes"].append("OpenClaw memories are Documents with their own paths (one file, one chunk "
                                 "each): the per-session LLM flush is bypassed; retrieve semantics are unchanged.")
        self.res["plots"] = plots(self.res, self.out)
        self.save()
        (self.out / "report.md").write_text(markdown(self.res))
        if not self.a.keep_data:
            shutil.rmtree(self.data, ignore_errors=True)


def openclaw_real_step(bench: Bench, args: argparse.Namespace) -> dict:
    """openclaw-real vs the port through gRPC (services/studies/openclaw_real_latency.py), same run, same machine."""
    if args.openclaw_real_sizes is None and "openclaw" not in args.backend_list:
        return {"status": "skipped", "reason": "--backends has no openclaw (give --openclaw-real-sizes to run it)"}
    raw = "1000,10000" if args.openclaw_real_sizes is None else args.openclaw_real_sizes
    sizes = [int(x) for x in raw.split(",") if x.strip()]
    if not sizes:
        return {"status": "skipped", "reason": "--openclaw-real-sizes ''"}
    from services.adapters.openclaw_real.node import availability
    from services.studies import openclaw_real_latency as ocr

    a = availability()
    if not a.ok:
        return {"status": "skipped", "reason": a.reason}
    bench.log(f"openclaw-real vs port at {sizes} chunks")
    results = [asyncio.run(ocr.measure(n, args.embedder, min(args.queries, 50), args.passes, args.seed,
                                       bench.out / "openclaw-real")) for n in sizes]
    meta = {"embedder": args.embedder, "queries": min(args.queries, 50), "passes": args.passes}
    return {"status": "ok", "results": results, "markdown": ocr.render(results, meta)}


def run(args: argparse.Namespace) -> int:
    bench = Bench(args, args.argv)
    try:
        asyncio.run(bench.run())
        bench.res["openclaw_real"] = openclaw_real_step(bench, args)
    finally:
        bench.finish()
    print((bench.out / "report.md").read_text())
    print(f"bench-perf: wrote {bench.out}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    return subcommand.main(sys.modules[__name__], argv, "memrig bench-perf")


if __name__ == "__main__":
    raise SystemExit(main())
