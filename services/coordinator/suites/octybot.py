"""`octybot`: Octybot's memory test suite v2 shape (seed 003) — 40 retrieval queries over nine categories and
10 store-then-retrieve cases, over a small agency corpus written for memrig (suites/data/octybot_corpus.py).

A query passes when EVERY expected string occurs in what the backend retrieved (its formatted context plus
the memory texts), case-insensitively, after normalising Unicode hyphens/dashes (U+2010-2015) to '-' and
collapsing whitespace (the seed's rule). Queries with no expected strings (unknown entity, small talk) are
vacuous passes in the seed; here they are reported apart as N/A with the share of them that returned
anything. Store-then-retrieve: the rig's contract ingests before probing, so each stored text is a later
session (dated after the seed corpus) in the same namespace; a case passes when its follow-up query
retrieves the new information (corrections: the new value). Retrieval-only conditions.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime, timedelta
from typing import Any

from services.common.types import IngestBatch, Message, Session
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
from services.coordinator.suites.data import octybot_corpus as D
from services.coordinator.suites.registry import register

START = datetime(2026, 2, 2, 9, 0, tzinfo=UTC)
_HYPHENS = re.compile("[\u2010-\u2015]")
ACKS = ("Noted.", "Got it, I'll remember that.", "Thanks, saved.", "Understood.")


def normalise(text: str) -> str:
    """Lower-case, Unicode hyphens/dashes -> '-', NBSP and other spaces collapsed to one space."""
    text = unicodedata.normalize("NFKC", text or "")
    return " ".join(_HYPHENS.sub("-", text).lower().split())


def passes(context: str, expected: list[str]) -> bool | None:
    """True when every expected string is in the context (normalised); None (N/A) when nothing is expected."""
    if not expected:
        return None
    ctx = normalise(context)
    return all(normalise(e) in ctx for e in expected)


def build_sessions() -> tuple[list[Session], list[Session]]:
    seed_sessions, store_sessions = [], []
    for i, (day, statements) in enumerate(D.SESSIONS):
        msgs = []
        for j, st in enumerate(statements):
            msgs.append(Message(f"oc-s{i:02d}-m{2 * j}", "user", st))
            msgs.append(Message(f"oc-s{i:02d}-m{2 * j + 1}", "assistant", ACKS[(i + j) % len(ACKS)]))
        seed_sessions.append(Session(f"oc-s{i:02d}", START + timedelta(days=day), tuple(msgs)))
    last = max(d for d, _ in D.SESSIONS)
    for k, (sid, _kind, text, _q, _e) in enumerate(D.STORE):
        store_sessions.append(Session(f"oc-{sid}", START + timedelta(days=last + 2 + k), (
            Message(f"oc-{sid}-m0", "user", text), Message(f"oc-{sid}-m1", "assistant", "Saved."))))
    return seed_sessions, store_sessions


@register
class OctybotSuite(Suite):
    name = "octybot"
    description = ("Octybot v2 shape (seed 003): 40 retrieval queries in nine categories + 10 store-then-retrieve "
                   "cases; pass = every expected string in the retrieved context.")
    retrieval_headline = "pass"
    defaults = {"top_k": 6, "mode": "fast"}

    def load(self) -> SuiteData:
        seed_s, store_s = build_sessions()
        ref = max(s.started_at for s in store_s) + timedelta(days=1)
        probes = [Probe(id=pid, question=q, category=cat, expected=list(exp), namespace="agency", reference_time=ref,
                        meta={"kind": "retrieval"}) for pid, cat, q, exp in D.RETRIEVAL]
        probes += [Probe(id=sid, question=q, category="store", expected=list(exp), namespace="agency",
                         reference_time=ref, meta={"kind": "store", "store_kind": kind, "stored": text})
                   for sid, kind, text, q, exp in D.STORE]
        return SuiteData(corpora={"agency": IngestBatch(sessions=tuple(seed_s + store_s), batch_id="octybot")},
                         probes=probes,
                         info={"source": "services/coordinator/suites/data/octybot_corpus.py (written for memrig "
                                         "after seed 003)", "sessions": len(seed_s) + len(store_s),
                               "retrieval_queries": len(D.RETRIEVAL), "store_cases": len(D.STORE)})

    def conditions(self, backends: list[str], capabilities: dict[str, dict[str, str]]) -> list[Condition]:
        return C.retrieval_conditions(backends)

    async def run_probe(self, ctx, probe: Probe, condition: Condition) -> dict[str, Any]:
        backend = condition.backends[0]
        rec = await ctx.retrieve(backend, probe)
        context = "\n".join([rec["formatted_context"] or ""] + C.texts_of(rec))
        from services.common.tokens import count_tokens

        return {"retrievals": {backend: rec}, "passed": passes(context, probe.expected),
                "context_tokens": count_tokens(rec["formatted_context"] or "")}

    def per_probe(self, samples: list[dict[str, Any]]) -> ProbeValues:
        values: dict[str, dict[str, dict[str, float | None]]] = {}
        for cond, rows in C.by_condition(samples).items():
            vals: dict[str, dict[str, float | None]] = {"pass": {}, "retrieval_pass": {}, "store_pass": {},
                                                        "token_spend": {}, "latency_ms": {}}
            for r in rows:
                pid, rec = r["probe_id"], C.retrieval_of(r) or {"memories": []}
                ctx = "\n".join([rec.get("formatted_context") or ""] + C.texts_of(rec))
                p = passes(ctx, r.get("expected") or [])  # recomputed from the raw record, not trusted
                v = None if p is None else (1.0 if p else 0.0)
                vals["pass"][pid] = v
                kind = (r.get("meta") or {}).get("kind")
                vals["retrieval_pass"][pid] = v if kind == "retrieval" else None
                vals["store_pass"][pid] = v if kind == "store" else None
                vals["token_spend"][pid] = float(r.get("context_tokens", 0))
                vals["latency_ms"][pid] = rec.get("latency_ms")
            values[cond] = vals
        return ProbeValues(values, backend_of=condition_backends(samples))

    def score(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"suite": self.name, "conditions": {}, "category_names": D.CATEGORY_NAMES}
        per_cond = self.probe_values(samples).values
        for cond, rows in C.by_condition(samples).items():
            vals = per_cond[cond]
            na_returned = [bool((C.retrieval_of(r) or {}).get("memories")) for r in rows
                           if vals["pass"][r["probe_id"]] is None]
            lat = [x for x in vals["latency_ms"].values() if x is not None]
            cats = {r["probe_id"]: r["category"] for r in rows}
            seed = C.stable_seed(self.seed, cond)
            out["conditions"][cond] = {
                "n": len(rows), "overall": {m: C.summary(v, seed, C.unit_of(m)) for m, v in vals.items()},
                "by_category": {cat: C.summary({p: x for p, x in vals["pass"].items() if cats[p] == cat}, seed, "rate")
                                for cat in sorted(set(cats.values()))},
                "na_queries": len(na_returned), "na_returned_something": sum(na_returned),
                "failed": sorted(p for p, x in vals["pass"].items() if x == 0.0),
                "latency": latency_summary(lat)}
        baseline, out["baseline_rule"] = C.scorecard_baseline(self.probe_values(samples), "pass")
        out["baseline"] = baseline
        out["comparisons"] = C.compare_all(per_cond, baseline, [
            ("pass", True, "rate"), ("retrieval_pass", True, "rate"), ("store_pass", True, "rate"),
            ("token_spend", False, "tokens"), ("latency_ms", False, "ms")], seed=self.seed) if baseline else {}
        return out

    def render(self, metrics: dict[str, Any]) -> str:
        m = metrics["conditions"]
        conds = sorted(m)
        out = ["## Octybot (seed 003 shape)", "",
               "Pass = every expected string occurs in the retrieved context (case-insensitive, Unicode hyphens "
               "normalised, whitespace collapsed). Retrieval only; no judge involved.", ""]
        rows = [[c, C.fmt_ci(m[c]["overall"]["pass"], pct=True), C.fmt_ci(m[c]["overall"]["retrieval_pass"], pct=True),
                 C.fmt_ci(m[c]["overall"]["store_pass"], pct=True),
                 f"{m[c]['na_returned_something']}/{m[c]['na_queries']}",
                 C.fmt(m[c]["overall"]["token_spend"]["mean"], 0), C.fmt(m[c]["latency"]["p50_ms"], 1)] for c in conds]
        out.append(C.md_table(["backend", "overall pass", "retrieval (40)", "store→retrieve (10)",
                               "N/A queries returning something", "ctx tokens", "p50 ms"], rows))
        cats = list(metrics["category_names"])
        out += ["", "### Pass rate by category", ""]
        out.append(C.md_table(["category", *conds], [
            [metrics["category_names"][k], *(C.fmt((m[c]["by_category"].get(k) or {}).get("mean"), pct=True)
                                             for c in conds)] for k in cats]))
        out += ["", "Failed: " + "; ".join(f"{c}: {', '.join(m[c]['failed']) or 'none'}" for c in conds)]
        if metrics.get("comparisons"):
            out += C.baseline_note(metrics)
            out.append(C.render_comparisons(metrics["comparisons"]))
        return "\n".join(out)
