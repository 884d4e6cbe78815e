"""`quaid-weeks`: seed 001's weekly personal-memory corpus and its five query sets, generated deterministically.

Generator (suites/data/quaid_templates.py): per week, templates are drawn per category (facts, preferences,
entities, decisions; `mode` fast ≈ 46/week, full ≈ 76/week) with `Random(seed, 42 + week)`, and each template is
filled with `Random(seed, template, week)` (the seed used Python's salted hash(); a SHA-256 seed keeps runs
reproducible across processes). Week 0 adds the 10 edge facts (family, friends, pets, home); weeks ≥ 1 add 3-6
duplicate pairs, weeks ≥ 2 add 2-4 contradiction pairs; evolution chains add each step in its week.

Delivery, as in the seed: fact stores get every fact as its own message (sessions = Mon/Wed/Fri of each week,
namespace `facts`); journal-based backends get structured Markdown journals `memory/YYYY-MM-DD.md` plus a
`MEMORY.md` of the edge facts as Documents (namespace `journals`). Which one a backend gets follows its
"documents" capability: a backend whose documents become workspace files (detail mentions file/path/
workspace) is journal-based; others get the facts (option `delivery` forces facts|journals). Both namespaces
are ingested into every backend by the runner; only the chosen one is queried.

Query sets: standard (60), old memory (20), adversarial (20; easy 1 / medium 9 / hard 10; hard ones without
expected strings are N/A), change detection (6 current-state, 5 change-awareness with split old/new keywords;
filtered to chains complete within `weeks`), null (10). Metrics: seed 001 §5 plus the composite "Accuracy",
token spend (cl100k) and efficiency ratio; the scorecard of §8 (13 metrics, tie thresholds 0.005 / 1.0) with
bootstrap CIs and paired permutation p-values against the baseline (OpenClaw when in the run).
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from services.common.tokens import count_tokens
from services.common.types import Document, IngestBatch, Message, Session
from services.coordinator.metrics import memory_state as ms
from services.coordinator.metrics import retrieval as rt
from services.coordinator.metrics.latency import latency_summary
from services.coordinator.metrics.tokens import efficiency_ratio
from services.coordinator.suites import common as C
from services.coordinator.suites.base import (
    Condition,
    Probe,
    ProbeValues,
    Suite,
    SuiteData,
    condition_backends,
)
from services.coordinator.suites.data import quaid_templates as T
from services.coordinator.suites.registry import register

BASE_DATE = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)  # a Monday, as in the seed's example journals
DAYS = (0, 2, 4)  # Mon, Wed, Fri journals
SECTION = {"relationships": "People", "entities": "People", "edge": "People", "preferences": "Preferences & Decisions",
           "decisions": "Preferences & Decisions"}
_PH = re.compile(r"\{(NAME|FOOD|TECH|AMOUNT|PLACE|DATE|WEEK)\}")
RELATIONSHIP_HINTS = ("Mom", "sister", "{NAME}'s", "with {NAME}", "family", "card to")


@dataclass(frozen=True)
class Fact:
    id: str
    week: int
    day: int
    text: str
    category: str
    kind: str  # template | edge | duplicate | contradiction | evolution
    key: str = ""


def fill(template: str, week: int, seed: int) -> str:
    """Placeholder substitution with per-(template, week) seeded randomness."""
    rng = random.Random(C.stable_seed(seed, template, week))

    def sub(m: re.Match) -> str:
        ph = m.group(1)
        if ph == "WEEK":
            return str(week)
        if ph == "DATE":
            d = BASE_DATE + timedelta(days=7 * week + rng.randint(0, 6))
            return d.strftime("%B %d")
        return rng.choice(T.POOLS[ph])

    return _PH.sub(sub, template)


def _template_category(cat: str, template: str) -> str:
    if cat == "facts" and any(h in template for h in RELATIONSHIP_HINTS):
        return "relationships"
    return cat


def week_facts(week: int, mode: str = "fast", seed: int = 0) -> list[Fact]:
    """Every fact of one week, deterministic in (week, mode, seed)."""
    rng = random.Random(C.stable_seed(seed, 42 + week))
    out: list[tuple[str, str, str, str]] = []  # (text, category, kind, key)
    for cat, n in T.PER_WEEK[mode].items():
        for t in rng.sample(T.TEMPLATES[cat], min(n, len(T.TEMPLATES[cat]))):
            out.append((fill(t, week, seed), _template_category(cat, t), "template", ""))
    if week == 0:
        out += [(text, "edge", "edge", section) for section, text in T.EDGE_FACTS]
    if week >= 1:
        for a, b in rng.sample(T.DUPLICATES, rng.randint(3, 6)):
            out += [(a, "facts", "duplicate", a), (b, "facts", "duplicate", a)]
    if week >= 2:
        for a, b in rng.sample(T.CONTRADICTIONS, rng.randint(2, 4)):
            out += [(a, "facts", "contradiction", a), (b, "facts", "contradiction", a)]
    for key, chain in T.EVOLUTIONS:
        for w, text in chain:
            if w == week:
                out.append((text, "relationships" if key in ("alex_home", "rosa_job") else "facts", "evolution", key))
    facts = []
    for i, (text, cat, kind, key) in enumerate(out):
        # evolution steps and edge facts land on Monday so the order inside a week is stable and old-before-new
        day = 0 if kind in ("edge", "evolution") else rng.choice(DAYS)
        facts.append(Fact(f"w{week}-{i:03d}", week, day, text, cat, kind, key))
    return facts


def generate(weeks: int, mode: str, seed: int) -> list[Fact]:
    return [f for w in range(weeks) for f in week_facts(w, mode, seed)]


def journal_date(week: int, day: int) -> datetime:
    return BASE_DATE + timedelta(days=7 * week + day)


def render_journal(date: datetime, facts: list[Fact]) -> str:
    sections: dict[str, list[str]] = defaultdict(list)
    for f in facts:
        sections[SECTION.get(f.category, "What Happened")].append(f"- {f.text}")
    lines = [f"# {date.date().isoformat()}", "", "## Summary",
             f"Notes from {date.strftime('%A')} — {len(facts)} items logged."]
    for name in ("What Happened", "People", "Preferences & Decisions"):
        if sections.get(name):
            lines += ["", f"## {name}", *sections[name]]
    return "\n".join(lines) + "\n"


def render_memory_md() -> str:
    groups: dict[str, list[str]] = defaultdict(list)
    for section, text in T.EDGE_FACTS:
        groups[section].append(f"- {text}")
    lines = ["# Core Memories"]
    for section, items in groups.items():
        lines += ["", f"## {section}", *items]
    return "\n".join(lines) + "\n"


def build_corpora(facts: list[Fact]) -> dict[str, IngestBatch]:
    by_day: dict[tuple[int, int], list[Fact]] = defaultdict(list)
    for f in facts:
        by_day[(f.week, f.day)].append(f)
    sessions, docs = [], []
    edge_ids = tuple(f.id for f in facts if f.kind == "edge")
    docs.append(Document(id="MEMORY.md", text=render_memory_md(), created_at=BASE_DATE, path="MEMORY.md",
                         evidence_ids=edge_ids))
    for (w, d), fs in sorted(by_day.items()):
        date = journal_date(w, d)
        sessions.append(Session(f"w{w}-d{d}", date, tuple(
            Message(f.id, "user", f.text, date + timedelta(minutes=i)) for i, f in enumerate(fs))))
        path = f"memory/{date.date().isoformat()}.md"
        docs.append(Document(id=path, text=render_journal(date, fs), created_at=date, path=path,
                             evidence_ids=tuple(f.id for f in fs)))
    return {"facts": IngestBatch(sessions=tuple(sessions), batch_id="quaid-facts"),
            "journals": IngestBatch(documents=tuple(docs), batch_id="quaid-journals")}


def build_probes(weeks: int, reference: datetime) -> list[Probe]:
    probes = []
    for i, (q, exp) in enumerate(T.STANDARD):
        probes.append(Probe(f"std-{i:02d}", q, "standard", expected=list(exp), meta={"set": "standard"}))
    for i, (q, exp) in enumerate(T.OLD_MEMORY):
        probes.append(Probe(f"old-{i:02d}", q, "old_memory", expected=list(exp), meta={"set": "old_memory"}))
    for i, (q, exp, tier, typ) in enumerate(T.ADVERSARIAL):
        probes.append(Probe(f"adv-{i:02d}", q, f"adversarial_{tier}", expected=list(exp),
                            meta={"set": "adversarial", "tier": tier, "type": typ}))
    chain_done = {k: max(w for w, _ in ch) for k, ch in T.EVOLUTIONS}
    for name, items in (("current_state", T.CURRENT_STATE), ("change_awareness", T.CHANGE_AWARENESS)):
        for i, (q, old, new, key) in enumerate(items):
            if chain_done[key] >= weeks:
                continue  # the new fact is not in the corpus yet (seed §4.6: filter by max_week)
            probes.append(Probe(f"{name[:3]}-{i:02d}", q, name, expected=list(new),
                                meta={"set": name, "old_keywords": old, "new_keywords": new, "key": key}))
    for i, q in enumerate(T.NULL):
        probes.append(Probe(f"null-{i:02d}", q, "null", meta={"set": "null"}))
    return [dataclasses.replace(p, namespace="facts", reference_time=reference) for p in probes]


def delivery_for(backend: str, caps: dict[str, str], option: str) -> str:
    if option in ("facts", "journals"):
        return option
    detail = (caps or {}).get("documents")
    if detail is not None and re.search(r"file|path|workspace|markdown", detail, re.I):
        return "journals"
    return "facts"


SCORECARD = [("mrr", True, "rate"), ("recall_at_1", True, "rate"), ("recall_at_3", True, "rate"),
             ("recall_at_5", True, "rate"), ("precision_at_5", True, "rate"), ("ndcg_at_5", True, "rate"),
             ("old_memory_recall_at_5", True, "rate"), ("adversarial_hit_rate", True, "rate"),
             ("current_state_accuracy", True, "rate"), ("change_awareness", True, "rate"),
             ("relevance_density", True, "rate"), ("token_spend", False, "tokens"), ("latency_ms", False, "ms")]


@register
class QuaidWeeksSuite(Suite):
    name = "quaid-weeks"
    description = ("Quaid weekly corpus (seed 001): templated facts over N weeks with duplicates, contradictions "
                   "and evolution chains; standard/old/adversarial/change/null query sets; IR metrics + scorecard.")
    retrieval_headline = "recall_at_5"
    defaults = {"weeks": 4, "mode": "fast", "dump_journals": None, "delivery": "auto", "top_k": 6,
                "retrieve_mode": "fast"}

    def __init__(self, options=None, seed: int = 0):
        super().__init__(options, seed)
        if self.options["mode"] not in ("fast", "full"):
            raise ValueError("quaid-weeks: mode must be 'fast' or 'full'")
        if not (1 <= int(self.options["weeks"]) <= 52):
            raise ValueError("quaid-weeks: weeks must be between 1 and 52")
        self._delivery: dict[str, str] = {}

    def retrieve_mode(self, backend: str) -> str:
        return str(self.options["retrieve_mode"])

    def load(self) -> SuiteData:
        weeks = int(self.options["weeks"])
        facts = generate(weeks, self.options["mode"], self.seed)
        corpora = build_corpora(facts)
        reference = journal_date(weeks, 0)
        probes = build_probes(weeks, reference)
        if self.options["dump_journals"]:
            out = Path(self.options["dump_journals"])
            for d in corpora["journals"].documents:
                p = out / d.path
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(d.text)
        kinds: dict[str, int] = defaultdict(int)
        for f in facts:
            kinds[f.kind] += 1
        return SuiteData(corpora=corpora, probes=probes, info={
            "generator": "services/coordinator/suites/data/quaid_templates.py (written for memrig after seed 001)",
            "weeks": weeks, "mode": self.options["mode"], "facts": len(facts), "by_kind": dict(kinds),
            "journals": len(corpora["journals"].documents) - 1, "seeds": {"suite": self.seed,
                                                                           "week_rng": "sha256(seed, 42 + week)",
                                                                           "fill_rng": "sha256(seed, template, week)"},
            "probes_by_set": {s: sum(1 for p in probes if p.meta["set"] == s)
                              for s in ("standard", "old_memory", "adversarial", "current_state",
                                        "change_awareness", "null")},
        })

    def conditions(self, backends: list[str], capabilities: dict[str, dict[str, str]]) -> list[Condition]:
        self._delivery = {b: delivery_for(b, capabilities.get(b, {}), self.options["delivery"]) for b in backends}
        return C.retrieval_conditions(backends)

    def namespaces_for(self, backend: str, capabilities: dict[str, str], corpora) -> list[str]:
        return [delivery_for(backend, capabilities, self.options["delivery"])]

    async def run_probe(self, ctx, probe: Probe, condition: Condition) -> dict[str, Any]:
        backend = condition.backends[0]
        ns = self._delivery.get(backend) or delivery_for(backend, {}, self.options["delivery"])
        rec = await ctx.retrieve(backend, dataclasses.replace(probe, namespace=ns))
        return {"retrievals": {backend: rec}, "delivery": ns,
                "context_tokens": count_tokens(rec["formatted_context"] or "")}

    # ------------------------------------------------------------------------------------------------
    def per_probe(self, samples: list[dict[str, Any]]) -> ProbeValues:
        values: dict[str, dict[str, dict[str, float | None]]] = {}
        for cond, rows in C.by_condition(samples).items():
            v: dict[str, dict[str, float | None]] = defaultdict(dict)
            for r in rows:
                pid, meta, rec = r["probe_id"], r.get("meta") or {}, C.retrieval_of(r) or {"memories": []}
                texts = C.texts_of(rec)
                exp = r.get("expected") or []
                s = meta.get("set")
                if s == "standard":
                    rels = rt.relevance_flags(texts, exp)
                    v["mrr"][pid] = rt.reciprocal_rank(rels)
                    v["recall_at_1"][pid] = rt.recall_at_1(rels)
                    v["recall_at_3"][pid] = rt.recall_at_3(rels)
                    v["recall_at_5"][pid] = rt.recall_at_5(rels)
                    v["precision_at_5"][pid] = rt.precision_at_5(rels)
                    v["ndcg_at_5"][pid] = rt.ndcg_at_5(rels)
                    v["relevance_density"][pid] = rt.relevance_density(texts, exp) if any(rels) else None
                elif s == "old_memory":
                    v["old_memory_recall_at_5"][pid] = ms.old_memory_recall(texts, exp)
                elif s == "adversarial":
                    v["adversarial_hit_rate"][pid] = ms.adversarial_hit(texts, exp)
                elif s == "current_state":
                    v["current_state_accuracy"][pid] = ms.current_state_correct(texts, meta["old_keywords"],
                                                                                meta["new_keywords"])
                elif s == "change_awareness":
                    v["change_awareness"][pid] = ms.change_aware(texts, meta["old_keywords"], meta["new_keywords"])
                elif s == "null":
                    v["null_false_positive_rate"][pid] = ms.null_false_positive(texts)
                v["token_spend"][pid] = float(r.get("context_tokens", 0))
                v["latency_ms"][pid] = rec.get("latency_ms")
            values[cond] = dict(v)
        return ProbeValues(values, specs={n: (hib, unit) for n, hib, unit in SCORECARD},
                           backend_of=condition_backends(samples))

    def score(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"suite": self.name, "conditions": {}}
        per_cond = self.probe_values(samples).values
        for cond, rows in C.by_condition(samples).items():
            v = per_cond[cond]
            lat = [x for x in v["latency_ms"].values() if x is not None]
            tiers: dict[str, list[float | None]] = defaultdict(list)
            for r in rows:
                meta = r.get("meta") or {}
                if meta.get("set") == "adversarial":
                    tiers[meta.get("tier", "")].append(v["adversarial_hit_rate"][r["probe_id"]])
            seed = C.stable_seed(self.seed, cond)
            summ = {m: C.summary(x, seed, C.unit_of(m)) for m, x in v.items()}  # an all-0/1 rate: Wilson
            comps = {k: (summ.get(k) or {}).get("mean") for k in ms.ACCURACY_WEIGHTS}
            out["conditions"][cond] = {
                "n": len(rows), "delivery": next((r.get("delivery") for r in rows if r.get("delivery")), None),
                "metrics": summ, "accuracy": ms.composite_accuracy(comps),
                "accuracy_missing": [k for k, x in comps.items() if x is None],
                "adversarial_by_tier": {t: {"n": sum(1 for x in xs if x is not None),
                                            "na": sum(1 for x in xs if x is None),
                                            "hit_rate": rt.mean(xs)} for t, xs in sorted(tiers.items())},
                "latency": latency_summary(lat)}
        # The strongest native profile on the seed's composite accuracy (one value per condition).
        baseline, out["baseline_rule"] = C.scorecard_baseline(
            self.probe_values(samples), "accuracy", {c: out["conditions"][c]["accuracy"] for c in per_cond})
        out["baseline"] = baseline
        if baseline:
            base_tok = out["conditions"][baseline]["metrics"].get("token_spend", {}).get("mean")
            for co in out["conditions"].values():
                co["efficiency_ratio_vs_baseline"] = efficiency_ratio(base_tok, co["metrics"].get("token_spend", {}).get("mean"))
        out["comparisons"] = C.compare_all(per_cond, baseline, SCORECARD, seed=self.seed) if baseline else {}
        return out

    def render(self, metrics: dict[str, Any]) -> str:
        m = metrics["conditions"]
        conds = sorted(m)
        out = ["## Quaid weekly corpus (seed 001)", "",
               "Relevance = any expected substring in a returned memory (case-insensitive). IR metrics over the 60 "
               "standard queries; Accuracy = 0.30·MRR + 0.25·R@5 + 0.20·P@5 + 0.15·adversarial + 0.10·old memory. "
               "Tokens are cl100k tokens of the injected context (the seed used chars/4). Retrieval only; no judge.",
               "", "### Headline", ""]
        rows = [[c, m[c]["delivery"], C.fmt(m[c]["accuracy"]),
                 C.fmt((m[c]["metrics"].get("token_spend") or {}).get("mean"), 1),
                 C.fmt(m[c].get("efficiency_ratio_vs_baseline"), 2), C.fmt(m[c]["latency"]["p50_ms"], 1)] for c in conds]
        out.append(C.md_table(["backend", "delivery", "Accuracy", "tokens/query", "efficiency vs baseline",
                               "p50 ms"], rows))
        names = [n for n, _, _ in SCORECARD[:-2]] + ["null_false_positive_rate"]
        out += ["", "### All metrics (mean [95% CI])", ""]
        out.append(C.md_table(["metric", *conds], [[n, *(C.fmt_ci(m[c]["metrics"].get(n)) for c in conds)] for n in names]))
        out += ["", "### Adversarial by tier (hit rate; N/A = hard queries without expected strings)", ""]
        tiers = sorted({t for c in conds for t in m[c]["adversarial_by_tier"]})
        out.append(C.md_table(["backend", *tiers], [[c, *(
            f"{C.fmt(m[c]['adversarial_by_tier'][t]['hit_rate'])} (n={m[c]['adversarial_by_tier'][t]['n']}, "
            f"N/A={m[c]['adversarial_by_tier'][t]['na']})" if t in m[c]["adversarial_by_tier"] else "—" for t in tiers)]
            for c in conds]))
        if metrics.get("comparisons"):
            out += C.baseline_note(metrics)
            out.append(C.render_comparisons(metrics["comparisons"], "Scorecard (seed 001 §8)"))
        return "\n".join(out)
