"""Study (not a test): the speed of the OpenClaw port's index and search (`make bench-openclaw`): index build
throughput and search latency at several index sizes, with a numpy brute-force cosine floor measured in the same run
(a performance claim is a ratio measured side by side).

    python -m services.studies.openclaw_port_speed --out DIR [--sizes 1000,10000,100000] [--preset openclaw]
                                                   [--embedder hash|minilm|wordllama] [--queries 50] [--seed 0]

Writes DIR/bench_openclaw.json and DIR/bench_openclaw.md. The chunk text is SYNTHETIC (Zipf-sampled pseudo-words
in Markdown bullet lines); the output says so. Embeddings are computed without the shared cache so the build
figure is the real embedding cost. The `hash` embedder is fast but not a real model.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from services.adapters.base import BackendContext
from services.adapters.openclaw import fts as ftsmod
from services.adapters.openclaw.backend import OpenClawBackend
from services.adapters.openclaw.chunker import chunk_markdown
from services.adapters.openclaw.index import FileInput, IndexStore
from services.adapters.openclaw.presets import candidate_count, resolve_preset

NS = "bench"


def vocabulary(rng: np.random.Generator, n: int = 8000) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = set()
    while len(words) < n:
        words.add("".join(rng.choice(letters, size=int(rng.integers(3, 10)))))
    return sorted(words)


def synthetic_files(n_chunks: int, rng: np.random.Generator, vocab: list[str]) -> tuple[list[FileInput], int]:
    """Daily-log-like Markdown files (160 bullet lines of ~11 words each) until the chunker yields >= n_chunks."""
    probs = 1.0 / np.arange(1, len(vocab) + 1) ** 1.07
    probs /= probs.sum()
    files: list[FileInput] = []
    total = 0
    day = 0
    t0 = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
    while total < n_chunks:
        idx = rng.choice(len(vocab), size=(160, 11), p=probs)
        lines = [f"# note {day}"] + ["- " + " ".join(vocab[i] for i in row) + "." for row in idx]
        content = "\n".join(lines) + "\n"
        total += len(chunk_markdown(content))
        path = f"memory/{day // 28 + 2000:04d}-{day // 28 % 12 + 1:02d}-{day % 28 + 1:02d}.md"
        files.append(FileInput(path, content, t0 + day * 86_400_000))
        day += 1
    return files, total


def pct(xs: list[float]) -> dict[str, float]:
    a = np.asarray(xs) * 1e3
    return {"p50_ms": float(np.percentile(a, 50)), "p95_ms": float(np.percentile(a, 95)),
            "p99_ms": float(np.percentile(a, 99)), "mean_ms": float(a.mean())}


def run_size(n: int, embedder, queries: int, seed: int, preset: str = "openclaw") -> dict:
    rng = np.random.default_rng(seed + n)
    vocab = vocabulary(rng)
    files, _ = synthetic_files(n, rng, vocab)
    p = resolve_preset(preset)
    idx = IndexStore(None, p["chunk_tokens"], p["chunk_overlap_tokens"], p["fts_tokenizer"], p["snippet_max_chars"],
                     p.get("chunker", "v1"), p.get("per_entry_paths", ()), p["mmr_tokenizer"],
                     p.get("memory_roots_only", False))
    t0 = time.perf_counter()
    plan = idx.plan_sync(NS, files, embedder.name)
    t1 = time.perf_counter()
    texts = [c.text for c in plan.new_chunks]
    plan.vectors = embedder.encode(texts)
    t2 = time.perf_counter()
    idx.apply(plan, int(time.time() * 1000))
    t3 = time.perf_counter()
    chunks = len(plan.new_chunks)

    backend = OpenClawBackend({"preset": preset}, BackendContext(embedder_name="hash"))
    backend._embedder = embedder
    backend._index = idx
    # Queries: three words taken from a random chunk, so the AND-joined FTS query has at least one hit.
    qtexts = []
    for _ in range(queries):
        words = ftsmod.LATE_TOKEN_RE.findall(texts[int(rng.integers(len(texts)))])
        words = [w for w in words if len(w) > 2 and w != "note"]
        qtexts.append(" ".join(rng.choice(words, size=3, replace=False)))
    te = time.perf_counter()
    qvecs = embedder.encode(qtexts)
    t_embed_q = (time.perf_counter() - te) / len(qtexts)
    now_ms = int(datetime(2026, 6, 1, tzinfo=UTC).timestamp() * 1000)
    matrix = idx._matrices[NS].matrix
    cand = candidate_count(6, p["candidate_multiplier"], p["candidate_cap"], p.get("candidate_universe", 0))
    full, vec, kw, floor = [], [], [], []
    hits = 0
    for q, v in zip(qtexts, qvecs, strict=True):
        s = time.perf_counter()
        res, _ = backend.search(NS, q, 6, v, now_ms)
        full.append(time.perf_counter() - s)
        hits += bool(res)
        s = time.perf_counter()
        idx.search_vector(NS, v, cand)
        vec.append(time.perf_counter() - s)
        s = time.perf_counter()
        idx.search_keyword(NS, ftsmod.build_fts_query(q), cand, embedder.name,
                           lambda r: ftsmod.bm25_rank_to_score(r, "late"))
        kw.append(time.perf_counter() - s)
        s = time.perf_counter()  # the floor: one matrix-vector product + top-`cand` selection, nothing else
        sc = matrix @ v
        top = np.argpartition(-sc, min(cand, len(sc)) - 1)[:cand]
        top[np.argsort(-sc[top])]
        floor.append(time.perf_counter() - s)
    idx.close()
    return {
        "chunks": chunks, "files": len(files),
        "build": {"chunk_s": t1 - t0, "embed_s": t2 - t1, "sqlite_fts_matrix_s": t3 - t2, "total_s": t3 - t0,
                  "chunks_per_s_total": chunks / (t3 - t0), "chunks_per_s_without_embedding": chunks / ((t1 - t0) + (t3 - t2))},
        "query_embed_ms_mean": t_embed_q * 1e3,
        "preset": preset, "release": p["release"], "candidates": cand,
        "search_full": pct(full), "vector_side": pct(vec), "fts_side": pct(kw),
        "numpy_bruteforce_floor": pct(floor),
        "ratio_full_over_floor_p50": float(np.percentile(full, 50) / np.percentile(floor, 50)),
        "queries": len(qtexts), "queries_with_results": hits,
    }


def markdown(report: dict) -> str:
    lines = [
        "# OpenClaw baseline: index build and search latency",
        "",
        f"Synthetic chunk text (Zipf pseudo-words, Markdown bullets) — not real data. Embedder: "
        f"`{report['embedder']}`{'' if report['embedder_valid_for_reports'] else ' (hash: not a real model)'}. "
        f"Search = the `{report['preset']}` preset ({report['release']}), maxResults 6, candidates "
        f"{report['sizes'][0]['candidates'] if report['sizes'] else '?'} per leg, excluding query embedding; FTS = "
        f"the AND query alone. "
        f"Machine: {report['machine']['cpus']} CPUs, Python {report['machine']['python']}, "
        f"SQLite {report['machine']['sqlite']}, numpy {report['machine']['numpy']}.",
        "",
        "| chunks | build total s | chunks/s (all) | chunks/s (no embed) | search p50 ms | p95 ms | vector p50 ms "
        "| FTS p50 ms | numpy floor p50 ms | full/floor p50 |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["sizes"]:
        b = r["build"]
        lines.append(
            f"| {r['chunks']} | {b['total_s']:.2f} | {b['chunks_per_s_total']:.0f} | {b['chunks_per_s_without_embedding']:.0f} "
            f"| {r['search_full']['p50_ms']:.2f} | {r['search_full']['p95_ms']:.2f} "
            f"| {r['vector_side']['p50_ms']:.2f} | {r['fts_side']['p50_ms']:.2f} "
            f"| {r['numpy_bruteforce_floor']['p50_ms']:.3f} | {r['ratio_full_over_floor_p50']:.1f}× |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m services.studies.openclaw_port_speed",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--sizes", default="1000,10000,100000", help="comma-separated chunk counts")
    ap.add_argument("--embedder", default="hash", choices=["hash", "minilm", "wordllama"])
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--preset", default="openclaw", help="port preset to search with (default: openclaw)")
    args = ap.parse_args(argv)
    p = resolve_preset(args.preset)
    from services.common.embeddings import get_embedder

    embedder = get_embedder(args.embedder, use_cache=False)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    report = {
        "benchmark": "openclaw-index-search", "synthetic_text": True, "created": datetime.now(UTC).isoformat(),
        "embedder": embedder.name, "embedder_valid_for_reports": embedder.valid_for_reports, "seed": args.seed,
        "preset": args.preset, "release": p["release"],
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": sys.version.split()[0],
                    "sqlite": sqlite3.sqlite_version, "numpy": np.__version__},
        "sizes": [],
    }
    for n in sizes:
        r = run_size(n, embedder, args.queries, args.seed, args.preset)
        report["sizes"].append(r)
        print(f"{r['chunks']} chunks: build {r['build']['total_s']:.2f}s, search p50 "
              f"{r['search_full']['p50_ms']:.2f} ms, floor p50 {r['numpy_bruteforce_floor']['p50_ms']:.3f} ms",
              flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_openclaw.json").write_text(json.dumps(report, indent=2))
    (out / "bench_openclaw.md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
