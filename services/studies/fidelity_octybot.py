"""`memrig fidelity octybot`: memrig's Octybot re-implementation (`octybot`, plan `safety-nets`) held to Octybot
9d0d070 itself (`octybot-real`), query by query, on the same store.

Same store: each suite's corpora go through octybot-real once (Octybot's Stop hook, its extraction answered by the
rig's LLM), and the port adopts the nodes that produced, ids, types, contents, scopes and vectors as Octybot's database
holds them (`OctybotBackend.adopt_nodes`), so a difference is retrieval logic, not extraction. Every probe is then
asked of both: the real through Octybot's UserPromptSubmit hook (each query on a copy of the database), the port in
process.

Per query (`fidelity.jsonl`) and per suite (`fidelity.json`, `fidelity.md`), over record texts (the hook prints
contents, not ids; a content stored twice is one record):
- top-k agreement: |P ∩ R| / max(|P|, |R|) over the first k records of each (k = the suite's retrieve top-k), 1
  when both are empty; all-records agreement: the same over everything each selects (the whole `<memory>` block);
- same top-1; max score difference over shared records (the real side's scores are recomputed from its own database
  vectors by Octybot's scoring rules, as its hook prints none; a difference means the two scorings disagree);
- cause of a disagreement: `selection` (one side empty), `score` (a shared record scores differently), `order`
  (same set, other order), `membership` (other records).
Targets: top-k agreement >= 0.95 and same top-1 >= 0.95 on every suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from services.common.types import Memory, RetrieveQuery
from services.studies.paired import load_suite, overlap, parse_options

TARGET_AGREEMENT = 0.95
TARGET_TOP1 = 0.95
SCORE_TOL = 1e-6
DEFAULT_SUITES = ("cortex-v1", "locomo")
ALL = 200  # MAX_TOP_K: everything a side selects


def keyed(memories: list[Memory]) -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []
    seen: set[str] = set()
    for m in memories:
        k = m.text.strip()
        if k not in seen:
            seen.add(k)
            out.append((k, float(m.score)))
    return out


@dataclass
class QueryResult:
    suite: str
    probe: str
    query: str
    port: list[tuple[str, float]]
    real: list[tuple[str, float]]
    top_k: int
    agreement_top_k: float
    agreement_all: float
    same_top1: bool
    max_score_diff: float | None
    cause: str | None


def compare(suite: str, probe: str, query: str, port: list[tuple[str, float]], real: list[tuple[str, float]],
            k: int) -> QueryResult:
    pk, rk = [t for t, _ in port[:k]], [t for t, _ in real[:k]]
    ps, rs = dict(port), dict(real)
    shared = [abs(ps[t] - rs[t]) for t in ps if t in rs]
    if pk == rk and [t for t, _ in port] == [t for t, _ in real]:
        why = None
    elif not port or not real:
        why = "selection"
    elif any(d > SCORE_TOL for d in shared):
        why = "score"
    elif set(ps) == set(rs):
        why = "order"
    else:
        why = "membership"
    return QueryResult(suite, probe, query, port, real, k, overlap(pk, rk),
                       overlap([t for t, _ in port], [t for t, _ in real]),
                       (pk[:1] == rk[:1]), max(shared) if shared else None, why)


@dataclass
class Summary:
    suite: str
    queries: int
    top_k: int
    agreement_top_k: float
    agreement_all: float
    same_top1: float
    max_score_diff: float | None
    empty_port: float
    empty_real: float
    nodes: int
    causes: dict[str, int] = field(default_factory=dict)

    @property
    def passes(self) -> bool:
        return self.agreement_top_k >= TARGET_AGREEMENT and self.same_top1 >= TARGET_TOP1


def summarise(suite: str, rows: list[QueryResult], nodes: int) -> Summary:
    n = len(rows) or 1
    diffs = [r.max_score_diff for r in rows if r.max_score_diff is not None]
    c = Counter(r.cause for r in rows if r.cause)
    return Summary(suite, len(rows), rows[0].top_k if rows else 0, sum(r.agreement_top_k for r in rows) / n,
                   sum(r.agreement_all for r in rows) / n, sum(r.same_top1 for r in rows) / n,
                   max(diffs) if diffs else None, sum(not r.port for r in rows) / n, sum(not r.real for r in rows) / n,
                   nodes, dict(c))


def render(summaries: list[Summary], meta: dict[str, Any]) -> str:
    lines = [f"# Fidelity: `octybot` (plan safety-nets) vs Octybot {meta['commit'][:7]} (real)", "",
             f"Embedder: {meta['embedder']}; extraction and every other Octybot LLM call: {meta['llm']}. The port "
             "adopts the real store's nodes; both answer every probe. Targets: top-k agreement ≥ "
             f"{TARGET_AGREEMENT:.2f}, same top-1 ≥ {TARGET_TOP1:.2f}.", "",
             "| suite | queries | nodes | top-k | top-k agreement | all-records agreement | same top-1 | "
             "max score diff | empty (port) | empty (real) | verdict | disagreements by cause |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        msd = "n/a" if s.max_score_diff is None else f"{s.max_score_diff:.4f}"
        causes = ", ".join(f"{k} {v}" for k, v in sorted(s.causes.items())) or "none"
        lines.append(f"| {s.suite} | {s.queries} | {s.nodes} | {s.top_k} | {s.agreement_top_k:.3f} | "
                     f"{s.agreement_all:.3f} | {s.same_top1:.3f} | {msd} | {s.empty_port:.1%} | {s.empty_real:.1%} | "
                     f"{'PASS' if s.passes else 'FAIL'} | {causes} |")
    lines += ["", "Per-query lists: `fidelity.jsonl`."]
    for name, reason in meta.get("skipped", {}).items():
        lines.append(f"\nSkipped {name}: {reason}")
    return "\n".join(lines) + "\n"


async def run(suites: list[str], embedder: str, out: Path, options: dict[str, dict[str, Any]],
              seed: int = 0) -> list[Summary]:
    from services.adapters.base import BackendContext
    from services.adapters.octybot.backend import OctybotBackend
    from services.adapters.octybot_real.backend import OctybotRealBackend
    from services.adapters.octybot_real.runtime import OCTYBOT_COMMIT
    from services.launcher import Rig

    out.mkdir(parents=True, exist_ok=True)
    rig = Rig(out / "procs")
    real = port = None
    summaries: list[Summary] = []
    skipped: dict[str, str] = {}
    meta: dict[str, Any] = {"commit": OCTYBOT_COMMIT}
    try:
        llm_url = await rig.ensure_llm()
        ctx = dict(embedder_name=embedder, data_dir=out / "data", llm_base_url=llm_url)
        real = OctybotRealBackend({}, BackendContext(**ctx))
        port = OctybotBackend({"plan": "safety-nets"}, BackendContext(**ctx))
        await real.start()
        await port.start()
        d = real.describe_config()
        meta.update({"embedder": d["embedder"], "llm": d["extraction_model"], "suites": suites, "seed": seed,
                     "options": options})
        with open(out / "fidelity.jsonl", "w") as jf:
            for name in suites:
                suite, data = load_suite(name, options.get(name, {}), seed)
                if suite is None:
                    skipped[name] = data
                    continue
                t0 = time.perf_counter()
                nodes = 0
                for ns, batch in data.corpora.items():
                    key = f"{name}/{ns}"
                    await real.ingest(key, batch)
                    rows = real.store_rows(key)
                    nodes += len(rows)
                    port.adopt_nodes(key, rows, real.evidence_of(key))
                k = suite.retrieve_top_k("octybot")
                results = []
                for p in data.probes:
                    key = f"{name}/{p.namespace}"
                    q = RetrieveQuery(p.question, ALL, reference_time=p.reference_time)
                    rp = keyed((await port.retrieve(key, q)).memories)
                    rr = keyed((await real.retrieve(key, q)).memories)
                    row = compare(name, p.id, p.question, rp, rr, k)
                    results.append(row)
                    jf.write(json.dumps(asdict(row)) + "\n")
                s = summarise(name, results, nodes)
                summaries.append(s)
                print(f"fidelity octybot {name}: {s.queries} queries over {nodes} nodes, top-{k} agreement "
                      f"{s.agreement_top_k:.3f}, same top-1 {s.same_top1:.3f} ({time.perf_counter() - t0:.0f} s)",
                      flush=True)
    finally:
        for b in (port, real):
            if b is not None:
                await b.close()
                await b.context.close()
        rig.stop_all()
    meta["skipped"] = skipped
    (out / "fidelity.json").write_text(json.dumps(
        {"meta": meta, "suites": [{**asdict(s), "passes": s.passes} for s in summaries]}, indent=2, default=str))
    (out / "fidelity.md").write_text(render(summaries, meta))
    return summaries


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="memrig fidelity octybot", description=__doc__.split("\n\n")[0])
    ap.add_argument("--suites", default=",".join(DEFAULT_SUITES), help="the corpora and probes of these suites")
    ap.add_argument("--embedder", default=os.environ.get("MEMRIG_EMBEDDER", "minilm"), help="minilm (default), "
                    "wordllama, hash (tests)")
    ap.add_argument("--option", action="append", default=[], help="suite option suite.key=value (repeatable)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="output directory (default results/fidelity-octybot-<time>)")
    args = ap.parse_args(argv)
    try:
        options = parse_options(args.option)
    except ValueError as e:
        ap.error(str(e))
    from services.adapters.octybot_real.runtime import availability

    a = availability()
    if not a.ok:
        print(f"fidelity: octybot-real unavailable: {a.reason}", file=sys.stderr)
        return 2
    out = Path(args.out or f"results/fidelity-octybot-{time.strftime('%Y%m%d-%H%M%S')}")
    suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    summaries = asyncio.run(run(suites, args.embedder, out, options, args.seed))
    print((out / "fidelity.md").read_text())
    return 0 if summaries and all(s.passes for s in summaries) else 1


if __name__ == "__main__":
    sys.exit(main())
