"""`memrig fidelity quaid`: how closely memrig's re-implementation `quaid` reproduces Quaid itself (`quaid-real`).

One store: each suite's corpora go through quaid-real (the rig's extraction through the llm-mock, then Quaid's own
`store()`: its dedup, sqlite-vec index and FTS5), and the re-implementation adopts exactly the nodes Quaid stored
(`QuaidBackend.adopt_nodes`: ids, texts, Quaid's embeddings, timestamps, confirmation counts), so any difference is
recall logic. Every probe is then recalled on both, in the same order (both track accesses, which later recalls
score), with the suite's retrieve top-k as the limit.

Per query (`fidelity.jsonl`) and per workspace (`fidelity.md`, `fidelity.json`): overlap |P ∩ R| / max(|P|, |R|)
over node ids (1 when both are empty), same top-1, same order, the largest |port − real| score over shared nodes
(Quaid rounds scores to 3 places; the port too), empty rates. Target: overlap ≥ 0.95 and same top-1 ≥ 0.95.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from services.common.types import RetrieveQuery
from services.studies.paired import overlap

TARGET = 0.95


@dataclass
class Row:
    workspace: str
    probe: str
    query: str
    port: list[tuple[str, float]]
    real: list[tuple[str, float]]
    overlap: float
    same_top1: bool
    same_order: bool
    max_score_diff: float | None


def compare(workspace: str, probe: str, query: str, port: list[tuple[str, float]],
            real: list[tuple[str, float]]) -> Row:
    p, r = [i for i, _ in port], [i for i, _ in real]
    agree = overlap(p, r)
    rs = dict(real)
    diffs = [abs(s - rs[i]) for i, s in port if i in rs]
    return Row(workspace, probe, query, port, real, agree, p[:1] == r[:1], p == r, max(diffs) if diffs else None)


@dataclass
class Summary:
    workspace: str
    queries: int
    overlap: float
    same_top1: float
    same_order: float
    max_score_diff: float | None
    empty_port: float
    empty_real: float

    @property
    def passes(self) -> bool:
        return self.overlap >= TARGET and self.same_top1 >= TARGET


def summarise(workspace: str, rows: list[Row]) -> Summary:
    n = len(rows) or 1
    diffs = [r.max_score_diff for r in rows if r.max_score_diff is not None]
    return Summary(workspace, len(rows), sum(r.overlap for r in rows) / n, sum(r.same_top1 for r in rows) / n,
                   sum(r.same_order for r in rows) / n, max(diffs) if diffs else None,
                   sum(not r.port for r in rows) / n, sum(not r.real for r in rows) / n)


def render(summaries: list[Summary], meta: dict[str, Any]) -> str:
    lines = [f"# Fidelity: `quaid` (re-implementation) vs Quaid {meta['quaid']} (`quaid-real`)", "",
             f"Embedder: {meta['embedder']}; one store (the re-implementation adopts the nodes Quaid stored); "
             f"the suite's retrieve top-k as recall's limit; LLM stages off on both (offline). Targets: overlap and "
             f"same top-1 ≥ {TARGET:.2f}.", "",
             "| workspace | queries | top-k | overlap | same top-1 | same order | max score diff | empty (port) | "
             "empty (real) | verdict |", "|---|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        msd = "n/a" if s.max_score_diff is None else f"{s.max_score_diff:.3f}"
        lines.append(f"| {s.workspace} | {s.queries} | {meta['top_k'].get(s.workspace, '?')} | {s.overlap:.3f} | "
                     f"{s.same_top1:.3f} | {s.same_order:.3f} | {msd} | {s.empty_port:.1%} | {s.empty_real:.1%} | "
                     f"{'PASS' if s.passes else 'FAIL'} |")
    for name, reason in meta.get("skipped", {}).items():
        lines.append(f"\nSkipped {name}: {reason}")
    return "\n".join(lines + ["", "Per-query lists: `fidelity.jsonl`."]) + "\n"


async def run(suites: list[str], embedder: str, out: Path, options: dict[str, dict[str, Any]],
              seed: int = 0) -> list[Summary]:
    from services.adapters.base import BackendContext
    from services.adapters.quaid.backend import QuaidBackend
    from services.adapters.quaid_real.backend import QuaidRealBackend, namespace_key
    from services.adapters.quaid_real.source import QUAID_COMMIT, quaid_version
    from services.launcher import Rig
    from services.studies.paired import load_suite

    out.mkdir(parents=True, exist_ok=True)
    rig = Rig(out / "procs")
    summaries: list[Summary] = []
    meta: dict[str, Any] = {"quaid": f"{quaid_version()} @ {QUAID_COMMIT[:7]}", "embedder": embedder,
                            "suites": suites, "seed": seed, "options": options, "top_k": {}, "skipped": {}}
    real = port = None
    try:
        llm_url = await rig.ensure_llm()
        ctx = dict(embedder_name=embedder, data_dir=out / "data", llm_base_url=llm_url)
        real = QuaidRealBackend({}, BackendContext(**ctx))
        port = QuaidBackend({}, BackendContext(**ctx))
        await real.start()
        await port.start()
        meta["embedder"] = real.describe_config()["embedding_model"]
        with open(out / "fidelity.jsonl", "w") as jf:
            for name in suites:
                suite, data = load_suite(name, options.get(name, {}), seed)
                if suite is None:
                    meta["skipped"][name] = data
                    continue
                t0 = time.perf_counter()
                k = suite.retrieve_top_k("quaid")
                meta["top_k"][name] = k
                for ns, batch in data.corpora.items():
                    key = f"{name}/{ns}"
                    await real.ingest(key, batch)
                    nodes = (await real.call("nodes", ns=namespace_key(key)))["nodes"]
                    port.adopt_nodes(key, nodes, real.evidence.get(key, {}), batch)
                rows = []
                for p in data.probes:
                    key = f"{name}/{p.namespace}"
                    q = RetrieveQuery(p.question, k, reference_time=p.reference_time)
                    rr = (await real.retrieve(key, q)).memories
                    rp = (await port.retrieve(key, q)).memories
                    row = compare(name, p.id, p.question, [(m.id, round(m.score, 3)) for m in rp],
                                  [(m.id, round(m.score, 3)) for m in rr])
                    rows.append(row)
                    jf.write(json.dumps(asdict(row)) + "\n")
                s = summarise(name, rows)
                summaries.append(s)
                print(f"fidelity quaid {name}: {s.queries} queries, overlap {s.overlap:.3f}, same top-1 "
                      f"{s.same_top1:.3f}, empty port {s.empty_port:.1%} / real {s.empty_real:.1%} "
                      f"({time.perf_counter() - t0:.0f} s)", flush=True)
    finally:
        for b in (port, real):
            if b is not None:
                await b.close()
                await b.context.close()
        rig.stop_all()
    (out / "fidelity.json").write_text(json.dumps(
        {"meta": meta, "workspaces": [{**asdict(s), "passes": s.passes} for s in summaries]}, indent=2))
    (out / "fidelity.md").write_text(render(summaries, meta))
    return summaries
