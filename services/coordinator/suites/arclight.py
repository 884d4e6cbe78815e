"""`arclight`: Cortex V1.1 (seed 000) — OpenClaw native vs OpenClaw native + X over the six-week Arclight project.

Corpus: 45 sessions (suites/data/arclight_corpus.py) with fact evolution (JWT → iron-session, Resend →
SendGrid, TTL 300 s → 600 s), non-default specifics and embedded rationale; 50 prompts F 15 / R 10 / E 10 /
S 8 / T 7 with ground truth and source sessions.

Conditions (seed V1.1): "OpenClaw native" = the compaction summary + the openclaw backend's formatted context
(its recent-notes block + memory_search top 6); "OpenClaw native + X" = that plus backend X's retrieved context,
for every other memory backend X in the run. Without an openclaw backend in the run the suite falls back to
the compaction summary as the base ("compacted" / "compacted + X") and the report says so.
Each answer is judged 0-3 (prompts.JUDGE_SYSTEM, N passes, majority vote). Option `pairwise: true` also asks a
blind pairwise judge (randomised, recorded order) to compare each "+ X" answer with the native one.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from services.common.types import IngestBatch, Message, Session
from services.coordinator import judges
from services.coordinator.metrics.judge import judge_distribution
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
from services.coordinator.suites.data import arclight_corpus as D
from services.coordinator.suites.registry import register

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
CATEGORIES = {"F": "Factual", "R": "Rationale", "E": "Evolution", "S": "Synthesis", "T": "Temporal (current value)"}
NATIVE = "OpenClaw native"
FALLBACK = "compacted"
SKIP_AS_X = ("none", "compacted")


def build_sessions() -> list[Session]:
    out = []
    for num, day, pairs in D.SESSIONS:
        t0 = START + timedelta(days=day, hours=num % 3)
        msgs = []
        for j, (u, a) in enumerate(pairs):
            msgs.append(Message(f"arc-s{num:02d}-m{2 * j}", "user", u))
            msgs.append(Message(f"arc-s{num:02d}-m{2 * j + 1}", "assistant", a))
        out.append(Session(f"arc-s{num:02d}", t0, tuple(msgs)))
    return out


def openclaw_backend(backends: list[str]) -> str | None:
    """The native base: OpenClaw itself when it ran, else the port's default preset, else any openclaw variant."""
    for b in ("openclaw-real", "openclaw"):
        if b in backends:
            return b
    return next((b for b in backends if b.startswith("openclaw")), None)


@register
class ArclightSuite(Suite):
    name = "arclight"
    description = ("Cortex V1.1 Arclight (seed 000): 45 sessions over six weeks with fact evolution; 50 prompts "
                   "F/R/E/S/T; OpenClaw native vs OpenClaw native + X, judged 0-3.")
    retrieval_headline = "hit"
    answer_headline = "judge_mean"
    answer_metrics = {"judge_mean": "judge", "grounded_rate": "judge", "hallucination_rate": "judge"}
    defaults = {"top_k": 6, "mode": "full", "openclaw_top_k": 6, "categories": "FREST", "limit": 0,
                "pairwise": False}

    def retrieve_top_k(self, backend: str) -> int:
        # OpenClaw's memory_search default maxResults is 6 (seed V1.1 OC_TOP_K); other backends use top_k
        return int(self.options["openclaw_top_k"] if backend.startswith("openclaw") else self.options["top_k"])

    def retrieve_mode(self, backend: str) -> str:
        return "fast" if backend.endswith("-fast") else str(self.options["mode"])

    def load(self) -> SuiteData:
        sessions = build_sessions()
        by_num = {int(s.session_id[-2:]): s for s in sessions}
        probes = []
        for pid, cat, q, gt, exp, src in D.PROMPTS:
            if cat not in self.options["categories"]:
                continue
            ev = [m.id for n in src for m in by_num[n].messages
                  if any(e.lower() in m.content.lower() for e in exp)] or [m.id for n in src for m in by_num[n].messages]
            probes.append(Probe(id=pid, question=q, category=cat, ground_truth=gt, expected=list(exp),
                                evidence_ids=ev, namespace="arclight",
                                reference_time=max(s.started_at for s in sessions) + timedelta(days=1),
                                meta={"source_sessions": [f"arc-s{n:02d}" for n in src]}))
        if self.options["limit"]:
            probes = probes[: int(self.options["limit"])]
        return SuiteData(corpora={"arclight": IngestBatch(sessions=tuple(sessions), batch_id="arclight")},
                         probes=probes,
                         info={"source": "services/coordinator/suites/data/arclight_corpus.py (written for memrig "
                                         "after seed 000 V1.1)", "sessions": len(sessions), "prompts": len(probes),
                               "categories": {c: sum(1 for p in probes if p.category == c) for c in CATEGORIES}})

    def conditions(self, backends: list[str], capabilities: dict[str, dict[str, str]]) -> list[Condition]:
        oc = openclaw_backend(backends)
        base = ("compaction", f"backend:{oc}") if oc else ("compaction",)
        base_name = NATIVE if oc else FALLBACK
        conds = [Condition(base_name, base)]
        for b in backends:
            if oc and b != oc and b.startswith("openclaw"):
                # another OpenClaw (the port beside the real one, or another preset): a native condition of its own
                conds.append(Condition(f"{NATIVE} ({b})", ("compaction", f"backend:{b}")))
                continue
            if b == oc or b in SKIP_AS_X:
                continue
            conds.append(Condition(f"{base_name} + {b}", (*base, f"backend:{b}")))
        return conds

    async def run_probe(self, ctx, probe: Probe, condition: Condition) -> dict[str, Any]:
        body = await ctx.answer_and_judge(probe, condition)
        body["judge_prompt"] = "JUDGE_SYSTEM"
        if self.options["pairwise"] and " + " in condition.name:  # "<base> + X": X is the last context block
            base = Condition(condition.name.split(" + ")[0], tuple(condition.context[:-1]))
            blocks, _ = await ctx.gather_context(probe, base)
            base_answer = (await ctx.answer(probe.question, blocks))["answer"]
            body["pairwise"] = await judges.pairwise_judge(ctx, probe.question, probe.ground_truth, base_answer,
                                                      body["answer"], C.stable_seed(self.seed, probe.id, condition.name))
            body["pairwise"]["a"], body["pairwise"]["b"] = base.name, condition.name
        return body

    # ------------------------------------------------------------------------------------------------
    def per_probe(self, samples: list[dict[str, Any]]) -> ProbeValues:
        """Per condition: the judge's score and its grounded/hallucinated indicators, the context tokens, and the
        keyword hit and latency of the condition's own backend (the last context block: X in "native + X")."""
        backend_of = condition_backends(samples)
        values = C.judged_probe_values(samples, backend_of, "judge_mean")
        return ProbeValues(values, specs={"judge_mean": (True, "score"), "hit": (True, "rate")},
                             tokens="context_tokens", backend_of=backend_of)

    def score(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"suite": self.name, "conditions": {}, "retrieval": {}, "categories": CATEGORIES}
        per_cond = self.probe_values(samples).values
        retrieval: dict[str, dict[str, Any]] = {}
        for cond, rows in C.by_condition(samples).items():
            scores = {r["probe_id"]: r["judge"]["score"] for r in rows if r.get("judge")}
            cats = {r["probe_id"]: r["category"] for r in rows}
            seed = C.stable_seed(self.seed, cond)
            pw = [r["pairwise"]["winner"] for r in rows if r.get("pairwise")]
            out["conditions"][cond] = {
                **judge_distribution(list(scores.values())),
                "mean_ci": C.summary(per_cond[cond]["judge_mean"], seed, "score"),
                "by_category": {c: judge_distribution([s for p, s in scores.items() if cats[p] == c]) for c in CATEGORIES},
                "context_tokens_mean": C.summary(per_cond[cond]["context_tokens"], seed)["mean"],
                "pairwise": ({"n": len(pw), "win": pw.count("b") / len(pw), "loss": pw.count("a") / len(pw),
                              "tie": pw.count("tie") / len(pw)} if pw else None),
            }
            for r in rows:
                for b, rec in (r.get("retrievals") or {}).items():
                    d = retrieval.setdefault(b, {"hits": {}, "lat": {}})
                    d["hits"][r["probe_id"]] = rec.get("hit")
                    d["lat"][r["probe_id"]] = rec.get("latency_ms")
        for b, d in retrieval.items():
            hits = {p: (1.0 if h else 0.0) for p, h in d["hits"].items() if h is not None}
            cats = {r["probe_id"]: r["category"] for r in samples}
            out["retrieval"][b] = {
                "hit_rate": C.summary(hits, C.stable_seed(self.seed, b), "rate"),
                "by_category": {c: C.summary({p: h for p, h in hits.items() if cats.get(p) == c}, unit="rate") for c in CATEGORIES},
                "latency": latency_summary([x for x in d["lat"].values() if x is not None]),
            }
        base = NATIVE if NATIVE in per_cond else FALLBACK if FALLBACK in per_cond else None
        out["baseline"] = base
        out["fallback"] = base == FALLBACK
        out["comparisons"] = C.compare_all(per_cond, base, [
            ("judge_mean", True, "score"), ("grounded_rate", True, "rate"), ("hallucination_rate", False, "rate"),
            ("context_tokens", False, "tokens")], seed=self.seed) if base else {}
        return out

    def render(self, metrics: dict[str, Any]) -> str:
        m = metrics["conditions"]
        base = metrics.get("baseline")
        conds = ([base] if base in m else []) + sorted(c for c in m if c != base)
        out = ["## Arclight (Cortex V1.1): condition × category", "",
               f"Scores 0-3 (3 grounded, 2 generic, 1 abstained, 0 hallucinated); {C.judge_label(metrics)}.", ""]
        if metrics.get("fallback"):
            out += ["> The openclaw backend was not in this run: the base condition is the compaction summary alone "
                    "(\"compacted\"), not OpenClaw native.", ""]
        rows = [[f"**Mean score (0-3)** [95% CI]{C.mock_tag(metrics, 'judge')}",
                 *(C.fmt_ci(m[c]["mean_ci"], 2) for c in conds)],
                ["Grounded (3)", *(C.fmt(m[c]["grounded"], pct=True) for c in conds)],
                ["Generic (2)", *(C.fmt(m[c]["generic"], pct=True) for c in conds)],
                ["Abstained (1)", *(C.fmt(m[c]["abstained"], pct=True) for c in conds)],
                ["Hallucinated (0)", *(C.fmt(m[c]["hallucinated"], pct=True) for c in conds)]]
        for k, label in CATEGORIES.items():
            n = max((m[c]["by_category"][k]["n"] for c in conds), default=0)
            rows.append([f"{k}: {label} ({n})", *(C.fmt(m[c]["by_category"][k]["mean"], 2) for c in conds)])
        rows.append(["Context tokens / prompt (cl100k)", *(C.fmt(m[c]["context_tokens_mean"], 0) for c in conds)])
        if any(m[c].get("pairwise") for c in conds):
            rows.append(["Pairwise vs base: win/tie/loss", *(
                "/".join(C.fmt(m[c]["pairwise"][k], pct=True) for k in ("win", "tie", "loss")) if m[c].get("pairwise")
                else "—" for c in conds)])
        out.append(C.md_table(["Metric", *conds], rows))
        out += C.mock_note(metrics)
        out += C.judge_agreement_line(metrics, "model 0-3")
        if NATIVE in conds:
            out += ["", "*OpenClaw native* = compaction summary + the last two sessions' notes + `memory_search` top 6, "
                        "from OpenClaw 2026.9.6 itself (`openclaw-real`) when it ran, else the port; *OpenClaw native "
                        "(X)* = the same from backend X."]
        r = metrics.get("retrieval") or {}
        if r:
            out += ["", "### Retrieval hit rate (a retrieved memory holds a ground-truth keyword)", ""]
            out.append(C.md_table(["backend", "hit rate [CI]", *CATEGORIES, "p50 ms", "p95 ms"], [
                [b, C.fmt_ci(r[b]["hit_rate"], pct=True), *(C.fmt(r[b]["by_category"][k]["mean"], pct=True) for k in CATEGORIES),
                 C.fmt(r[b]["latency"]["p50_ms"], 1), C.fmt(r[b]["latency"]["p95_ms"], 1)] for b in sorted(r)]))
        if metrics.get("comparisons"):
            out.append(C.render_comparisons(metrics["comparisons"]))
        return "\n".join(out)
