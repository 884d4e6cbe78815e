"""`nextjs-docs`: seed 004's docs-as-memories question — memory-hook vs AGENTS.md on the Next.js docs — as far
as the rig can answer it without a coding agent.

Corpus: the Next.js docs bundled in the `next` npm package (`dist/docs/`, fetched with `npm pack`, see
nextjs_docs_corpus.py; option `version`, or `docs_dir`), ingested as documents into one namespace. Each backend
stands for one of the seed's configurations: raw doc chunks (e.g. `openclaw`), LLM-extracted memories with and
without the LLM rerank (`memory-hook`, `memory-hook-no-rerank`), static context (`full-context`); the
AGENTS.md docs index (Vercel's codemod form) is computed by the suite itself and reported beside them.

Probes are coding tasks in the style of Vercel's Next.js evals (data/nextjs_docs_tasks.py). Per task and
backend: doc hit@k (a retrieved memory cites one of the docs that answer the task, or the injected context
carries it under its path), reciprocal rank of the first citing memory, API coverage (every API name the code needs occurs in the injected context) and the injected context's
size in tokens. For AGENTS.md: the doc hit is whether the index lists an answering doc (the agent must still
open it), the context is the index itself. The evals' pass/fail part (build, lint, EVAL.ts tests) needs a
real coding agent and the Next.js toolchain; the report says so rather than inventing it.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from services.common.tokens import count_tokens
from services.common.types import Document, IngestBatch
from services.coordinator.metrics.latency import latency_summary
from services.coordinator.suites import common as C
from services.coordinator.suites.base import (
    Condition,
    Probe,
    ProbeValues,
    Suite,
    SuiteData,
    condition_backends,
)
from services.coordinator.suites.data.nextjs_docs_tasks import TASKS
from services.coordinator.suites.nextjs_docs_corpus import agents_md_index, fetch_docs, load_docs
from services.coordinator.suites.registry import register

NAMESPACE = "nextjs-docs"
AGENTS_MD = "agents-md-index"
EVAL_NOTE = ("The evals' pass/fail part (agent writes code; build, lint and EVAL.ts tests run) needs a real coding "
             "agent and the Next.js toolchain, which this run does not have: these are retrieval and context-cost "
             "figures only.")


def doc_rank(memories: list[dict[str, Any]], docs: list[str]) -> int | None:
    """1-based rank of the first memory citing an answering doc (by evidence id or source path)."""
    want = set(docs)
    for i, m in enumerate(memories, 1):
        cited = set(m.get("evidence_ids") or []) | {m.get("source") or ""}
        if cited & want:
            return i
    return None


def doc_in_context(rank: int | None, context: str, docs: list[str]) -> bool:
    """A memory cites an answering doc, or the injected context names one by path (static contexts such as
    `full-context` inject whole docs under their path without ranking them)."""
    return rank is not None or any(d in context for d in docs)


def api_coverage(context: str, apis: list[str]) -> bool:
    return all(a in context for a in apis)


METRICS = [("doc_hit", True, "rate"), ("rr", True, "score"), ("api_coverage", True, "rate"),
           ("token_spend", False, "tokens"), ("latency_ms", False, "ms")]
UNITS = {name: unit for name, _, unit in METRICS}  # an all-0/1 rate gets a Wilson interval; rr is a score


@register
class NextjsDocsSuite(Suite):
    name = "nextjs-docs"
    description = ("Seed 004: Next.js docs as memories (chunks, LLM-extracted, ± rerank) vs a static AGENTS.md "
                   "index, over coding tasks; retrieval hit, API coverage and context tokens (no coding agent).")
    retrieval_headline = "doc_hit"
    defaults = {"version": "16.4.6", "docs_dir": None, "sections": "01-app", "max_docs": 0, "top_k": 6,
                "mode": "fast"}

    def __init__(self, options=None, seed: int = 0):
        super().__init__(options, seed)
        if int(self.options["max_docs"]) < 0:
            raise ValueError("nextjs-docs: max_docs must be 0 (every doc) or a positive number of docs")

    def load(self) -> SuiteData:
        o = self.options
        docs_dir = Path(o["docs_dir"]) if o["docs_dir"] else fetch_docs(str(o["version"]))
        sections = [s.strip() for s in str(o["sections"] or "").split(",") if s.strip()]
        docs = load_docs(docs_dir, sections)
        needed = {d for _, _, ds, _ in TASKS for d in ds}
        missing = sorted(needed - set(docs))
        if int(o["max_docs"]) > 0:
            others = sorted(set(docs) - needed)
            keep = needed & set(docs)
            keep |= set(random.Random(self.seed).sample(others, max(0, min(len(others), int(o["max_docs"]) - len(keep)))))
            docs = {p: t for p, t in docs.items() if p in keep}
        index = agents_md_index(list(docs))
        probes = [Probe(id=tid, question=prompt, category=docs_[0].split("/")[2] if docs_[0].count("/") > 2 else "guide",
                        expected=list(apis), namespace=NAMESPACE,
                        meta={"docs": list(docs_), "apis": list(apis),
                              "agents_md_hit": any(d in docs for d in docs_)})
                  for tid, prompt, docs_, apis in TASKS if any(d in docs for d in docs_)]
        batch = IngestBatch(documents=tuple(Document(id=p, text=t, path=p) for p, t in sorted(docs.items())),
                            batch_id="nextjs-docs")
        self._info = {
            "source": f"npm package next@{o['version']} dist/docs" if not o["docs_dir"] else str(docs_dir),
            "docs": len(docs), "docs_chars": sum(len(t) for t in docs.values()), "tasks": len(probes),
            "answering_docs_missing": missing, "agents_md_index_bytes": len(index.encode()),
            "agents_md_index_tokens": count_tokens(index), "note": EVAL_NOTE}
        return SuiteData(corpora={NAMESPACE: batch}, probes=probes, info=self._info)

    def conditions(self, backends: list[str], capabilities: dict[str, dict[str, str]]) -> list[Condition]:
        return C.retrieval_conditions(backends)

    async def run_probe(self, ctx, probe: Probe, condition: Condition) -> dict[str, Any]:
        backend = condition.backends[0]
        rec = await ctx.retrieve(backend, probe)
        return {"retrievals": {backend: rec}, "context_tokens": count_tokens(rec["formatted_context"] or "")}

    def per_probe(self, samples: list[dict[str, Any]]) -> ProbeValues:
        values: dict[str, dict[str, dict[str, float | None]]] = {}
        for cond, rows in C.by_condition(samples).items():
            vals: dict[str, dict[str, float | None]] = {"doc_hit": {}, "rr": {}, "api_coverage": {},
                                                        "token_spend": {}, "latency_ms": {}}
            for r in rows:
                pid, meta = r["probe_id"], r.get("meta") or {}
                rec = C.retrieval_of(r) or {"memories": []}
                rank = doc_rank(rec.get("memories") or [], meta.get("docs") or [])
                ctx = rec.get("formatted_context") or ""
                vals["doc_hit"][pid] = 1.0 if doc_in_context(rank, ctx, meta.get("docs") or []) else 0.0
                vals["rr"][pid] = 1.0 / rank if rank else 0.0
                vals["api_coverage"][pid] = 1.0 if api_coverage(ctx, meta.get("apis") or []) else 0.0
                vals["token_spend"][pid] = float(r.get("context_tokens", 0))
                vals["latency_ms"][pid] = rec.get("latency_ms")
            values[cond] = vals
        return ProbeValues(values, specs={m: (hib, unit) for m, hib, unit in METRICS},
                           backend_of=condition_backends(samples))

    def score(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        info = C.load_info(self) or {}
        out: dict[str, Any] = {"suite": self.name, "conditions": {}, "info": info, "note": EVAL_NOTE}
        per_cond = self.probe_values(samples).values
        static: dict[str, dict[str, float | None]] = {"doc_hit": {}, "rr": {}, "api_coverage": {}, "token_spend": {}}
        for cond, rows in C.by_condition(samples).items():
            vals = per_cond[cond]
            lat = [x for x in vals["latency_ms"].values() if x is not None]
            for r in rows:
                pid, meta = r["probe_id"], r.get("meta") or {}
                static["doc_hit"][pid] = 1.0 if meta.get("agents_md_hit") else 0.0
                static["rr"][pid] = None
                static["api_coverage"][pid] = None
                static["token_spend"][pid] = float(info.get("agents_md_index_tokens") or 0)
            seed = C.stable_seed(self.seed, cond)
            out["conditions"][cond] = {"n": len(rows), "overall": {m: C.summary(v, seed, UNITS[m]) for m, v in vals.items()},
                                       "missed": sorted(p for p, x in vals["doc_hit"].items() if x == 0.0),
                                       "latency": latency_summary(lat)}
        if static["doc_hit"]:
            out["agents_md"] = {"n": len(static["doc_hit"]),
                                "overall": {m: C.summary(v, self.seed, UNITS[m]) for m, v in static.items()}}
        baseline = next((b for b in ("full-context", "openclaw") if b in per_cond), sorted(per_cond)[0] if per_cond
                        else None)
        out["baseline"] = baseline
        out["comparisons"] = C.compare_all(per_cond, baseline, METRICS, seed=self.seed) if baseline else {}
        return out

    def render(self, metrics: dict[str, Any]) -> str:
        m = metrics["conditions"]
        info = metrics.get("info") or {}
        out = ["## Next.js docs as memories (seed 004)", "",
               f"Corpus: {info.get('source', '?')}, {info.get('docs', '?')} docs, {info.get('tasks', '?')} coding "
               "tasks. Doc hit@k = a retrieved memory cites a doc that answers the task, or the injected context carries it under its path; MRR = reciprocal rank of the first citing memory; API "
               "coverage = every API name the code needs occurs in the injected context; ctx tokens = the injected "
               "context.", "", f"**{metrics.get('note', EVAL_NOTE)}**", ""]
        rows = [[c, C.fmt_ci(m[c]["overall"]["doc_hit"], pct=True), C.fmt(m[c]["overall"]["rr"]["mean"]),
                 C.fmt_ci(m[c]["overall"]["api_coverage"], pct=True), C.fmt(m[c]["overall"]["token_spend"]["mean"], 0),
                 C.fmt(m[c]["latency"]["p50_ms"], 1)] for c in sorted(m)]
        if metrics.get("agents_md"):
            a = metrics["agents_md"]["overall"]
            rows.append([f"{AGENTS_MD} (static, computed)", C.fmt_ci(a["doc_hit"], pct=True), "—",
                         "— (agent must open the file)", C.fmt(a["token_spend"]["mean"], 0), "0"])
        out.append(C.md_table(["configuration", "doc hit@k", "MRR", "API coverage", "ctx tokens", "p50 ms"], rows))
        out += ["", "Missed (no answering doc retrieved): "
                + "; ".join(f"{c}: {', '.join(m[c]['missed']) or 'none'}" for c in sorted(m))]
        if metrics.get("comparisons"):
            out.append(C.render_comparisons(metrics["comparisons"]))
        return "\n".join(out)
