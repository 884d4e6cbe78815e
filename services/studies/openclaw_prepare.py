"""Study (not a test): where openclaw-real's time goes on a suite with a namespace per question (LongMemEval), and
what the rig's Prepare takes out of the timed search.

    python -m services.studies.openclaw_prepare [--questions 8] [--repeats 3] [--seed 0] [--out FILE.json]

OpenClaw 2026.9.6 itself (the openclaw-real adapter in this process, its Node sidecar, the rig's embedder behind
OpenClaw's embeddings endpoint, the offline llm-mock for the flush notes) ingests 2 x `--questions` LongMemEval
oracle questions (a seeded stratified sample of the 400 dev questions, ../shared/data or MEMRIG_DATA_DIR), each in
its own namespace, as the suite does. Then, every search with top_k 50 at the question's date, timed in the
adapter (what Retrieve costs inside the backend process):
- first search, no Prepare: the first search of each namespace of the first half, right after all the ingests;
- Prepare, then first search: each namespace of the second half gets Prepare (timed apart), then its first search;
- then, `--repeats` times over every namespace, with query texts never used before unless said:
  the same query repeated at once; a new query on the same namespace; the same query as the last one after a
  search of another namespace (the agent switch alone); a new query after another namespace (switch + new query);
  Prepare after another namespace, then a new query.
Prints the median, min and max of each (ms) and writes them all to --out.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from services.adapters.base import BackendContext
from services.common.types import RetrieveQuery
from services.coordinator.suites.longmemeval import LongMemEvalSuite

ROWS = ("first search, no Prepare", "Prepare (untimed in a run)", "first search after Prepare",
        "same query repeated", "new query, same namespace", "same query, after another namespace",
        "new query, after another namespace", "new query, after another namespace and Prepare")


async def measure(questions: int, repeats: int, seed: int) -> dict[str, list[float]]:
    from services.adapters.openclaw_real.backend import OpenClawRealBackend
    from services.launcher import Rig

    data = LongMemEvalSuite({"questions": 2 * questions}, seed=seed).load()
    probes = data.probes[: 2 * questions]
    rig = Rig(Path(tempfile.mkdtemp(prefix="memrig-study-")) / "procs")
    url = await rig.ensure_llm()
    b = OpenClawRealBackend({}, BackendContext(data_dir=Path(tempfile.mkdtemp(prefix="memrig-study-")),
                                               llm_base_url=url))
    rows: dict[str, list[float]] = {r: [] for r in ROWS}
    fresh = itertools.count()  # numbers query texts never searched before

    def query(p, tag: str = "") -> RetrieveQuery:
        return RetrieveQuery(f"{p.question} {tag}".strip(), 50, reference_time=p.reference_time)

    async def timed(coro) -> float:
        t0 = time.perf_counter()
        await coro
        return (time.perf_counter() - t0) * 1000

    try:
        await b.start()
        for p in probes:
            await b.ingest(p.namespace, data.corpora[p.namespace])
        for i, p in enumerate(probes):
            if i < questions:
                rows["first search, no Prepare"].append(await timed(b.retrieve(p.namespace, query(p))))
            else:
                rows["Prepare (untimed in a run)"].append(await timed(b.prepare(p.namespace)))
                rows["first search after Prepare"].append(await timed(b.retrieve(p.namespace, query(p))))
        for _ in range(repeats):
            for i, p in enumerate(probes):
                other = probes[(i + 1) % len(probes)]

                def tag() -> str:
                    return f"(q{next(fresh)})"
                same = query(p, tag())
                await b.retrieve(p.namespace, same)
                rows["same query repeated"].append(await timed(b.retrieve(p.namespace, same)))
                last = query(p, tag())
                rows["new query, same namespace"].append(await timed(b.retrieve(p.namespace, last)))
                await b.retrieve(other.namespace, query(other, tag()))
                rows["same query, after another namespace"].append(await timed(b.retrieve(p.namespace, last)))
                await b.retrieve(other.namespace, query(other, tag()))
                rows["new query, after another namespace"].append(await timed(b.retrieve(p.namespace, query(p, tag()))))
                await b.retrieve(other.namespace, query(other, tag()))
                await b.prepare(p.namespace)
                rows["new query, after another namespace and Prepare"].append(
                    await timed(b.retrieve(p.namespace, query(p, tag()))))
    finally:
        await b.close()
        await b.context.close()
        rig.stop_all()
    return rows


def summarise(rows: dict[str, list[float]]) -> dict[str, dict[str, Any]]:
    return {k: {"n": len(v), "median_ms": round(statistics.median(v), 1), "min_ms": round(min(v), 1),
                "max_ms": round(max(v), 1)} for k, v in rows.items() if v}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m services.studies.openclaw_prepare", description=__doc__.split("\n")[0])
    ap.add_argument("--questions", type=int, default=8, help="namespaces per half (default 8)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="", help="write every timing here (JSON)")
    a = ap.parse_args(argv)
    if a.questions < 1 or a.repeats < 1:
        ap.error("--questions and --repeats must be >= 1")
    rows = asyncio.run(measure(a.questions, a.repeats, a.seed))
    summary = summarise(rows)
    for k, s in summary.items():
        print(f"{k:48s} n={s['n']:3d}  median {s['median_ms']:7.1f} ms  min {s['min_ms']:7.1f}  max {s['max_ms']:7.1f}")
    if a.out:
        Path(a.out).write_text(json.dumps({"summary": summary, "timings_ms": rows, "questions": a.questions,
                                           "repeats": a.repeats, "seed": a.seed}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
