"""Helpers shared by the quality suites: condition builders, per-probe metric tables from samples, paired
comparisons with CIs and p-values, and Markdown rendering bits. The judges themselves (rubric, binary,
pairwise, the QA judge) are in services/coordinator/judges.py.

Everything here reads only samples (the dicts the runner appends to samples.jsonl: its base fields —
condition, probe_id, category, expected, evidence_ids, meta — plus what a suite's run_probe returned), so a
run can be re-scored without re-running.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from services.common.tokens import count_tokens
from services.coordinator import baseline as baseline_rule_module
from services.coordinator import stats
from services.coordinator.judge_agreement import qa_judge_line
from services.coordinator.metrics import budget
from services.coordinator.metrics.registry import direction
from services.coordinator.suites.base import Condition, SuiteUnavailable

# ------------------------------------------------------------------------------------------------------
# Conditions


def retrieval_conditions(backends: list[str]) -> list[Condition]:
    """One retrieval-only condition per backend, named after it."""
    return [Condition(b, (f"backend:{b}",), answer=False) for b in backends]


def answer_conditions(backends: list[str]) -> list[Condition]:
    """One answering condition per backend (its retrieved context only), named after it."""
    return [Condition(b, (f"backend:{b}",), answer=True) for b in backends]


# ------------------------------------------------------------------------------------------------------
# Samples -> per-probe values


def by_condition(samples: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Samples per condition, conditions by name and each list by probe id: concurrent probes append to
    samples.jsonl in any order, and nothing computed from it may depend on that order."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in samples:
        out[s["condition"]].append(s)
    return {c: sorted(out[c], key=lambda s: str(s.get("probe_id"))) for c in sorted(out)}


def retrieval_of(sample: dict[str, Any], backend: str | None = None) -> dict[str, Any] | None:
    """The sample's retrieval record for `backend` (default: the only/first one)."""
    recs = sample.get("retrievals") or {}
    if backend is not None:
        return recs.get(backend)
    return next(iter(recs.values()), None)


def texts_of(rec: dict[str, Any] | None) -> list[str]:
    return [m.get("text") or "" for m in (rec or {}).get("memories", [])]


def per_probe(rows: Iterable[dict[str, Any]], fn: Callable[[dict[str, Any]], float | None]) -> dict[str, float | None]:
    return {r["probe_id"]: fn(r) for r in rows}


def judged_probe_values(samples: list[dict[str, Any]], backend_of: Mapping[str, str], score_key: str
                        ) -> dict[str, dict[str, dict[str, float | None]]]:
    """Per condition of a judged suite (Cortex V1, Arclight): the judge's 0-3 score under `score_key` and its
    grounded/hallucinated indicators, the context tokens, and the keyword hit and latency of the condition's own
    backend (`backend_of[condition]`; none when the condition has no backend)."""
    values: dict[str, dict[str, dict[str, float | None]]] = {}
    for cond, rows in by_condition(samples).items():
        scores = {r["probe_id"]: r["judge"]["score"] for r in rows if r.get("judge")}
        recs = {r["probe_id"]: (r.get("retrievals") or {}).get(backend_of.get(cond, "")) for r in rows}
        values[cond] = {
            score_key: {p: float(s) for p, s in scores.items()},
            "grounded_rate": {p: 1.0 if s == 3 else 0.0 for p, s in scores.items()},
            "hallucination_rate": {p: 1.0 if s == 0 else 0.0 for p, s in scores.items()},
            "context_tokens": {r["probe_id"]: float(r.get("context_tokens", 0)) for r in rows},
            "hit": {p: None if not rec or rec.get("hit") is None else float(bool(rec["hit"]))
                    for p, rec in recs.items()},
            "latency_ms": {p: (rec or {}).get("latency_ms") for p, rec in recs.items()},
        }
    return values


def summary(values: Mapping[str, float | None] | Iterable[float | None], seed: int = 0, unit: str | None = None,
            clusters: Mapping[str, str] | None = None, cluster_unit: str = "conversation") -> dict[str, Any]:
    """{n, units, mean, ci: [lo, hi], method} by stats.interval: probe-keyed values are resampled in probe-id
    order (by cluster when `clusters` maps probe -> independent unit); unit "rate" turns an all-0 or all-1 rate's
    interval into a Wilson interval. A plain list keeps its order (there are no ids to sort by)."""
    if not isinstance(values, Mapping):
        values = {f"{i:09d}": v for i, v in enumerate(values)}
    return stats.interval(values, clusters, seed, unit or "value", cluster_unit)


def unit_of(metric: str) -> str:
    """The unit of a metric name for intervals (metrics.registry.direction: an unregistered name is an error)."""
    return direction(metric)[1]


def default_data_dir() -> Path:
    """env MEMRIG_DATA_DIR, else <repo>/../shared/data (the workplace layout)."""
    env = os.environ.get("MEMRIG_DATA_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3].parent / "shared" / "data"


def resolve_data_file(option: str | None, *relative: str) -> Path:
    base = Path(option) if option else default_data_dir()
    path = base.joinpath(*relative)
    if not path.exists():
        raise SuiteUnavailable(
            f"{path} not found: pass the data directory as option data_dir=... or set MEMRIG_DATA_DIR "
            f"(the public file is not shipped with memrig)")
    return path


def stratified_sample(items: list[Any], key: Callable[[Any], str], n: int, rng: random.Random) -> list[Any]:
    """n items, allocated to strata in proportion to their size (largest remainder, at least one per stratum
    when n allows), each stratum shuffled by `rng`; the result keeps the input order. n <= 0 or n >= len
    returns everything."""
    if n <= 0 or n >= len(items):
        return list(items)
    strata: dict[str, list[int]] = defaultdict(list)
    for i, it in enumerate(items):
        strata[key(it)].append(i)
    names = sorted(strata)
    total = len(items)
    quota = {s: n * len(strata[s]) / total for s in names}
    alloc = {s: int(quota[s]) for s in names}
    if n >= len(names):
        for s in names:
            alloc[s] = max(1, alloc[s])
    while sum(alloc.values()) > n:  # the minimum of one can overshoot: take back from the largest
        big = max(names, key=lambda s: (alloc[s], s))
        alloc[big] -= 1
    for s in sorted(names, key=lambda s: (-(quota[s] - int(quota[s])), s)):
        if sum(alloc.values()) >= n:
            break
        if alloc[s] < len(strata[s]):
            alloc[s] += 1
    chosen: list[int] = []
    for s in names:
        idx = list(strata[s])
        rng.shuffle(idx)
        chosen += idx[: min(alloc[s], len(idx))]
    return [items[i] for i in sorted(chosen)]


def load_info(suite: Any) -> dict[str, Any] | None:
    """The suite's load() info (repair counts, sample sizes) for score(): cached from this process's load, or
    recomputed (loading is deterministic) when a run is re-scored in a fresh process; None if unavailable."""
    info = getattr(suite, "_info", None)
    if info is None:
        try:
            info = suite.load().info
        except Exception:  # data moved since the run: the report just omits these counts
            return None
    return info


def stable_seed(*parts: object) -> int:
    """A seed derived from strings (stable across processes, unlike hash())."""
    h = hashlib.sha256("\x00".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:4], "big")


MetricSpec = str | tuple[str, bool, str]


def metric_spec(spec: MetricSpec) -> tuple[str, bool, str]:
    """(name, higher_is_better, unit) by metrics.registry.direction: a registered metric name, or a tuple declaring a
    name only this suite computes (a tuple contradicting the registry, or an unknown bare name, is an error)."""
    if isinstance(spec, tuple):
        name, hib, unit = spec
        return (name, *direction(name, {name: (hib, unit)}))
    return (spec, *direction(spec))


def compare_all(per_cond: Mapping[str, Mapping[str, Mapping[str, float | None]]], baseline: str,
                metric_names: list[MetricSpec], seed: int = 0, clusters: Mapping[str, str] | None = None,
                cluster_unit: str = "conversation") -> dict[str, Any]:
    """For every condition other than `baseline`: paired comparisons on each metric (bootstrap CIs, permutation
    p, winner with the seed's tie threshold) and the win/loss/tie scorecard. `per_cond[cond][metric][probe]`.
    `clusters` (probe -> independent unit) makes both the CIs and the permutation test work by cluster."""
    out: dict[str, Any] = {}
    if baseline not in per_cond:
        return out
    for cond in sorted(per_cond):
        if cond == baseline:
            continue
        comps = []
        for i, spec in enumerate(metric_names):
            name, hib, unit = metric_spec(spec)
            a = per_cond[baseline].get(name, {})
            b = per_cond[cond].get(name, {})
            if not a and not b:
                continue
            comps.append(stats.compare(name, baseline, cond, a, b, hib, unit, seed=seed + 7919 * i,
                                       clusters=clusters, cluster_unit=cluster_unit))
        out[cond] = {"baseline": baseline, "comparisons": [c.to_json() for c in comps],
                     "scorecard": stats.scorecard(comps)}
    return out


def scorecard_baseline(pv: Any, metric: str, means: Mapping[str, float | None] | None = None
                       ) -> tuple[str | None, str]:
    """(the condition every scorecard compares with, why): services/coordinator/baseline.choose on `metric` over a
    suite's ProbeValues (`means` when the suite's metric is one value per condition, not per probe)."""
    return baseline_rule_module.choose(pv.values, pv.backend_of,
                                       means if means is not None else baseline_rule_module.means_of(pv.values, metric),
                                       metric)


# ------------------------------------------------------------------------------------------------------
# Rendering


def fmt(v: Any, digits: int = 3, pct: bool = False) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int | float):
        return f"{v * 100:.1f}%" if pct else f"{v:.{digits}f}"
    return str(v)


def fmt_ci(s: Mapping[str, Any] | None, digits: int = 3, pct: bool = False) -> str:
    """'0.512 [0.401, 0.622]' from a summary dict."""
    if not s or s.get("mean") is None:
        return "—"
    lo, hi = (s.get("ci") or [None, None])[:2]
    if lo is None:
        return fmt(s["mean"], digits, pct)
    return f"{fmt(s['mean'], digits, pct)} [{fmt(lo, digits, pct)}, {fmt(hi, digits, pct)}]"


def md_table(header: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(str(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def judge_label(metrics: Mapping[str, Any]) -> str:
    """Who judged: the runner puts the judge identity in metrics['judge']; offline numbers say so."""
    j = metrics.get("judge")
    if not j:
        return "judge: not recorded"
    if isinstance(j, str):
        return f"judge: {j}"
    if j.get("offline_mock"):
        label = "offline rubric judge (llm-mock), not a model"
    else:
        label = j.get("label") or f"LLM judge {j.get('model')}"
    passes = j.get("passes")
    return f"judge: {label}" + (f", {passes} pass(es), majority vote" if passes else "")


def judge_agreement_line(metrics: Mapping[str, Any], which: str | None = None) -> list[str]:
    """The line under a model-made QA / judge figure: which judge and prompt (`which`, default the run's
    metrics["qa_judge"]), and its agreement with the human labels (judge_agreement.qa_judge_line). Nothing
    when no model judged (llm-mock or no judge)."""
    judge, which = metrics.get("judge"), which or metrics.get("qa_judge")
    if not which or not isinstance(judge, Mapping) or judge.get("offline_mock"):
        return []
    return ["", qa_judge_line(judge, which) + "."]


def mock_tag(metrics: Mapping[str, Any], kind: str = "answer") -> str:
    """" (llm-mock)" on a figure the offline mock produced: answers ("answer": QA F1, EM) whenever the mock
    answered, judged answers ("judge": judge scores, binary J, QA accuracy) when it answered or judged."""
    llm, judge = metrics.get("llm") or {}, metrics.get("judge") or {}
    mocked = bool(isinstance(llm, Mapping) and llm.get("offline_mock")) or (
        kind == "judge" and isinstance(judge, Mapping) and bool(judge.get("offline_mock")))
    return " (llm-mock)" if mocked else ""


def mock_note(metrics: Mapping[str, Any]) -> list[str]:
    """The line under a table with (llm-mock) columns: what they measure and what to read instead."""
    if not mock_tag(metrics, "judge"):
        return []
    return ["", "*(llm-mock)*: produced by the offline llm-mock (a deterministic extractive answerer and rubric judge, "
                "not a language model): these figures measure the mock, not the memory; compare backends on the "
                "retrieval figures. Set MEMRIG_LLM_BASE_URL / MEMRIG_LLM_MODEL for a real model."]


def baseline_note(metrics: Mapping[str, Any]) -> list[str]:
    """The line naming what every scorecard below is against, and why that condition."""
    if not metrics.get("baseline"):
        return []
    rule = metrics.get("baseline_rule")
    return ["", f"Every scorecard below is against **{metrics['baseline']}**" + (f": {rule}." if rule else ".")]


def render_comparisons(comp: Mapping[str, Any], title: str = "Scorecard") -> str:
    """One table per compared condition: metric, baseline mean [CI], system mean [CI], Δ [CI], p, winner."""
    out: list[str] = []
    for cond, c in comp.items():
        sc = c["scorecard"]
        first = (c["comparisons"] or [{}])[0]
        method = first.get("method", stats.BOOTSTRAP_PROBE)
        unit = method.split()[-1].rstrip("s")  # "... over questions" -> question, "... over conversations" -> conversation
        out += ["", f"#### {title}: {cond} vs {c['baseline']}", "",
                f"{cond} wins {sc['wins']}, loses {sc['losses']}, ties {sc['ties']} of {sc['metrics']} metrics "
                f"(tie thresholds: 0.005 for rates/scores, 1.0 for tokens and ms; p from a two-sided paired "
                f"permutation test, 10,000 sign flips of whole {unit}s; 95% CIs by {method}"
                f"{', 1,000 resamples' if 'bootstrap' in method else ''}, over {first.get('units', '?')} {unit}s; "
                "a rate at 0 or 1 gets a Wilson interval).", ""]
        rows = []
        for x in c["comparisons"]:
            d = 1 if x["threshold"] >= 1 else 3
            rows.append([
                x["metric"] + ("" if x["higher_is_better"] else " (↓)"), x["n"],
                f"{fmt(x['mean_a'], d)} [{fmt(x['ci_a'][0], d)}, {fmt(x['ci_a'][1], d)}]",
                f"{fmt(x['mean_b'], d)} [{fmt(x['ci_b'][0], d)}, {fmt(x['ci_b'][1], d)}]",
                f"{fmt(x['delta'], d)} [{fmt(x['ci_delta'][0], d)}, {fmt(x['ci_delta'][1], d)}]",
                (f"{x['p']:.4f}" if x["p"] is not None else "—") + x["stars"],
                {"a": c["baseline"], "b": cond}.get(x["winner"], x["winner"]),
            ])
        out.append(md_table(["metric", "n", c["baseline"], cond, "Δ", "p", "winner"], rows))
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------------
# Recall at a context budget (metrics/budget.py)


def compact_record(rec: dict[str, Any], text_chars: int = 400) -> dict[str, Any]:
    """A retrieval record without the bulky texts (ids, scores, evidence and a text prefix are enough here)."""
    return {
        "memories": [{"id": m["id"], "score": m["score"], "kind": m.get("kind"), "source": m.get("source"),
                      "evidence_ids": m.get("evidence_ids", []), "text": (m.get("text") or "")[:text_chars]}
                     for m in rec["memories"]],
        "latency_ms": rec["latency_ms"], "server_ms": rec["server_ms"], "degraded": rec.get("degraded"),
        "degraded_reason": rec.get("degraded_reason", ""),
        "context_tokens": count_tokens(rec.get("formatted_context") or ""),
        "budget": rec.get("budget"),
        # what the agent is shown at the headline budget, verbatim: the text the grader reads (metrics/budget.py)
        "shown_text": budget.shown_context(rec),
    }


# How a suite whose independent unit is the conversation (LoCoMo, BEAM) states its statistics in metrics.json.
CONVERSATION_STATISTICS = ("cluster-robust t interval over conversations (question-weighted mean, CR1 variance, t with "
                           "conversations - 1 degrees of freedom); Wilson interval over conversations for a rate at 0 "
                           "or 1; paired permutation test flipping whole conversations")


async def retrieval_body(ctx: Any, probe: Any, backend: str, text_chars: int = 400, top_k: int | None = None
                         ) -> tuple[dict[str, Any], str]:
    """(a sample's body with the backend's retrieval record, compacted, and the context tokens the agent is shown;
    the text shown at the headline budget: what it answers from)."""
    rec = await (ctx.retrieve(backend, probe, top_k=top_k) if top_k else ctx.retrieve(backend, probe))
    shown = budget.shown_context(rec)
    return {"retrievals": {backend: compact_record(rec, text_chars)}, "context_tokens": count_tokens(shown)}, shown


def budget_values(vals: dict[str, dict[str, float | None]], pid: str, rec: Mapping[str, Any] | None,
                  gold: list[str], answerable: bool = True) -> None:
    """Add one probe's recall-at-budget values (every budget of the ladder: messages shown, answer terms shown and
    what the backend claims; the curve's area; the tokens shown at the headline budget) from its retrieval record's
    `budget` account; a record without one (an older run) adds nothing. `answerable` False (an adversarial or
    abstention question: its gold answer is not a fact the conversation states) leaves the answer terms out."""
    acc = (rec or {}).get("budget")
    if acc is None:
        return
    for name, v in budget.probe_values(acc, gold, answerable=answerable).items():
        vals.setdefault(name, {})[pid] = v


def render_budget(metrics: Mapping[str, Any], conds: list[str], gold_what: str) -> list[str]:
    """The report section on recall at a context budget: the ladder per backend, the area, what was shown, and
    beside it what each backend claims it showed."""
    m = metrics["conditions"]
    if not any(budget.HEADLINE_METRIC in (m[c].get("overall") or {}) for c in conds):
        return []
    hb = budget.HEADLINE_BUDGET
    out = ["", "### What the agent is shown at a context budget (the headline)", "",
           f"Gold evidence ({gold_what}) the agent is shown in the first B cl100k tokens of what each backend "
           "injects (its own formatted context, else its memories in rank order as the rig formats them). **The rig "
           "decides what was shown from the text itself** (metrics/shown.py), whatever the backend says its text "
           f"came from: a message is shown when at least {budget.text_rule.MESSAGE_SHOWN:.0%} of its word 3-grams "
           "are in the cut text; answer terms = the share of the gold answer's terms in it (no model). The "
           f"headline, shown @{hb}, is 1 for a probe whose gold messages are all shown or whose answer terms all "
           "are, 0.5 when some are (or at least half the terms), else 0: the rule that agrees best with blind "
           "labels (`memrig credit-agreement`). The ladder below is the message rule's recall at each budget. "
           f"Headline budget {hb} tokens: {budget.HEADLINE_WHY}. Area = under the recall curve over log2 B, scaled "
           "to [0, 1]. "
           f"Claimed = what the backend's own evidence ids and spans say it showed at {hb} tokens: a diagnostic, "
           f"never the credit. Tokens shown = mean of min({hb}, tokens injected). Rank-based recall@k below "
           "counts evidence down the ranked list whatever the documents' size; it is kept, labelled as such, "
           "beside this.", ""]
    rows = []
    for c in conds:
        o = m[c].get("overall") or {}
        rows.append([c, fmt_ci(o.get(budget.shown_metric(hb))),
                     *(fmt((o.get(budget.budget_metric(b)) or {}).get("mean")) for b in budget.BUDGETS),
                     fmt((o.get("budget_recall_auc") or {}).get("mean")),
                     fmt((o.get(budget.answer_metric(hb)) or {}).get("mean")),
                     fmt((o.get(budget.claimed_metric(hb)) or {}).get("mean")),
                     fmt((o.get("budget_tokens") or {}).get("mean"), 0),
                     fmt((o.get("budget_unlocated") or {}).get("mean"), 2)])
    out.append(md_table(["backend", f"shown @{hb}", *(f"recall {b} tok" for b in budget.BUDGETS), "area",
                         f"answer terms @{hb}",
                         f"claimed @{hb}", "tokens shown", "unlocated / probe"], rows))
    out += ["", "Claimed above shown: the backend's evidence ids credit it with more than its text shows (a "
                "sentence claiming its whole message, a merged fact claiming every source). Unlocated / probe: "
                "memories whose text was not found in what the backend injected (mean per probe; they claim "
                "nothing)."]
    return out
