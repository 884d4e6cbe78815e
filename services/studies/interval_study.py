"""Do LoCoMo's reported intervals hold? A study over a full LoCoMo run (every conversation, retrieval samples):

    python -m services.studies.interval_study RUN_DIR [--conversations 4] [--questions 30] [--seeds 20]

It draws bench-sized samples the way the suite does (seeded conversations, questions stratified by category)
and reports, per interval method (percentile bootstrap over questions, cluster bootstrap over conversations,
cluster-robust t over conversations, and the t prediction interval for one conversation):
- held-out: how often a conversation left out of the seed-0 sample has its own recall inside the sample's
  interval (the check issue 13 describes);
- coverage: over `--seeds` samples, how often the interval contains the figure over all the run's conversations.
Metrics: turn recall_any@10, turn recall@5, turn recall@10, session recall@5, for every condition in the run.
The README's "IR baselines and how sure the numbers are" quotes its output for the bm25/dense/hybrid run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from services.coordinator import stats
from services.coordinator.metrics.retrieval import evidence_recall_at_k, ranked_unique, recall_any_at_k
from services.coordinator.suites.locomo import LocomoSuite, conversation_of, session_of

METRICS = ("turn_recall_any@10", "turn_recall@5", "turn_recall@10", "session_recall@5")
METHODS = ("question bootstrap", "cluster bootstrap", "cluster t", "prediction interval")


def probe_values(sample: dict[str, Any]) -> dict[str, float | None]:
    """The study's metrics for one sample, computed as the LoCoMo suite scores them."""
    rec = next(iter((sample.get("retrievals") or {}).values()), None) or {"memories": []}
    turns = ranked_unique(e for m in rec["memories"] for e in m.get("evidence_ids", []))
    sessions = ranked_unique(x for x in (session_of(t) for t in turns) if x)
    gold = sample.get("evidence_ids") or []
    gold_s = sorted({x for x in (session_of(t) for t in gold) if x})
    return {"turn_recall_any@10": recall_any_at_k(turns, gold, 10),
            "turn_recall@5": evidence_recall_at_k(turns, gold, 5),
            "turn_recall@10": evidence_recall_at_k(turns, gold, 10),
            "session_recall@5": evidence_recall_at_k(sessions, gold_s, 5)}


def intervals(values: dict[str, float | None], seed: int) -> dict[str, tuple[float | None, float | None]]:
    clusters = {p: conversation_of(p) for p in values}
    sums, counts, _ = stats._cluster_arrays(values, clusters)
    out = {"question bootstrap": tuple(stats.interval(values, None, seed, "value")["ci"]),
           "cluster bootstrap": stats.cluster_bootstrap_ci(values, clusters, seed=seed)[1:],
           "cluster t": stats.cluster_t_interval(values, clusters)[1:]}
    out["prediction interval"] = stats.prediction_interval(sums / counts) if len(sums) >= 2 else (None, None)
    return out


def study(run_dir: Path, conversations: int, questions: int, seeds: int) -> dict[str, Any]:
    run = json.loads((run_dir / "run.json").read_text())
    opts = {k: v for k, v in (run.get("options") or {}).items() if k in ("data_dir", "file", "categories",
                                                                           "audit_evidence")}
    samples = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines() if x.strip()]
    per: dict[str, dict[str, dict[str, float | None]]] = {}
    for s in samples:
        if s.get("status") == "ok":
            per.setdefault(s["condition"], {})[s["probe_id"]] = probe_values(s)
    held = {m: [0, 0] for m in METHODS}
    cover = {m: [0, 0] for m in METHODS if m != "prediction interval"}
    for seed in range(seeds):
        data = LocomoSuite({**opts, "conversations": conversations, "questions": questions}, seed=seed).load()
        chosen, ids = set(data.corpora), {p.id for p in data.probes}
        for cond in sorted(per):
            for metric in METRICS:
                allv = {p: v[metric] for p, v in per[cond].items() if v[metric] is not None}
                sub = {p: x for p, x in allv.items() if p in ids}
                if not sub:
                    continue
                ivs = intervals(sub, seed)
                truth = sum(allv.values()) / len(allv)
                for name, (lo, hi) in ivs.items():
                    if name in cover and lo is not None:
                        cover[name][0] += lo <= truth <= hi
                        cover[name][1] += 1
                if seed:
                    continue
                for conv in sorted({conversation_of(p) for p in allv} - chosen):
                    own = [x for p, x in allv.items() if conversation_of(p) == conv]
                    mean = sum(own) / len(own)
                    for name, (lo, hi) in ivs.items():
                        if lo is not None:
                            held[name][0] += lo <= mean <= hi
                            held[name][1] += 1
    return {"run": str(run_dir), "conversations": conversations, "questions": questions, "seeds": seeds,
            "held_out_inside": held, "coverage_of_all_conversations": cover}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m services.studies.interval_study", description=__doc__)
    ap.add_argument("run_dir", type=Path, help="a LoCoMo run with full=true (every conversation)")
    ap.add_argument("--conversations", type=int, default=4)
    ap.add_argument("--questions", type=int, default=30)
    ap.add_argument("--seeds", type=int, default=20)
    a = ap.parse_args(argv)
    out = study(a.run_dir, a.conversations, a.questions, a.seeds)
    print(f"{a.conversations} conversations × {a.questions} questions, {a.run_dir}")
    for name, (k, n) in out["held_out_inside"].items():
        print(f"  held-out conversation inside the seed-0 sample's {name}: {k} of {n}")
    for name, (k, n) in out["coverage_of_all_conversations"].items():
        print(f"  {name} contains the all-conversation figure: {k} of {n} ({k / max(n, 1):.0%}, {a.seeds} samples)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
