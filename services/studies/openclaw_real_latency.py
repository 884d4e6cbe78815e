"""Benchmark (not a test): openclaw-real's retrieve latency through gRPC beside the port's, in one run.

    python -m services.studies.openclaw_real_latency --out DIR [--sizes 1000,10000] [--embedder wordllama]
                                                   [--queries 50] [--passes 3] [--seed 0]

Both backends run as adapter processes, as `memrig up` starts them, and get the same SYNTHETIC daily-log files
(Zipf-sampled pseudo-words, the port bench's generator; the output says so) through Ingest. Then every query is
retrieved from both, alternating which goes first, for `--passes` passes. Reported per size:
- client p50/p95: Retrieve through gRPC as the coordinator sees it;
- OpenClaw's own search p50: the time inside `manager.search` (the sidecar's `searchMs`, which includes OpenClaw's
  query-embedding request);
- sidecar overhead p50: the median over calls of (client time − OpenClaw's search time) — everything memrig adds
  around OpenClaw (gRPC, the Python adapter, the Unix-socket hop, JSON). Target (issue 12): ≤ 2 ms.
The chunk counts are what each index reports (OpenClaw chunks the same files itself).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from services.common.percentiles import percentile
from services.common.types import Document, IngestBatch, RetrieveQuery
from services.studies.openclaw_port_speed import synthetic_files, vocabulary

NS = "bench"
REF = datetime(2026, 6, 1, tzinfo=UTC)
TARGET_OVERHEAD_MS = 2.0


pct = percentile  # services/common/percentiles.py


def documents(n_chunks: int, seed: int) -> tuple[list[Document], list[str]]:
    rng = np.random.default_rng(seed)
    vocab = vocabulary(rng)
    files, _ = synthetic_files(n_chunks, rng, vocab)
    docs = [Document(f"f{i}", f.content.rstrip("\n"), datetime.fromtimestamp(f.mtime_ms / 1000, UTC), f.path)
            for i, f in enumerate(files)]
    return docs, vocab


def queries(vocab: list[str], n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed + 1)
    # Frequent-ish words (rank 50-2000 of the Zipf vocabulary), 3 to a query: most queries match something.
    return [" ".join(vocab[int(i)] for i in rng.integers(50, 2000, size=3)) for _ in range(n)]


async def measure(size: int, embedder: str, n_queries: int, passes: int, seed: int, out: Path) -> dict:
    from services.adapters.client import GrpcBackendClient
    from services.launcher import Rig

    docs, vocab = documents(size, seed)
    qs = queries(vocab, n_queries, seed)
    rig = Rig(out / f"procs-{size}")
    clients: dict[str, GrpcBackendClient] = {}
    try:
        await rig.ensure_llm()
        for name in ("openclaw", "openclaw-real"):
            p = await rig.start_backend(name, config={"embedder": embedder})
            clients[name] = GrpcBackendClient(p.url, name=name)
        chunks: dict[str, int] = {}
        ingest_s: dict[str, float] = {}
        for name, c in clients.items():
            t0 = time.perf_counter()
            for i in range(0, len(docs), 150):  # keep each Ingest well under gRPC's 4 MiB message limit
                await c.ingest(NS, IngestBatch(documents=tuple(docs[i:i + 150])))
            st = await c.settle(NS, 600)
            ingest_s[name] = time.perf_counter() - t0
            chunks[name] = int(st.counts.get("chunks", 0))
        lat: dict[str, list[float]] = {n: [] for n in clients}
        oc_ms: list[float] = []
        overhead: list[float] = []
        for p in range(passes):
            for i, q in enumerate(qs):
                order = list(clients) if (i + p) % 2 == 0 else list(reversed(clients))
                for name in order:
                    t0 = time.perf_counter_ns()
                    res, _ = await clients[name].retrieve(NS, RetrieveQuery(q, 6, reference_time=REF))
                    ms = (time.perf_counter_ns() - t0) / 1e6
                    lat[name].append(ms)
                    if name == "openclaw-real":
                        d = next((ch for ch in res.channels if ch.channel == "openclaw"), None)
                        if d is not None:
                            oc_ms.append(d.duration_ns / 1e6)
                            overhead.append(ms - d.duration_ns / 1e6)
        return {
            "size_requested": size, "files": len(docs), "chunks": chunks, "ingest_s": ingest_s,
            "calls_per_backend": passes * len(qs),
            "port": {"p50_ms": pct(lat["openclaw"], 50), "p95_ms": pct(lat["openclaw"], 95)},
            "real": {"p50_ms": pct(lat["openclaw-real"], 50), "p95_ms": pct(lat["openclaw-real"], 95),
                     "openclaw_search_p50_ms": pct(oc_ms, 50), "openclaw_search_p95_ms": pct(oc_ms, 95),
                     "sidecar_overhead_p50_ms": pct(overhead, 50)},
        }
    finally:
        for c in clients.values():
            await c.close()
        rig.stop_all()


def render(results: list[dict], meta: dict) -> str:
    def f(v):
        return "—" if v is None else f"{v:.2f}"

    lines = ["# openclaw-real vs port: retrieve latency through gRPC", "",
             f"Embedder {meta['embedder']}; {meta['queries']} queries × {meta['passes']} passes, alternating order; "
             "SYNTHETIC daily-log files (Zipf pseudo-words). Sidecar overhead = median of (client − OpenClaw's own "
             f"search time) per call; target ≤ {TARGET_OVERHEAD_MS:.0f} ms.", "",
             "| chunks (port / real) | port p50 | port p95 | real p50 | real p95 | OpenClaw search p50 | "
             "sidecar overhead p50 | verdict |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        ov = r["real"]["sidecar_overhead_p50_ms"]
        verdict = "—" if ov is None else ("PASS" if ov <= TARGET_OVERHEAD_MS else "MISS")
        lines.append(f"| {r['chunks'].get('openclaw')} / {r['chunks'].get('openclaw-real')} | "
                     f"{f(r['port']['p50_ms'])} | {f(r['port']['p95_ms'])} | {f(r['real']['p50_ms'])} | "
                     f"{f(r['real']['p95_ms'])} | {f(r['real']['openclaw_search_p50_ms'])} | {f(ov)} | {verdict} |")
    lines += ["", f"Machine: {os.cpu_count()} cores; load average at the end {os.getloadavg()[0]:.2f} "
              "(figures taken under load are not comparable across runs)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m services.studies.openclaw_real_latency",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="results/bench-openclaw-real")
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--embedder", default="wordllama", help="wordllama (default, fast), minilm, hash (not a model)")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    from services.adapters.openclaw_real.node import availability

    a = availability()
    if not a.ok:
        print(f"bench: openclaw-real unavailable: {a.reason}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    results = [asyncio.run(measure(s, args.embedder, args.queries, args.passes, args.seed, out)) for s in sizes]
    meta = {"embedder": args.embedder, "queries": args.queries, "passes": args.passes, "seed": args.seed,
            "synthetic": True, "openclaw": a.version, "node": a.runtime_version}
    (out / "bench_openclaw_real.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    (out / "bench_openclaw_real.md").write_text(render(results, meta))
    print((out / "bench_openclaw_real.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
