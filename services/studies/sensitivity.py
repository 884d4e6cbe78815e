"""`memrig sensitivity openclaw`: how much of the native baseline's result is the embedder and the minScore cut.

OpenClaw ships OpenAI `text-embedding-3-small` by default (local option: embeddinggemma-300m); the rig runs it offline
with all-MiniLM-L6-v2 or WordLlama. This table shows, for OpenClaw 2026.9.6 itself (`openclaw-real`) and for the port
preset beside it, retrieval over each suite's probes with every embedder × minScore pair:
- empty: share of probes for which memory_search returns nothing;
- hit: share of probes where a returned snippet contains a ground-truth keyword (suites with keywords);
- evidence recall_any@k: share of probes with a gold evidence id among the returned memories' evidence ids
  (suites with gold evidence ids), k = the suite's retrieve top-k (the table names it).
Each workspace is ingested once per embedder (the port indexes the files openclaw-real's workspace writer made, profile
`default`: the memory a real install holds); only the search's minScore changes between the columns, through
OpenClaw's own `minScore` search option. One labelled what-if row per suite and embedder: the port at minScore 0.35
with temporal decay switched off (2026.9.6 has no such setting), so the report shows what the decay clock costs
native memory (each suite asks its questions the day after its last session).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from services.common import subcommand
from services.common.errors import InputError
from services.common.types import Memory, RetrieveQuery
from services.studies.paired import PairedOpenClaw, ingested_suites, parse_options

DEFAULT_EMBEDDERS = ("minilm", "wordllama")
DEFAULT_MIN_SCORES = (0.35, 0.25, 0.15)
DEFAULT_SUITES = ("cortex-v1", "locomo")


@dataclass
class Cell:
    system: str  # "openclaw-real" | "port (<preset>)"
    suite: str
    embedder: str
    min_score: float
    top_k: int
    queries: int
    empty_rate: float
    hit_rate: float | None
    recall_any: float | None


def probe_outcome(memories: list[Memory], expected: list[str], gold: list[str]) -> tuple[bool, bool | None, bool | None]:
    """(empty, keyword hit, evidence hit) for one probe; None where the probe has no keywords / gold ids."""
    text = " ".join(m.text for m in memories).lower()
    hit = any(e.lower() in text for e in expected) if expected else None
    ev = {e for m in memories for e in m.evidence_ids}
    rec = bool(ev & set(gold)) if gold else None
    return (not memories), hit, rec


def cell(system: str, suite: str, embedder: str, ms: float, outcomes: list[tuple[bool, bool | None, bool | None]],
         top_k: int = 6) -> Cell:
    n = len(outcomes)
    hits = [h for _, h, _ in outcomes if h is not None]
    recs = [r for _, _, r in outcomes if r is not None]
    return Cell(system, suite, embedder, ms, top_k, n, sum(e for e, _, _ in outcomes) / n if n else 0.0,
                sum(hits) / len(hits) if hits else None, sum(recs) / len(recs) if recs else None)


def render(cells: list[Cell], meta: dict[str, Any]) -> str:
    def pct(v: float | None) -> str:
        return "—" if v is None else f"{v:.1%}"

    lines = ["# Native baseline sensitivity: embedder × minScore", "",
             f"OpenClaw {meta['openclaw']} (`openclaw-real`) and the port preset `{meta['preset']}`, profile "
             f"`{meta.get('profile', 'default')}`; maxResults = the suite's top-k (column k); the decay clock = each "
             "probe's reference time (the day after the suite's last session). OpenClaw ships OpenAI "
             "text-embedding-3-small by default; these runs use the rig's offline embedders, so read the spread "
             "between rows as how much of a gap is the embedder and the minScore cut. Rows marked *what-if* are not "
             "a setting OpenClaw offers.", "",
             "| suite | system | embedder | minScore | k | probes | empty | keyword hit | evidence recall_any@k |",
             "|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        lines.append(f"| {c.suite} | {c.system} | {c.embedder} | {c.min_score:.2f} | {c.top_k} | {c.queries} | "
                     f"{pct(c.empty_rate)} | {pct(c.hit_rate)} | {pct(c.recall_any)} |")
    for name, reason in meta.get("skipped", {}).items():
        lines.append(f"\nSkipped {name}: {reason}")
    return "\n".join(lines) + "\n"


async def run_study(suites: list[str], embedders: list[str], min_scores: list[float], preset: str, out: Path,
              options: dict[str, dict[str, Any]], seed: int = 0, with_real: bool = True) -> list[Cell]:
    from services.adapters.openclaw_real.node import OPENCLAW_VERSION

    cells: list[Cell] = []
    skipped: dict[str, str] = {}
    for emb in embedders:
        async with PairedOpenClaw(out / emb, emb, preset, with_real=with_real) as pair:
            systems = [("openclaw-real", pair.real)] if pair.real is not None else []
            systems.append((f"port ({preset})", pair.port))
            async for name, suite, data, t0 in ingested_suites(pair, suites, options, seed, skipped):
                k = suite.retrieve_top_k("openclaw")
                for ms in min_scores:
                    for label, b in systems:
                        with b.search_params(min_score=float(ms)):
                            cells.append(cell(label, name, emb, ms, await _outcomes(b, name, data, k), k))
                with pair.port.search_params(min_score=0.35, decay=False):
                    cells.append(cell(f"port ({preset}), what-if: no decay", name, emb, 0.35,
                                      await _outcomes(pair.port, name, data, k), k))
                print(f"sensitivity {name} / {emb}: {len(data.probes)} probes × {len(min_scores)} minScores "
                      f"({time.perf_counter() - t0:.0f} s)", flush=True)
    meta = {"openclaw": OPENCLAW_VERSION, "preset": preset, "profile": "default", "suites": suites, "embedders": embedders,
            "min_scores": min_scores, "seed": seed, "options": options, "skipped": skipped}
    cells.sort(key=lambda c: (c.suite, c.system != "openclaw-real", c.system, c.embedder, -c.min_score))
    (out / "sensitivity.json").write_text(json.dumps({"meta": meta, "cells": [asdict(c) for c in cells]}, indent=2))
    (out / "sensitivity.md").write_text(render(cells, meta))
    return cells


async def _outcomes(b, name: str, data, k: int) -> list[tuple[bool, bool | None, bool | None]]:
    out = []
    for p in data.probes:
        q = RetrieveQuery(p.question, k, reference_time=p.reference_time)
        out.append(probe_outcome((await b.retrieve(f"{name}/{p.namespace}", q)).memories, p.expected, p.evidence_ids))
    return out


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """`memrig sensitivity`'s flags (services/common/subcommand.py)."""
    ap.description = __doc__.split("\n\n")[0]
    ap.add_argument("system", choices=["openclaw"])
    ap.add_argument("--suites", default=",".join(DEFAULT_SUITES))
    ap.add_argument("--embedders", default=",".join(DEFAULT_EMBEDDERS))
    ap.add_argument("--min-scores", default=",".join(str(x) for x in DEFAULT_MIN_SCORES))
    ap.add_argument("--preset", default="openclaw", help="the port preset shown beside OpenClaw itself")
    ap.add_argument("--option", action="append", default=[], help="suite option suite.key=value (repeatable)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="output directory (default results/sensitivity-<time>)")


def check(args: argparse.Namespace) -> None:
    """--option parsed into `args.options`, --min-scores into `args.min_score_list` (each in [0, 1])."""
    try:
        args.options = parse_options(args.option)
    except ValueError as e:
        raise InputError("--option", str(e), text=str(e)) from None
    try:
        args.min_score_list = [float(x) for x in args.min_scores.split(",") if x.strip()]
    except ValueError as e:
        raise InputError("--min-scores", str(e), text=str(e)) from None
    if any(not 0.0 <= m <= 1.0 for m in args.min_score_list):
        raise InputError("--min-scores", "each must be in [0, 1]")


def run(args: argparse.Namespace) -> int:
    options, min_scores = args.options, args.min_score_list
    from services.adapters.openclaw_real.node import availability

    a = availability()
    if not a.ok:
        print(f"sensitivity: openclaw-real unavailable ({a.reason}); showing the port alone", file=sys.stderr)
    out = Path(args.out or f"results/sensitivity-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    embedders = [e.strip() for e in args.embedders.split(",") if e.strip()]
    asyncio.run(run_study([s.strip() for s in args.suites.split(",") if s.strip()], embedders, min_scores, args.preset,
                    out, options, args.seed, with_real=a.ok))
    print((out / "sensitivity.md").read_text())
    return 0


def main(argv: list[str] | None = None) -> int:
    return subcommand.main(sys.modules[__name__], argv, "memrig sensitivity")


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sys.exit(main())
