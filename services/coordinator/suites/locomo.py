"""`locomo`: the real LoCoMo conversations (Maharana et al., ACL 2024; CC BY-NC 4.0), loaded from a path.

Each conversation is a namespace; each of its sessions is ingested with its date, one message per turn with
message id = `dia_id` (speaker_a's turns as role "user", speaker_b's as "assistant", content prefixed by the
speaker's name, image turns carrying their BLIP caption). Per backend, one answering condition: the backend's
retrieved context answers each question through the LLM client.

Scores (keyed by the category NUMBER; papers disagree on names):
- retrieval: evidence recall at turn level (LoCoMo's `recall_acc` = |gold ∩ top-k| / |gold| over the ranked,
  de-duplicated `dia_id`s of the returned memories) and at session level (`D<s>:<t>` -> session s), k in
  1, 3, 5, 10, plus recall_any@k; gold = the QA's evidence, with the locomo-audit `correct_evidence` swapped
  in by default (counted, option `audit_evidence`); malformed ids are split on `;`/whitespace, repaired
  (`D:11:26` -> `D11:26`, `D30:05` -> `D30:5`) or dropped, with counts;
- the headline: recall at a context budget (metrics/budget.py): the share of gold turns the agent is shown in the
  first B tokens of what the backend injects, B in 250 ... 4,000, headline 1,000; every backend is asked for top_k
  50 memories so that one-message documents can fill the budgets too, and answers get the same 1,000 tokens;
- recall at memory rank K (`memory_recall@K`: the gold turns the first K memories cite, whatever their size)
  beside turn recall@K, which flattens each memory's evidence and so penalises chunk backends;
- statistics by conversation, the independent unit (stats.interval: cluster-robust t), and a
  leave-one-conversation-out check (stats.held_out_check) when the run has 3 or more conversations;
- QA: LoCoMo's official token F1 per category (metrics/qa.py); category 5 (adversarial) is scored the
  official way (the answer must say "not mentioned" / "no information available") and reported apart, and
  the headline "F1 (cats 1-4)" leaves it out as Mem0/Zep/A-Mem do. EM alongside. Optional J: the share of answers
  the QA judge accepts (judges.qa_judge: the judge that agrees best with the human labels).

Default size fits the bench budget: 4 conversations (seeded choice) × up to 30 questions stratified by
category (seeded): the conversation is the statistical unit, and 4 of them give intervals that held their 95%
on LoCoMo dev where 2 did not (README). `full: true` runs every conversation and question; `conversations: 0`
every conversation at 30 questions each, which is what bench-all runs (its verdict needs the units: with 4
conversations no permutation p goes below 0.125).
"""

from __future__ import annotations

import functools
import json
import random
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from services.common.types import IngestBatch, Message, Session
from services.coordinator import judges
from services.coordinator.metrics import budget
from services.coordinator.metrics.latency import latency_summary
from services.coordinator.metrics.qa import exact_match, locomo_f1
from services.coordinator.metrics.retrieval import (
    evidence_recall_at_k,
    memory_recall_at_k,
    ranked_unique,
    recall_any_at_k,
)
from services.coordinator.stats import held_out_check
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

# Order of conversations in the upstream locomo10.json; locomo-audit's errors_conv_<n> uses this index.
UPSTREAM_ORDER = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44", "conv-47", "conv-48",
                  "conv-49", "conv-50")
CATEGORY_NAMES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop", "5": "adversarial"}
KS = (1, 3, 5, 10)
# Metrics the leave-one-conversation-out check reports (in metrics.json and report.md).
HELD_OUT_METRICS = (budget.HEADLINE_METRIC, "turn_recall@5", "f1_cats_1_4")
# The native profile compared against is the strongest on the retrieval headline: answers from the offline mock
# measure the mock as much as the memory.
BASELINE_METRIC = budget.HEADLINE_METRIC


_DIA = re.compile(r"^D:?(\d+):0*(\d+)$")
_SESSION_OF = re.compile(r"^D(\d+):")

# Appended to the question (as LoCoMo's own QA prompts do, restated): short answers for token F1; the date hint
# for temporal questions; the official "not mentioned" option for adversarial ones.
SHORT = " Answer with a short phrase, using exact words from the context where possible."
TEMPORAL = " Use the DATE of the conversation to answer with an approximate date."
ADVERSARIAL = (" If the conversation does not say, answer exactly: Not mentioned in the conversation.")


def parse_locomo_date(s: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> aware UTC datetime."""
    s = " ".join(s.split())
    for f in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y"):
        try:
            return datetime.strptime(s, f).replace(tzinfo=UTC)
        except ValueError:
            pass
    raise ValueError(f"unrecognised LoCoMo date {s!r}")


def repair_evidence(raw: list[Any], known: set[str], counts: dict[str, int]) -> list[str]:
    """Split on ';'/',' and whitespace, repair 'D:11:26' and zero-padded turns, drop what cannot resolve."""
    out: list[str] = []
    for item in raw:
        parts = [p for p in re.split(r"[;,\s]+", str(item)) if p]
        if len(parts) > 1:
            counts["split"] += 1
        for p in parts:
            m = _DIA.match(p)
            if not m:
                counts["dropped"] += 1
                continue
            fixed = f"D{int(m.group(1))}:{int(m.group(2))}"
            if fixed != p:
                counts["repaired"] += 1
            if fixed not in known:
                counts["dropped"] += 1
                continue
            if fixed not in out:
                out.append(fixed)
    return out


def parse_categories(option: Any) -> set[str]:
    """The category numbers an option names: "1234", 1234 (what `--option categories=1234` becomes after the
    CLI's JSON parsing), "1,2,4" or [1, 2, 4]. Anything else is an error naming the option."""
    items = option if isinstance(option, list | tuple) else [option]
    out: set[str] = set()
    for item in items:
        for ch in re.sub(r"[\s,;]+", "", str(item)):
            if ch not in CATEGORY_NAMES:
                raise ValueError(f"option categories: {option!r} names category {ch!r}; expected digits 1-5")
            out.add(ch)
    if not out:
        raise ValueError(f"option categories: {option!r} names no category; expected digits 1-5")
    return out


def conversation_of(probe_id: str) -> str:
    """The conversation a probe belongs to ("conv-26:q3" -> "conv-26"): the independent unit for statistics."""
    return probe_id.rsplit(":q", 1)[0]


@functools.lru_cache(maxsize=65536)  # scoring asks it for every cited turn of every sample: the same few thousand ids
def session_of(dia_id: str) -> str | None:
    m = _SESSION_OF.match(dia_id)
    return f"S{m.group(1)}" if m else None


def conversation_batch(conv: dict[str, Any]) -> tuple[IngestBatch, set[str], datetime]:
    c = conv["conversation"]
    a = c.get("speaker_a")
    nums = sorted(int(k.split("_")[1]) for k in c if re.fullmatch(r"session_\d+", k) and c[k])
    sessions = []
    ids: set[str] = set()
    last = datetime(2000, 1, 1, tzinfo=UTC)
    for n in nums:
        start = parse_locomo_date(c[f"session_{n}_date_time"])
        last = max(last, start)
        msgs = []
        for t in c[f"session_{n}"]:
            text = (t.get("text") or "").strip()
            if t.get("blip_caption"):
                text = (text + f" [shares a photo: {t['blip_caption']}]").strip()
            if not text or t["dia_id"] in ids:
                continue
            ids.add(t["dia_id"])
            msgs.append(Message(id=t["dia_id"], role="user" if t["speaker"] == a else "assistant",
                                content=f"{t['speaker']}: {text}"))
        if msgs:
            sessions.append(Session(session_id=f"S{n}", started_at=start, messages=tuple(msgs)))
    return IngestBatch(sessions=tuple(sessions), batch_id=conv["sample_id"]), ids, last


def load_audit(path) -> dict[tuple[str, int], dict[str, Any]]:
    """{(sample_id, qa index): correction} from locomo-audit's errors_conv_<n>.json (question_id
    'locomo_<n>_qa<i>', i 0-based, n = upstream conversation index)."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    if not path.exists():
        return out
    for f in sorted(path.glob("errors_conv_*.json")):
        for item in json.loads(f.read_text()):
            m = re.match(r"locomo_(\d+)_qa(\d+)$", item.get("question_id", ""))
            if not m or int(m.group(1)) >= len(UPSTREAM_ORDER):
                continue
            out[(UPSTREAM_ORDER[int(m.group(1))], int(m.group(2)))] = item
    return out


@register
class LocomoSuite(Suite):
    name = "locomo"
    description = ("LoCoMo (real data, CC BY-NC 4.0): multi-session conversations; evidence Recall@K at turn and "
                   "session level, answers scored by LoCoMo's official token F1 per category (5 apart).")
    retrieval_headline = budget.HEADLINE_METRIC
    answer_headline = "f1_cats_1_4"
    answer_metrics = {"f1": "answer", "f1_cats_1_4": "answer", "exact_match": "answer", "binary_j": "judge"}
    defaults = {"data_dir": None, "file": "locomo/locomo10_dev.json", "conversations": 4, "questions": 30,
                "full": False, "categories": "12345", "audit_evidence": True, "audit_answers": False,
                "top_k": 50, "mode": "fast", "judge": False, "answer": True}

    def load(self) -> SuiteData:
        path = C.resolve_data_file(self.options["data_dir"], self.options["file"])
        raw = json.loads(path.read_text())
        audit = load_audit(path.parent / "audit")
        rng = random.Random(self.seed)
        convs = list(raw)
        if not self.options["full"] and 0 < int(self.options["conversations"]) < len(convs):
            convs = sorted(rng.sample(convs, int(self.options["conversations"])), key=lambda c: raw.index(c))
        counts = {"split": 0, "repaired": 0, "dropped": 0}
        audit_counts = {"evidence_replaced": 0, "answers_replaced": 0, "mismatched": 0}
        corpora, probes = {}, []
        wanted = parse_categories(self.options["categories"])
        for conv in convs:
            sid = conv["sample_id"]
            batch, known, last = conversation_batch(conv)
            corpora[sid] = batch
            items = []
            for i, qa in enumerate(conv["qa"]):
                cat = str(qa.get("category"))
                if cat not in wanted:
                    continue
                gold_ev = qa.get("evidence") or []
                answer = qa.get("answer", "Not mentioned in the conversation" if cat == "5" else "")
                corr = audit.get((sid, i))
                if corr and corr.get("question", "").strip() != qa["question"].strip():
                    audit_counts["mismatched"] += 1
                    corr = None
                if corr and self.options["audit_evidence"] and corr.get("correct_evidence") is not None:
                    gold_ev = corr["correct_evidence"]
                    audit_counts["evidence_replaced"] += 1
                if corr and self.options["audit_answers"] and corr.get("correct_answer") not in (None, ""):
                    answer = corr["correct_answer"]
                    audit_counts["answers_replaced"] += 1
                ev = repair_evidence(gold_ev, known, counts)
                items.append(Probe(
                    id=f"{sid}:q{i}", question=qa["question"], category=cat, ground_truth=str(answer),
                    evidence_ids=ev, namespace=sid, reference_time=last + timedelta(days=1),
                    meta={"qa_index": i, "audit": (corr or {}).get("error_type"),
                          "adversarial_answer": qa.get("adversarial_answer")},
                ))
            if not self.options["full"]:
                items = C.stratified_sample(items, lambda p: p.category, int(self.options["questions"]),
                                            random.Random(C.stable_seed(self.seed, sid)))
            probes += items
        self._info = {
            "source": str(path), "licence": "CC BY-NC 4.0 (snap-research/locomo); audit: dial481/locomo-audit",
            "conversations": [c["sample_id"] for c in convs], "conversations_in_file": len(raw),
            "questions": len(probes),
            "evidence_repairs": counts, "audit": audit_counts,
            "sampling": {"seed": self.seed, "full": self.options["full"],
                         "conversations": self.options["conversations"], "questions": self.options["questions"]},
        }
        return SuiteData(corpora=corpora, probes=probes, info=self._info)

    def conditions(self, backends: list[str], capabilities: dict[str, dict[str, str]]) -> list[Condition]:
        return C.answer_conditions(backends) if self.options["answer"] else C.retrieval_conditions(backends)

    async def run_probe(self, ctx, probe: Probe, condition: Condition) -> dict[str, Any]:
        backend = condition.backends[0]
        body, shown = await C.retrieval_body(ctx, probe, backend)
        if not condition.answer:
            return body
        q = probe.question + SHORT + (TEMPORAL if probe.category == "2" else "") + \
            (ADVERSARIAL if probe.category == "5" else "")
        body.update(await ctx.answer(q, [shown]))
        body["answer_question"] = q
        if self.options["judge"] and probe.category != "5":
            body.update(await judges.qa_judge(ctx, probe.question, probe.ground_truth, body["answer"]))
        return body

    def more_units(self, data: dict[str, Any]) -> tuple[str, int] | None:
        n = data.get("conversations_in_file")
        return (f"conversations={n}", int(n)) if n else None

    # ------------------------------------------------------------------------------------------------
    def per_probe(self, samples: list[dict[str, Any]]) -> ProbeValues:
        values: dict[str, dict[str, dict[str, float | None]]] = {}
        for cond, rows in C.by_condition(samples).items():
            vals: dict[str, dict[str, float | None]] = {}
            for r in rows:
                pid, rec = r["probe_id"], C.retrieval_of(r) or {"memories": []}
                turns = ranked_unique(e for m in rec["memories"] for e in m.get("evidence_ids", []))
                sess = ranked_unique(s for s in (session_of(t) for t in turns) if s)
                gold_t = r.get("evidence_ids") or []
                gold_s = sorted({s for s in (session_of(t) for t in gold_t) if s})
                mem_ev = [list(m.get("evidence_ids", [])) for m in rec["memories"]]
                for k in KS:
                    vals.setdefault(f"turn_recall@{k}", {})[pid] = evidence_recall_at_k(turns, gold_t, k)
                    vals.setdefault(f"session_recall@{k}", {})[pid] = evidence_recall_at_k(sess, gold_s, k)
                    vals.setdefault(f"turn_recall_any@{k}", {})[pid] = recall_any_at_k(turns, gold_t, k)
                    vals.setdefault(f"memory_recall@{k}", {})[pid] = memory_recall_at_k(mem_ev, gold_t, k)
                C.budget_values(vals, pid, rec, gold_t, answerable=r["category"] != "5")
                if "answer" in r:
                    f1 = locomo_f1(r["answer"], r.get("ground_truth", ""), int(r["category"]))
                    vals.setdefault("f1", {})[pid] = f1
                    vals.setdefault("f1_cats_1_4", {})[pid] = f1 if r["category"] != "5" else None
                    vals.setdefault("exact_match", {})[pid] = (exact_match(r["answer"], r.get("ground_truth", ""))
                                                               if r["category"] != "5" else None)
                if (ok := judges.judged_correct(r)) is not None:
                    vals.setdefault("binary_j", {})[pid] = 1.0 if ok else 0.0
                vals.setdefault("token_spend", {})[pid] = float(r.get("context_tokens", 0))
                vals.setdefault("latency_ms", {})[pid] = rec.get("latency_ms")
            values[cond] = vals
        ids = {p for v in values.values() for m in v.values() for p in m}
        return ProbeValues(values, clusters={p: conversation_of(p) for p in ids},
                           backend_of=condition_backends(samples))

    def score(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"suite": self.name, "conditions": {}, "category_names": CATEGORY_NAMES,
                               "data": C.load_info(self), "qa_judge": judges.qa_judge_used(samples)}
        per_cond = self.probe_values(samples).values
        for cond, rows in C.by_condition(samples).items():
            vals = per_cond[cond]
            cats = {r["probe_id"]: r["category"] for r in rows}
            lat = [x for x in vals["latency_ms"].values() if x is not None]
            seed = C.stable_seed(self.seed, cond)
            clusters = {p: conversation_of(p) for p in cats}
            cond_out: dict[str, Any] = {
                "n": len(rows), "latency": latency_summary(lat),
                "overall": {m: C.summary(v, seed, C.unit_of(m), clusters) for m, v in vals.items()},
                "by_category": {}}
            for m, v in vals.items():
                for cat in sorted(set(cats.values())):
                    sub = {p: x for p, x in v.items() if cats[p] == cat}
                    cond_out["by_category"].setdefault(cat, {})[m] = C.summary(sub, seed, C.unit_of(m), clusters)
            out["conditions"][cond] = cond_out
        all_ids = {p for v in per_cond.values() for m in v.values() for p in m}
        clusters = {p: conversation_of(p) for p in all_ids}
        out["statistics"] = {"unit": "conversation", "conversations": len(set(clusters.values())),
                             "method": C.CONVERSATION_STATISTICS}
        out["held_out"] = held_out_check(per_cond, clusters, HELD_OUT_METRICS, self.seed)
        baseline, out["baseline_rule"] = C.scorecard_baseline(self.probe_values(samples), BASELINE_METRIC)
        out["baseline"] = baseline
        out["comparisons"] = C.compare_all(per_cond, baseline, [
            budget.HEADLINE_METRIC, "budget_recall_auc", ("f1_cats_1_4", True, "rate"), ("f1", True, "rate"), ("turn_recall@5", True, "rate"),
            ("session_recall@5", True, "rate"), ("binary_j", True, "rate"),
            ("token_spend", False, "tokens"), ("latency_ms", False, "ms")], seed=self.seed,
            clusters=clusters) if baseline else {}
        return out

    def render(self, metrics: dict[str, Any]) -> str:
        conds = sorted(metrics["conditions"])
        m = metrics["conditions"]
        out = ["## LoCoMo", "", f"Answers scored by LoCoMo's official token F1 (Porter-stemmed, per-category rules); "
               f"{C.judge_label(metrics)} (used only for J, the share of answers the judge accepts, when enabled). "
               "Categories by number: "
               + ", ".join(f"{k} {v}" for k, v in CATEGORY_NAMES.items()) + ". Category 5 is scored the official "
               "way and kept out of the headline F1 (cats 1-4).", "",
               "### Headline (mean [95% CI by conversation; method under Intervals])", ""]
        rows = []
        for c in conds:
            o = m[c]["overall"]
            rows.append([c, m[c]["n"], C.fmt_ci(o.get(budget.HEADLINE_METRIC)), C.fmt_ci(o.get("f1_cats_1_4")),
                         C.fmt_ci(o.get("exact_match")), C.fmt_ci(o.get("turn_recall@5")), C.fmt_ci(o.get("session_recall@5")),
                         C.fmt_ci(o.get("binary_j")), C.fmt((o.get("token_spend") or {}).get("mean"), 0),
                         C.fmt(m[c]["latency"]["p50_ms"], 1)])
        ans, jud = C.mock_tag(metrics, "answer"), C.mock_tag(metrics, "judge")
        out.append(C.md_table(["backend", "questions", budget.HEADLINE_LABEL,
                               f"F1 (cats 1-4){ans}", f"EM (cats 1-4){ans}", "turn R@5 (rank)",
                               "session R@5", f"J{jud}", "ctx tokens", "p50 ms"], rows))
        out += C.mock_note(metrics)
        out += C.judge_agreement_line(metrics)
        out += C.render_budget(metrics, conds, "the question's evidence turns, `dia_id`")
        cats = sorted({cat for c in conds for cat in m[c]["by_category"]})
        out += ["", f"### F1 by category (condition × category){ans}", ""]
        out.append(C.md_table(["backend", *(f"{k} {CATEGORY_NAMES.get(k, '')}" for k in cats)],
                              [[c, *(C.fmt_ci(m[c]["by_category"].get(k, {}).get("f1")) for k in cats)] for c in conds]))
        out += ["", "### Evidence recall (turn level / session level)", ""]
        rows = []
        for c in conds:
            o = m[c]["overall"]
            rows.append([c, *(C.fmt((o.get(f"turn_recall@{k}") or {}).get("mean")) for k in KS),
                         *(C.fmt((o.get(f"session_recall@{k}") or {}).get("mean")) for k in KS)])
        out.append(C.md_table(["backend", *(f"turn@{k}" for k in KS), *(f"session@{k}" for k in KS)], rows))
        out += ["", "### Recall at memory rank K beside turn recall@K", "",
                "Turn recall@K flattens every returned memory's evidence ids (`dia_id`s) and counts the first K "
                "distinct turns, so a chunk citing 15 turns fills 15 of the K slots. Memory recall@K counts every "
                "gold turn the first K memories cite, whatever their size: what a chunk-based backend put in front "
                "of the model at K memories. For one-turn memories (bm25, dense, hybrid) the two are equal.", ""]
        rows = []
        for c in conds:
            o = m[c]["overall"]
            rows.append([c, *(f"{C.fmt((o.get(f'turn_recall@{k}') or {}).get('mean'))} / "
                              f"{C.fmt((o.get(f'memory_recall@{k}') or {}).get('mean'))}" for k in KS)])
        out.append(C.md_table(["backend (turn / memory rank)", *(f"@{k}" for k in KS)], rows))
        out += ["", "Turn recall_any@10 (one turn = one document, as IR papers report it): "
                + ", ".join(f"{c} {C.fmt_ci(m[c]['overall'].get('turn_recall_any@10'))}" for c in conds) + "."]
        out += _render_statistics(metrics)
        out += ["", "Turn R@5 by category:", ""]
        out.append(C.md_table(["backend", *cats], [[c, *(C.fmt_ci(m[c]["by_category"].get(k, {}).get("turn_recall@5"))
                                                        for k in cats)] for c in conds]))
        data = metrics.get("data") or {}
        if data:
            rep, aud = data.get("evidence_repairs", {}), data.get("audit", {})
            out += ["", f"Data: {', '.join(data.get('conversations', []))}; {data.get('questions')} questions "
                        f"(seeded stratified sample unless full). Evidence ids: {rep.get('split', 0)} split, "
                        f"{rep.get('repaired', 0)} repaired, {rep.get('dropped', 0)} dropped. locomo-audit: "
                        f"{aud.get('evidence_replaced', 0)} evidence lists and {aud.get('answers_replaced', 0)} "
                        f"answers replaced ({aud.get('mismatched', 0)} corrections not matching their question)."]
        if metrics.get("comparisons"):
            out += C.baseline_note(metrics)
            out.append(C.render_comparisons(metrics["comparisons"]))
        return "\n".join(out)


def _render_statistics(metrics: dict[str, Any]) -> list[str]:
    """The intervals' method and the leave-one-conversation-out check, as report lines."""
    stat = metrics.get("statistics") or {}
    out: list[str] = []
    if stat:
        out += ["", f"Intervals: {stat['method']}; {stat['conversations']} conversation(s) behind them. Questions "
                    "of one conversation share its people and events, so the conversation is the independent unit: "
                    "with few conversations the intervals are wide, which is the honest uncertainty of the sample."]
    held = metrics.get("held_out") or {}
    if not held:
        if stat:
            out += ["", "Leave-one-conversation-out check: needs at least 3 conversations (run with "
                        "`--option conversations=N` or `full=true`)."]
        return out
    out += ["", "### Leave-one-conversation-out check", "",
            "Each conversation in turn is held out; its own mean is compared with (a) the 95% CI of the mean "
            "over the other conversations (cluster-robust t) and (b) their 95% Student-t prediction interval for one new "
            "conversation (mean ± t·s·√(1+1/k) over the k others' conversation means). A CI bounds the mean over "
            "conversations like these, not one conversation, so (a) misses single conversations far more often "
            "than 5% of the time when conversations differ; (b) is the interval a single held-out conversation "
            "should land in.", ""]
    rows = []
    for cond in sorted(held):
        for metric, h in held[cond].items():
            worst = max(h["rows"], key=lambda r: abs(r["mean"] - (r["ci"][0] + r["ci"][1]) / 2))
            rows.append([cond, metric, f"{h['inside']} of {h['of']}", f"{h['inside_pi']} of {h['of']}",
                         f"{worst['cluster']} {C.fmt(worst['mean'])} vs CI [{C.fmt(worst['ci'][0])}, "
                         f"{C.fmt(worst['ci'][1])}], PI [{C.fmt(worst['pi'][0])}, {C.fmt(worst['pi'][1])}]"])
    out.append(C.md_table(["backend", "metric", "held-out inside CI of the mean", "inside prediction interval",
                           "farthest conversation"], rows))
    return out
