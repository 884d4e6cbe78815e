"""`madial`: MADial-Bench (He et al., NAACL 2025; MIT), English: memory recall over a curated event archive.

The memory archive (160 events `{id: {time, scene, emotion, event}}`) is ingested into one namespace, each
event as a one-message session dated at its event date (message id = `mem-<id>`, so every backend type can
take it). Each probe is one dialogue: the query is the dialogue so far, up to the first `test-turn` (the
assistant turn that should bring a memory up), most recent lines kept when it is long; gold = the dialogue's
`relevant-id` list (its first id is the primary memory).

Metrics per backend: Recall@K (fraction of gold in the top K), recall_any@K, primary-memory hit@K and MRR,
for K in 1, 3, 5, 10, and the headline: recall at a context budget (metrics/budget.py), the share of gold memories
the agent is shown in the first 1,000 tokens of what the backend injects for its top 50. Retrieval only. Default: a seeded sample of 40 dialogues (`full: true` for all 160).
"""

from __future__ import annotations

import json
import random
import re
from datetime import UTC, datetime
from typing import Any

from services.common.types import IngestBatch, Message, Session
from services.coordinator.metrics import budget
from services.coordinator.metrics.latency import latency_summary
from services.coordinator.metrics.retrieval import (
    evidence_mrr,
    evidence_recall_at_k,
    ranked_unique,
    recall_any_at_k,
)
from services.coordinator.suites import common as C
from services.coordinator.suites.base import (
    Condition,
    Probe,
    ProbeValues,
    Suite,
    SuiteData,
    condition_backends,
)
from services.coordinator.suites.registry import register

KS = (1, 3, 5, 10)
_LINE = re.compile(r'^<([^>]+)>:\s*"?(.*?)"?\s*$', re.S)


def read_jsonl_or_json(path) -> list[Any]:
    text = path.read_text()
    try:
        v = json.loads(text)
        return v if isinstance(v, list) else [v]
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def memory_text(m: dict[str, Any]) -> str:
    return f"{m.get('time', '')} — {m.get('event', '').strip()} (scene: {m.get('scene', '')}; emotion: {m.get('emotion', '')})"


def dialogue_query(lines: list[str], test_turn: int, max_chars: int = 1200) -> str:
    """The dialogue before `test_turn` as 'Speaker: text' lines, oldest dropped beyond max_chars."""
    kept: list[str] = []
    for raw in lines[:test_turn]:
        m = _LINE.match(raw.strip())
        if not m:
            continue  # <BOD>, <EOD>
        kept.append(f"{m.group(1)}: {m.group(2).strip()}")
    out: list[str] = []
    for line in reversed(kept):
        if out and sum(len(x) + 1 for x in out) + len(line) > max_chars:
            break
        out.insert(0, line[:max_chars])
    return "\n".join(out)


@register
class MadialSuite(Suite):
    name = "madial"
    description = "MADial-Bench (real data, MIT): recall of gold memory ids from a 160-event archive (Recall@K, MRR)."
    retrieval_headline = budget.HEADLINE_METRIC
    defaults = {"data_dir": None, "dialogues": 40, "full": False, "top_k": 50, "mode": "fast", "max_query_chars": 1200}

    def load(self) -> SuiteData:
        dpath = C.resolve_data_file(self.options["data_dir"], "madial-bench", "MADial-Bench-en-dialogue.json")
        mpath = C.resolve_data_file(self.options["data_dir"], "madial-bench", "MADial-Bench-en-memory.json")
        memories: dict[str, dict[str, Any]] = {}
        for obj in read_jsonl_or_json(mpath):
            memories.update({str(k): v for k, v in obj.items()})
        sessions = []
        for mid in sorted(memories, key=lambda x: int(x) if x.isdigit() else x):
            m = memories[mid]
            try:
                when = datetime.strptime(m.get("time", ""), "%Y-%m-%d").replace(tzinfo=UTC)
            except ValueError:
                when = datetime(2023, 1, 1, tzinfo=UTC)
            sessions.append(Session(session_id=f"mem-{mid}", started_at=when,
                                    messages=(Message(id=f"mem-{mid}", role="user", content=memory_text(m)),)))
        dialogues = read_jsonl_or_json(dpath)
        idx = list(range(len(dialogues)))
        if not self.options["full"] and 0 < int(self.options["dialogues"]) < len(idx):
            idx = sorted(random.Random(self.seed).sample(idx, int(self.options["dialogues"])))
        probes, missing = [], 0
        for i in idx:
            d = dialogues[i]
            gold = [f"mem-{x}" for x in d.get("relevant-id", []) if str(x) in memories]
            missing += len(d.get("relevant-id", [])) - len(gold)
            if not gold or not d.get("test-turn"):
                continue
            q = dialogue_query(d["dialogue"], int(d["test-turn"][0]), int(self.options["max_query_chars"]))
            if not q:
                continue
            probes.append(Probe(id=f"d{i}", question=q, category=f"user-{d.get('user-id')}", evidence_ids=gold,
                                namespace="archive", meta={"primary": gold[0], "test_turn": d["test-turn"][0]}))
        self._info = {"source": str(dpath.parent), "licence": "MIT (hejunqing/MADial-Bench)", "memories": len(sessions),
                      "dialogues": len(probes), "gold_ids_missing_from_archive": missing,
                      "sampling": {"seed": self.seed, "full": self.options["full"], "dialogues": self.options["dialogues"]}}
        return SuiteData(corpora={"archive": IngestBatch(sessions=tuple(sessions), batch_id="madial-archive")},
                         probes=probes, info=self._info)

    def conditions(self, backends: list[str], capabilities: dict[str, dict[str, str]]) -> list[Condition]:
        return C.retrieval_conditions(backends)

    async def run_probe(self, ctx, probe: Probe, condition: Condition) -> dict[str, Any]:
        return (await C.retrieval_body(ctx, probe, condition.backends[0], 200))[0]

    def per_probe(self, samples: list[dict[str, Any]]) -> ProbeValues:
        values: dict[str, dict[str, dict[str, float | None]]] = {}
        for cond, rows in C.by_condition(samples).items():
            vals: dict[str, dict[str, float | None]] = {}
            for r in rows:
                pid, rec = r["probe_id"], C.retrieval_of(r) or {"memories": []}
                ranked = ranked_unique(e for m in rec["memories"] for e in (m.get("evidence_ids") or [m.get("id")])
                                       if e and e.startswith("mem-"))
                gold = r.get("evidence_ids") or []
                primary = [(r.get("meta") or {}).get("primary")] if gold else []
                for k in KS:
                    vals.setdefault(f"recall@{k}", {})[pid] = evidence_recall_at_k(ranked, gold, k)
                    vals.setdefault(f"recall_any@{k}", {})[pid] = recall_any_at_k(ranked, gold, k)
                    vals.setdefault(f"primary_hit@{k}", {})[pid] = recall_any_at_k(ranked, primary, k)
                C.budget_values(vals, pid, rec, gold)
                vals.setdefault("mrr", {})[pid] = evidence_mrr(ranked, gold)
                vals.setdefault("primary_mrr", {})[pid] = evidence_mrr(ranked, primary)
                vals.setdefault("token_spend", {})[pid] = float(r.get("context_tokens", 0))
                vals.setdefault("latency_ms", {})[pid] = rec.get("latency_ms")
            values[cond] = vals
        return ProbeValues(values, backend_of=condition_backends(samples))

    def score(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"suite": self.name, "conditions": {}, "data": C.load_info(self)}
        per_cond = self.probe_values(samples).values
        for cond, rows in C.by_condition(samples).items():
            vals = per_cond[cond]
            lat = [x for x in vals["latency_ms"].values() if x is not None]
            seed = C.stable_seed(self.seed, cond)
            out["conditions"][cond] = {"n": len(rows), "latency": latency_summary(lat),
                                       "overall": {m: C.summary(v, seed, C.unit_of(m)) for m, v in vals.items()}}
        baseline, out["baseline_rule"] = C.scorecard_baseline(self.probe_values(samples), budget.HEADLINE_METRIC)
        out["baseline"] = baseline
        out["comparisons"] = C.compare_all(per_cond, baseline, [
            budget.HEADLINE_METRIC, "budget_recall_auc", ("mrr", True, "rate"), ("recall@5", True, "rate"), ("primary_hit@5", True, "rate"),
            ("token_spend", False, "tokens"), ("latency_ms", False, "ms")], seed=self.seed) if baseline else {}
        return out

    def render(self, metrics: dict[str, Any]) -> str:
        m = metrics["conditions"]
        conds = sorted(m)
        out = ["## MADial-Bench (memory recall)", "",
               "Gold = the dialogue's relevant memory ids; primary = its first id. Retrieval only (no judge).", ""]
        rows = [[c, m[c]["n"], C.fmt_ci(m[c]["overall"].get("mrr")),
                 *(C.fmt((m[c]["overall"].get(f"recall@{k}") or {}).get("mean")) for k in KS),
                 *(C.fmt((m[c]["overall"].get(f"primary_hit@{k}") or {}).get("mean")) for k in KS),
                 C.fmt((m[c]["overall"].get("token_spend") or {}).get("mean"), 0), C.fmt(m[c]["latency"]["p50_ms"], 1)]
                for c in conds]
        out.append(C.md_table(["backend", "n", "MRR [CI]", *(f"R@{k}" for k in KS), *(f"primary@{k}" for k in KS),
                               "ctx tokens", "p50 ms"], rows))
        out += C.render_budget(metrics, conds, "the dialogue's relevant memory ids")
        if metrics.get("comparisons"):
            out += C.baseline_note(metrics)
            out.append(C.render_comparisons(metrics["comparisons"]))
        return "\n".join(out)
