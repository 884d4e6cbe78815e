"""`memrig fidelity openclaw|quaid|octybot`: how closely a re-implementation reproduces the real system, query by query.

This module holds the OpenClaw study; `quaid` and `octybot` dispatch to services/studies/fidelity_quaid.py and
fidelity_octybot.py (the same measures: top-k overlap, same top-1, score differences on one shared store).

Both run on the same workspaces (services/studies/paired.py): each suite's corpora are ingested once into
`openclaw-real` (the flush notes come from the rig's LLM client), and the port adopts the workspace that produced
(`OpenClawBackend.adopt_workspace`: it indexes exactly those files), with the same embedder and cache, so any difference
is search logic. Every probe of the suite is then searched on both with the probe's reference time as "now" and the
suite's retrieve top-k as maxResults (the table names it per workspace).

Per query (`fidelity.jsonl`) and per workspace (`fidelity.json`, `fidelity.md`):
- agreement: |P ∩ R| / max(|P|, |R|) over result identities (path, start line, end line); 1 when both are empty.
- same order: the two lists are identical, in order.
- max score difference: the largest |port − real| final score over the results both return.
- empty rate: the share of queries each returns nothing for.
- cause: for a query that disagrees, the first difference found in this order (each names the rule behind it):
  `selection` (one side returns nothing: minScore and keyword preservation), `chunking` (a real result's line range
  is not a chunk of the port's index), `vector-score` (a shared chunk's vector score differs: embeddings), `text-score`
  (a shared chunk's keyword score differs: keyword legs, BM25 mapping, lexical boosts), `final-score` (same channel
  scores, different final score: merge weights, decay, importance), `order` (same set, different order: MMR, ties),
  `membership` (different sets with equal shared scores: candidate pool size, filename search, selection).
Targets (issue 12): agreement ≥ 0.95 and |empty-rate difference| ≤ 2 points on every workspace.
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

from services.adapters.openclaw.lifecycle import PROFILES
from services.common import subcommand
from services.common.errors import InputError
from services.common.types import Memory, RetrieveQuery
from services.studies.paired import PairedOpenClaw, ingested_suites, overlap, parse_options

TARGET_AGREEMENT = 0.95
TARGET_EMPTY_DIFF = 0.02
SCORE_TOL = 1e-4  # float32 vectors through JSON: the same chunk scores within ~1e-6 on both sides
CAUSES = ("selection", "chunking", "vector-score", "text-score", "final-score", "order", "membership")
DEFAULT_SUITES = ("cortex-v1", "arclight", "locomo")


@dataclass(frozen=True)
class Hit:
    path: str
    start: int
    end: int
    score: float
    vector: float | None
    text: float | None

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.path, self.start, self.end)


def hits(memories: list[Memory]) -> list[Hit]:
    out = []
    for m in memories:
        a, c = m.attributes, m.channel_scores
        out.append(Hit(a["path"], int(a["start_line"]), int(a["end_line"]), float(c.get("hybrid", m.score)),
                       c.get("vector"), c.get("text")))
    return out


def agreement(port: list[Hit], real: list[Hit]) -> float:
    return overlap((h.key for h in port), (h.key for h in real))


def _differs(a: float | None, b: float | None) -> bool:
    return abs((a or 0.0) - (b or 0.0)) > SCORE_TOL


def cause(port: list[Hit], real: list[Hit], port_chunks: set[tuple[str, int, int]]) -> str | None:
    """The first rule (see the module docstring) that explains why the lists differ; None when they agree."""
    if [h.key for h in port] == [h.key for h in real]:
        return None
    if not port or not real:
        return "selection"
    if any(h.key not in port_chunks for h in real):
        return "chunking"
    shared = [(p, r) for p in port for r in real if p.key == r.key]
    if any(_differs(p.vector, r.vector) for p, r in shared):
        return "vector-score"
    if any(_differs(p.text, r.text) for p, r in shared):
        return "text-score"
    if any(_differs(p.score, r.score) for p, r in shared):
        return "final-score"
    if {h.key for h in port} == {h.key for h in real}:
        return "order"
    return "membership"


@dataclass
class QueryResult:
    workspace: str
    probe: str
    query: str
    reference_time: str | None
    port: list[tuple[str, int, int, float]]
    real: list[tuple[str, int, int, float]]
    agreement: float
    same_order: bool
    max_score_diff: float | None
    cause: str | None


def compare(workspace: str, probe_id: str, query: str, ref: str | None, port: list[Hit], real: list[Hit],
            port_chunks: set[tuple[str, int, int]]) -> QueryResult:
    shared = [abs(p.score - r.score) for p in port for r in real if p.key == r.key]
    return QueryResult(workspace, probe_id, query, ref,
                       [(h.path, h.start, h.end, round(h.score, 6)) for h in port],
                       [(h.path, h.start, h.end, round(h.score, 6)) for h in real],
                       agreement(port, real), [h.key for h in port] == [h.key for h in real],
                       max(shared) if shared else None, cause(port, real, port_chunks))


@dataclass
class WorkspaceSummary:
    workspace: str
    queries: int
    agreement: float
    same_order_rate: float
    max_score_diff: float | None
    empty_rate_port: float
    empty_rate_real: float
    causes: dict[str, int] = field(default_factory=dict)

    @property
    def passes(self) -> bool:
        return (self.agreement >= TARGET_AGREEMENT
                and abs(self.empty_rate_port - self.empty_rate_real) <= TARGET_EMPTY_DIFF + 1e-12)


def summarise(workspace: str, rows: list[QueryResult]) -> WorkspaceSummary:
    n = len(rows)
    diffs = [r.max_score_diff for r in rows if r.max_score_diff is not None]
    counts = Counter(r.cause for r in rows if r.cause)
    return WorkspaceSummary(
        workspace, n,
        agreement=sum(r.agreement for r in rows) / n if n else 1.0,
        same_order_rate=sum(r.same_order for r in rows) / n if n else 1.0,
        max_score_diff=max(diffs) if diffs else None,
        empty_rate_port=sum(not r.port for r in rows) / n if n else 0.0,
        empty_rate_real=sum(not r.real for r in rows) / n if n else 0.0,
        causes={c: counts[c] for c in CAUSES if counts[c]},
    )


def render(summaries: list[WorkspaceSummary], meta: dict[str, Any]) -> str:
    lines = [f"# Fidelity: port preset `{meta['preset']}` vs OpenClaw {meta['openclaw']} (real)", "",
             f"Embedder: {meta['embedder']}; maxResults per workspace (each suite's retrieve top-k) in the table; "
             "each probe's reference time is OpenClaw's clock on both sides; both sides read the memory state of "
             f"the profile named with the workspace ({', '.join(meta.get('profiles', ['default']))}; `sessions` is "
             "not compared: the port does not index transcripts). Targets: agreement ≥ "
             f"{TARGET_AGREEMENT:.2f}, empty-rate difference ≤ {TARGET_EMPTY_DIFF * 100:.0f} points.", "",
             "| workspace | queries | top-k | agreement | same order | max score diff | empty (port) | empty (real) "
             "| verdict | disagreements by cause |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    top_k = meta.get("top_k") or {}
    for s in summaries:
        causes = ", ".join(f"{k} {v}" for k, v in s.causes.items()) or "none"
        msd = "n/a" if s.max_score_diff is None else f"{s.max_score_diff:.4f}"
        lines.append(f"| {s.workspace} | {s.queries} | {top_k.get(s.workspace, '?')} | {s.agreement:.3f} | "
                     f"{s.same_order_rate:.3f} | {msd} | "
                     f"{s.empty_rate_port:.1%} | {s.empty_rate_real:.1%} | {'PASS' if s.passes else 'FAIL'} | "
                     f"{causes} |")
    lines += ["", "Causes (the first difference found for a disagreeing query): selection = one side returns "
              "nothing (minScore / keyword preservation); chunking = a real result's line range is not a port chunk; "
              "vector-score / text-score = a shared chunk's channel score differs; final-score = same channel "
              "scores, different final score (merge, decay, importance); order = same set, other order (MMR, ties); "
              "membership = other results with equal shared scores (candidate pool, filename search, selection).",
              "", "Per-query lists: `fidelity.jsonl`."]
    for name, reason in meta.get("skipped", {}).items():
        lines.append(f"\nSkipped {name}: {reason}")
    return "\n".join(lines) + "\n"


PORT_PROFILES = tuple(p for p, prof in PROFILES.items() if prof.port)  # the profiles whose state the port can read


async def run_study(suites: list[str], preset: str, embedder: str, out: Path, options: dict[str, dict[str, Any]],
              seed: int = 0, profiles: tuple[str, ...] = PORT_PROFILES) -> list[WorkspaceSummary]:
    summaries: list[WorkspaceSummary] = []
    skipped: dict[str, str] = {}
    top_k: dict[str, int] = {}
    meta: dict[str, Any] = {}
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "fidelity.jsonl", "w") as jf:
        for profile in profiles:
            if not PROFILES[profile].port:
                raise ValueError(f"fidelity: the port cannot read profile {profile!r}'s state (session transcripts)")
            meta = await _run_profile(suites, preset, embedder, out, options, seed, profile, jf, summaries, skipped,
                                      top_k)
    meta.update({"skipped": skipped, "top_k": top_k, "profiles": list(profiles)})
    (out / "fidelity.json").write_text(json.dumps(
        {"meta": meta, "workspaces": [{**asdict(s), "passes": s.passes} for s in summaries]}, indent=2))
    (out / "fidelity.md").write_text(render(summaries, meta))
    return summaries


async def _run_profile(suites, preset, embedder, out, options, seed, profile, jf, summaries, skipped, top_k):
    from services.adapters.openclaw_real.node import OPENCLAW_VERSION

    async with PairedOpenClaw(out / profile, embedder, preset, profile=profile) as pair:
        async for name, suite, data, t0 in ingested_suites(pair, suites, options, seed, skipped):
            k = suite.retrieve_top_k("openclaw")
            label = f"{name} ({profile})"
            top_k[label] = k
            rows = []
            for p in data.probes:
                key = f"{name}/{p.namespace}"
                q = RetrieveQuery(p.question, k, reference_time=p.reference_time)
                rp = (await pair.port.retrieve(key, q)).memories
                rr = (await pair.real.retrieve(key, q)).memories
                row = compare(label, p.id, p.question, p.reference_time.isoformat() if p.reference_time else None,
                              hits(rp), hits(rr), pair.port.indexed_chunks(key))
                rows.append(row)
                jf.write(json.dumps(asdict(row)) + "\n")
            s = summarise(label, rows)
            summaries.append(s)
            print(f"fidelity {label}: {s.queries} queries, top-{k} agreement {s.agreement:.3f}, empty port "
                  f"{s.empty_rate_port:.1%} / real {s.empty_rate_real:.1%} ({time.perf_counter() - t0:.0f} s)",
                  flush=True)
        return {"preset": preset, "openclaw": OPENCLAW_VERSION,
                "embedder": pair.real.describe_config()["embedding_model"] or "none (FTS-only)",
                "suites": suites, "seed": seed, "options": options,
                "port_release": pair.port.describe_config().get("release", preset)}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """`memrig fidelity`'s flags (services/common/subcommand.py)."""
    ap.description = __doc__.split("\n\n")[0]
    ap.add_argument("system", choices=["openclaw", "quaid", "octybot"],
                    help="which re-implementation to hold to its real system")
    ap.add_argument("--suites", default=",".join(DEFAULT_SUITES), help="workspaces: the corpora of these suites")
    ap.add_argument("--preset", default="openclaw", help="the port preset to compare (default: openclaw)")
    ap.add_argument("--embedder", default=os.environ.get("MEMRIG_EMBEDDER", "minilm"),
                    help="minilm (default), wordllama, none (FTS-only on both sides)")
    ap.add_argument("--option", action="append", default=[], help="suite option suite.key=value (repeatable)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profiles", default=",".join(PORT_PROFILES),
                    help=f"memory profiles of a real install to compare on (default: {','.join(PORT_PROFILES)})")
    ap.add_argument("--out", default=None, help="output directory (default results/fidelity-<time>)")


def check(args: argparse.Namespace) -> None:
    """--option parsed into `args.options`; --profiles each one the port models (OpenClaw's study)."""
    try:
        args.options = parse_options(args.option)
    except ValueError as e:
        raise InputError("--option", str(e), text=str(e)) from None
    if args.system == "openclaw":
        bad = [p.strip() for p in args.profiles.split(",") if p.strip() and not (p.strip() in PROFILES
                                                                                 and PROFILES[p.strip()].port)]
        if bad:
            raise InputError("--profiles", f"{', '.join(bad)}: the port models {', '.join(PORT_PROFILES)}")


def run(args: argparse.Namespace) -> int:
    options = args.options
    out = Path(args.out or f"results/fidelity-{time.strftime('%Y%m%d-%H%M%S')}")
    suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    if args.system in ("quaid", "octybot"):  # services/studies/fidelity_quaid.py, fidelity_octybot.py
        import importlib

        avail_module, real = {"quaid": ("services.adapters.quaid_real.source", "quaid-real"),
                              "octybot": ("services.adapters.octybot_real.runtime", "octybot-real")}[args.system]
        avail = importlib.import_module(avail_module).availability()
        if not avail.ok:
            print(f"fidelity: {real} unavailable: {avail.reason}", file=sys.stderr)
            return 2
        study = importlib.import_module(f"services.studies.fidelity_{args.system}")
        summaries = asyncio.run(study.run(suites, args.embedder, out, options, args.seed))
        print((out / "fidelity.md").read_text())
        return 0 if summaries and all(s.passes for s in summaries) else 1
    from services.adapters.openclaw_real.node import availability

    a = availability()
    if not a.ok:
        print(f"fidelity: openclaw-real unavailable: {a.reason}", file=sys.stderr)
        return 2
    profiles = tuple(p.strip() for p in args.profiles.split(",") if p.strip())
    summaries = asyncio.run(run_study(suites, args.preset, args.embedder, out, options, args.seed, profiles))
    print((out / "fidelity.md").read_text())
    return 0 if summaries and all(s.passes for s in summaries) else 1


def main(argv: list[str] | None = None) -> int:
    return subcommand.main(sys.modules[__name__], argv, "memrig fidelity")


if __name__ == "__main__":
    sys.exit(main())
