"""`longmemeval`: LongMemEval (Wu et al., ICLR 2025; MIT), its "oracle" or its "S" file, loaded from a path.

Variants (option `variant`): `oracle` (each question's haystack is its evidence sessions; default file
longmemeval/longmemeval_oracle_dev.json) and `s` (the ~48-session, ~115k-token haystacks the field reports; default
file longmemeval/longmemeval_s_cleaned.json, the official file, fetched by `make data-longmemeval-s`). `auto` (the
default) reads the variant off the file: oracle when every question's haystack holds only its answer sessions, S
otherwise; a named variant the file contradicts is an error. `file` may be gzip (`.gz`). Only memrig's 400 dev
question ids (suites/data/longmemeval_dev_ids.txt, those of longmemeval_oracle_dev.json) are ever loaded: a file's
other questions (the official files have 500) are held out, left out before anything else (`full: true` included)
and counted in the data info, never scored. The variant, the file and that count are in run.json and the report.

Each question is its own namespace holding its haystack sessions (dated from `haystack_dates`); message id =
`<session_id>_<turn index, 1-based over all turns>` (the official turn id). Per backend, one answering condition.

Retrieval (official `src/retrieval/eval_utils.py`, restated): recall_any@k, recall_all@k, ndcg_any@k for
k in 1, 3, 5, 10, 30, 50 at session level (gold = answer sessions holding a user turn with has_answer) and turn
level (gold = user turns with has_answer; the ranking keeps user turns only, since the official corpus is user
turns). Abstention questions (`_abs`) and questions without a user-side gold turn are skipped, as upstream, and
counted. The metrics retrieval asks for top 50; the answer uses the backend's usual top_k (option answer_top_k).
NDCG's ideal comes from the corpus (gold ids present in it) and a repeated id counts once, so it never exceeds
1. Beside memrig's session figures (distinct sessions of all returned evidence) the official turn->session ones
(`t2s_*@k`: user turns of an answer session without has_answer renamed `noans` as upstream, so only gold turns map
to a gold session; grow the cut-off until k distinct sessions), and recall_all at memory rank K beside evidence rank.
Headline: recall at a context budget (metrics/budget.py): the share of gold turns (user turns with has_answer)
the agent is shown in the first 1,000 tokens of what the backend injects for the top-50 retrieval, the ladder 250 ...
4,000 beside it; answers get the same 1,000 tokens.
QA: accuracy through the QA judge (judges.qa_judge: the judge that agrees best with the human labels),
per question type.

Default: a seeded sample of 30 questions stratified by question type; `full: true` for all.
"""

from __future__ import annotations

import functools
import gzip
import json
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from services.common.types import IngestBatch, Message, Session
from services.coordinator import judges
from services.coordinator.metrics import budget
from services.coordinator.metrics.latency import latency_summary
from services.coordinator.metrics.retrieval import (
    lme_turn2session_at_k,
    memory_recall_at_k,
    ndcg_any_at_k,
    ranked_unique,
    recall_all_at_k,
    recall_any_at_k,
)
from services.coordinator.suites import common as C
from services.coordinator.suites.base import (
    Condition,
    OptionError,
    Probe,
    ProbeValues,
    Suite,
    SuiteData,
    SuiteUnavailable,
    condition_backends,
)
from services.coordinator.suites.registry import register

KS = (1, 3, 5, 10, 30, 50)
TYPES = ("single-session-user", "single-session-assistant", "single-session-preference", "multi-session",
         "temporal-reasoning", "knowledge-update")


# variant -> its default file under the data directory
VARIANT_FILES = {"oracle": "longmemeval/longmemeval_oracle_dev.json", "s": "longmemeval/longmemeval_s_cleaned.json"}
VARIANT_LABELS = {"oracle": "oracle", "s": "S"}
DEV_IDS_PATH = Path(__file__).resolve().parent / "data" / "longmemeval_dev_ids.txt"


@functools.cache
def dev_question_ids() -> frozenset[str]:
    """memrig's 400 dev question ids (one a line, '#' lines comments); every other id is held out."""
    lines = DEV_IDS_PATH.read_text(encoding="utf-8").splitlines()
    return frozenset(x.strip() for x in lines if x.strip() and not x.startswith("#"))


def read_questions(path: Path) -> list[dict[str, Any]]:
    """The question list of a LongMemEval file: JSON, or gzip-compressed JSON when the name ends in .gz."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        raw = json.load(f)
    if not isinstance(raw, list):
        raise ValueError(f"{path}: expected a JSON list of questions, got a {type(raw).__name__}")
    for i, q in enumerate(raw):
        if not isinstance(q, dict) or not isinstance(q.get("question_id"), str):
            raise ValueError(f"{path}: question [{i}] has no string question_id")
    return raw


def haystack_variant(items: list[dict[str, Any]]) -> str:
    """'oracle' when every question's haystack holds only its answer sessions (what the oracle file is), else 's'."""
    oracle = all(set(q["haystack_session_ids"]) <= set(q.get("answer_session_ids") or []) for q in items)
    return "oracle" if oracle else "s"


# Which BM25 a condition's figures are (services/adapters/ir_baselines/ranking.py): the report says it beside them.
BM25_NOTES = {
    "bm25": "the rig's BM25 (regex tokens \\w\\w+ lower-cased, English stopwords out, bm25s lucene k1 1.2 b 0.75, every "
            "turn indexed)",
    "hybrid": "RRF of the rig's BM25 (as `bm25`) and dense",
    "bm25-official": "BM25 as LongMemEval's own code runs it (text.split(\" \") with case kept, rank_bm25 BM25Okapi "
                     "k1 1.5 b 0.75, user turns only)",
}


def parse_lme_date(s: str) -> datetime:
    """'2023/05/28 (Sun) 19:47' -> aware UTC datetime."""
    parts = s.split()
    return datetime.strptime(f"{parts[0]} {parts[-1]}", "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


def session_of_turn(turn_id: str) -> str:
    return turn_id.rsplit("_", 1)[0]


def question_batch(q: dict[str, Any]) -> tuple[IngestBatch, list[str], list[str], list[str]]:
    """(batch, user turn ids, gold user turns, gold sessions) for one question's haystack."""
    sessions, user_turns, gold_turns, gold_sessions = [], [], [], []
    seen: set[str] = set()
    lengths = [len(q[f]) for f in ("haystack_session_ids", "haystack_dates", "haystack_sessions")]
    if len(set(lengths)) != 1:
        raise ValueError(f"{q['question_id']}: haystack_session_ids, haystack_dates and haystack_sessions differ in "
                         f"length ({', '.join(map(str, lengths))})")
    for j, (sid, date, turns) in enumerate(zip(q["haystack_session_ids"], q["haystack_dates"],
                                               q["haystack_sessions"], strict=True)):
        if sid in seen:
            continue
        seen.add(sid)
        msgs = []
        for i, t in enumerate(turns):
            tid = f"{sid}_{i + 1}"
            role = t.get("role")
            if role not in ("user", "assistant"):
                raise ValueError(f"{q['question_id']}: haystack_sessions[{j}][{i}].role {role!r}: expected "
                                 f"'user' or 'assistant'")
            content = (t.get("content") or "").strip()
            if not content:
                continue
            msgs.append(Message(id=tid, role=role, content=content))
            if role == "user":
                user_turns.append(tid)
                if t.get("has_answer") and sid in q.get("answer_session_ids", []):
                    gold_turns.append(tid)
        if msgs:
            sessions.append(Session(session_id=sid, started_at=parse_lme_date(date), messages=tuple(msgs)))
    # sessions count as gold only when they hold a user-side answer turn (upstream renames the others "noans")
    gold_sessions = sorted({session_of_turn(t) for t in gold_turns})
    return IngestBatch(sessions=tuple(sessions), batch_id=q["question_id"]), user_turns, gold_turns, gold_sessions


@register
class LongMemEvalSuite(Suite):
    name = "longmemeval"
    description = ("LongMemEval oracle or S (real data, MIT; option variant): per-question haystacks, memrig's 400 "
                   "dev questions only; official recall_any/recall_all/ndcg_any@k at session and turn level, QA "
                   "accuracy through the QA judge.")
    retrieval_headline = budget.HEADLINE_METRIC
    answer_headline = "qa_accuracy"
    answer_metrics = {"qa_accuracy": "judge"}
    namespace_scoped = True  # a haystack per question: ingested, probed and released one at a time
    defaults = {"data_dir": None, "variant": "auto", "file": "", "questions": 30,
                "full": False, "types": ",".join(TYPES), "top_k": 10, "mode": "fast", "answer": True}

    def _data_file(self) -> tuple[str, str, Path]:
        """(variant asked for, file as named, its path): an empty `file` is the variant's default file."""
        variant = str(self.options["variant"] or "auto").strip().lower()
        if variant not in ("auto", *VARIANT_FILES):
            raise OptionError("variant", f"expected one of auto, {', '.join(VARIANT_FILES)}; got {variant!r}")
        file = str(self.options["file"] or VARIANT_FILES["oracle" if variant == "auto" else variant])
        try:
            path = C.resolve_data_file(self.options["data_dir"], file)
        except SuiteUnavailable as e:
            if variant == "s" and not self.options["file"]:
                raise SuiteUnavailable(f"{e}; `make data-longmemeval-s` fetches the official S file and checks "
                                       f"it") from None
            raise
        return variant, file, path

    def load(self) -> SuiteData:
        asked, file, path = self._data_file()
        raw = read_questions(path)
        dev = dev_question_ids()
        in_dev = [q for q in raw if q["question_id"] in dev]  # held-out questions never get further than this
        held_out = len(raw) - len(in_dev)
        variant = haystack_variant(in_dev)
        if asked != "auto" and asked != variant:
            raise OptionError("variant", f"{asked} asked, but {path} is LongMemEval {VARIANT_LABELS[variant]} (its "
                                         f"haystacks {'hold only' if variant == 'oracle' else 'go beyond'} the answer "
                                         "sessions)")
        types = {t.strip() for t in str(self.options["types"]).split(",") if t.strip()}
        items = [q for q in in_dev if q["question_type"] in types]
        items.sort(key=lambda q: q["question_id"])  # the file's order is not the official one: fix an order
        if not self.options["full"]:
            items = C.stratified_sample(items, lambda q: q["question_type"], int(self.options["questions"]),
                                        random.Random(self.seed))
        corpora, probes = {}, []
        skipped = {"abstention": 0, "no_user_gold": 0}
        for q in items:
            batch, user_turns, gold_turns, gold_sessions = question_batch(q)
            ns = q["question_id"]
            corpora[ns] = batch
            abstention = q["question_id"].endswith("_abs")
            if abstention:
                skipped["abstention"] += 1
            elif not gold_turns:
                skipped["no_user_gold"] += 1
            probes.append(Probe(
                id=ns, question=q["question"], category=q["question_type"], ground_truth=str(q["answer"]),
                evidence_ids=gold_turns, namespace=ns, reference_time=parse_lme_date(q["question_date"]),
                meta={"gold_sessions": gold_sessions, "user_turns": user_turns, "abstention": abstention,
                      "sessions": [x.session_id for x in batch.sessions],
                      "answer_session_ids": q.get("answer_session_ids", [])},
            ))
        self._info = {"variant": variant, "file": file, "source": str(path), "licence": "MIT (xiaowu0162/LongMemEval)",
                      "questions": len(probes), "held_out_left_out": held_out,
                      "dev_split": f"{len(dev)} dev question ids (suites/data/longmemeval_dev_ids.txt)",
                      "retrieval_skipped": skipped, "sampling": {"seed": self.seed, "full": self.options["full"],
                                                                  "questions": self.options["questions"]}}
        return SuiteData(corpora=corpora, probes=probes, info=self._info)

    def conditions(self, backends: list[str], capabilities: dict[str, dict[str, str]]) -> list[Condition]:
        return C.answer_conditions(backends) if self.options["answer"] else C.retrieval_conditions(backends)

    async def run_probe(self, ctx, probe: Probe, condition: Condition) -> dict[str, Any]:
        backend = condition.backends[0]
        body, shown = await C.retrieval_body(ctx, probe, backend, 200, top_k=max(KS))
        if not condition.answer:
            return body
        body.update(await ctx.answer(probe.question, [shown]))
        body.update(await judges.qa_judge(ctx, probe.question, probe.ground_truth, body["answer"]))
        return body

    # ------------------------------------------------------------------------------------------------
    def per_probe(self, samples: list[dict[str, Any]]) -> ProbeValues:
        values: dict[str, dict[str, dict[str, float | None]]] = {}
        for cond, rows in C.by_condition(samples).items():
            vals: dict[str, dict[str, float | None]] = {}
            for r in rows:
                pid, rec, meta = r["probe_id"], C.retrieval_of(r) or {"memories": []}, r.get("meta") or {}
                users = set(meta.get("user_turns") or [])
                ev = ranked_unique(e for m in rec["memories"] for e in m.get("evidence_ids", []))
                turns = [e for e in ev if e in users]
                known = set(meta.get("sessions") or [])
                sess = ranked_unique(x for x in (e if e in known else session_of_turn(e) for e in ev) if x in known)
                gold_t = r.get("evidence_ids") or []
                gold_s = meta.get("gold_sessions") or []
                skip = bool(meta.get("abstention")) or not gold_t
                user_order = list(meta.get("user_turns") or [])
                # memory rank: each memory's evidence, turns kept to user turns, sessions mapped as above
                mem_turns = [[e for e in m.get("evidence_ids", []) if e in users] for m in rec["memories"]]
                mem_sess = [[x for x in (e if e in known else session_of_turn(e) for e in m.get("evidence_ids", []))
                             if x in known] for m in rec["memories"]]
                for k in KS:
                    for level, ranked, gold, corpus in (("session", sess, gold_s, known),
                                                        ("turn", turns, gold_t, users)):
                        vals.setdefault(f"{level}_recall_any@{k}", {})[pid] = None if skip else recall_any_at_k(ranked, gold, k)
                        vals.setdefault(f"{level}_recall_all@{k}", {})[pid] = None if skip else recall_all_at_k(ranked, gold, k)
                        vals.setdefault(f"{level}_ndcg_any@{k}", {})[pid] = None if skip else ndcg_any_at_k(
                            ranked, gold, k, corpus=corpus)
                    off = None if skip else lme_turn2session_at_k(turns, gold_t, user_order, k, session_of_turn)
                    for j, n in enumerate(("recall_any", "recall_all", "ndcg_any")):
                        vals.setdefault(f"t2s_{n}@{k}", {})[pid] = None if off is None else off[j]
                    for level, mems, gold in (("session", mem_sess, gold_s), ("turn", mem_turns, gold_t)):
                        vals.setdefault(f"{level}_memory_recall_all@{k}", {})[pid] = None if skip else \
                            memory_recall_at_k(mems, gold, k, "all")
                if not skip:
                    C.budget_values(vals, pid, rec, gold_t, answerable=not meta.get("abstention"))
                if (ok := judges.judged_correct(r)) is not None:
                    vals.setdefault("qa_accuracy", {})[pid] = 1.0 if ok else 0.0
                vals.setdefault("token_spend", {})[pid] = float(r.get("context_tokens", 0))
                vals.setdefault("latency_ms", {})[pid] = rec.get("latency_ms")
            values[cond] = vals
        return ProbeValues(values, backend_of=condition_backends(samples))

    def score(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"suite": self.name, "conditions": {}, "data": C.load_info(self),
                               "qa_judge": judges.qa_judge_used(samples)}
        per_cond = self.probe_values(samples).values
        for cond, rows in C.by_condition(samples).items():
            vals = per_cond[cond]
            cats = {r["probe_id"]: r["category"] for r in rows}
            lat = [x for x in vals["latency_ms"].values() if x is not None]
            seed = C.stable_seed(self.seed, cond)
            co: dict[str, Any] = {"n": len(rows), "latency": latency_summary(lat),
                                  "overall": {m: C.summary(v, seed, C.unit_of(m)) for m, v in vals.items()},
                                  "by_type": {}}
            for cat in sorted(set(cats.values())):
                for m in ("qa_accuracy", budget.HEADLINE_METRIC, "session_recall_all@5", "session_ndcg_any@5", "turn_recall_all@10"):
                    if m in vals:
                        co["by_type"].setdefault(cat, {})[m] = C.summary(
                            {p: x for p, x in vals[m].items() if cats[p] == cat}, seed, C.unit_of(m))
            out["conditions"][cond] = co
        baseline, out["baseline_rule"] = C.scorecard_baseline(self.probe_values(samples), budget.HEADLINE_METRIC)
        out["baseline"] = baseline
        out["statistics"] = {"unit": "question", "method": "percentile bootstrap over questions (each question is "
                             "its own haystack), 1,000 resamples; Wilson interval for a rate at 0 or 1"}
        out["comparisons"] = C.compare_all(per_cond, baseline, [
            ("qa_accuracy", True, "rate"), budget.HEADLINE_METRIC, "budget_recall_auc",
            ("session_recall_all@5", True, "rate"), ("session_ndcg_any@5", True, "rate"),
            ("turn_recall_all@10", True, "rate"), ("token_spend", False, "tokens"), ("latency_ms", False, "ms")],
            seed=self.seed) if baseline else {}
        return out

    def render(self, metrics: dict[str, Any]) -> str:
        m = metrics["conditions"]
        conds = sorted(m)
        data = metrics.get("data") or {}
        label = VARIANT_LABELS.get(str(data.get("variant") or "oracle"), "oracle")
        out = [f"## LongMemEval ({label})", ""]
        if data.get("file"):
            out += [f"Data: `{data['file']}` (LongMemEval {label}); memrig's dev questions only, "
                    f"{data.get('held_out_left_out', 0)} held-out question(s) of the file left out, never scored.", ""]
        out += [
               f"QA accuracy = the share of answers the QA judge accepts ({C.judge_label(metrics)}). Retrieval "
               "metrics are the "
               "official recall_any / recall_all / ndcg_any (abstention and no-user-gold questions skipped).", "",
               "### Headline (mean [95% CI])", ""]
        rows = [[c, m[c]["n"], C.fmt_ci(m[c]["overall"].get(budget.HEADLINE_METRIC)),
                 C.fmt_ci(m[c]["overall"].get("qa_accuracy")),
                 C.fmt_ci(m[c]["overall"].get("session_recall_all@5")), C.fmt_ci(m[c]["overall"].get("session_ndcg_any@5")),
                 C.fmt_ci(m[c]["overall"].get("turn_recall_all@10")),
                 C.fmt((m[c]["overall"].get("token_spend") or {}).get("mean"), 0), C.fmt(m[c]["latency"]["p50_ms"], 1)]
                for c in conds]
        jud = C.mock_tag(metrics, "judge")
        out.append(C.md_table(["backend", "questions", budget.HEADLINE_LABEL, f"QA accuracy{jud}",
                               "session recall_all@5 (rank)", "session ndcg_any@5",
                               "turn recall_all@10", "ctx tokens", "p50 ms"], rows))
        out += C.mock_note(metrics)
        out += C.judge_agreement_line(metrics)
        bm25 = [f"`{c}` is {BM25_NOTES[c]}" for c in conds if c in BM25_NOTES]
        if bm25:
            out += ["", f"Which BM25: {'; '.join(bm25)}."]
        out += C.render_budget(metrics, conds, "the user turns marked has_answer")
        for level in ("session", "turn"):
            out += ["", f"### {level.capitalize()} level, k = {', '.join(map(str, KS))}", ""]
            rows = []
            for c in conds:
                o = m[c]["overall"]
                rows.append([c, *("/".join(C.fmt((o.get(f"{level}_{n}@{k}") or {}).get("mean"), 2)
                                           for n in ("recall_any", "recall_all", "ndcg_any")) for k in KS)])
            out.append(C.md_table(["backend (any/all/ndcg)", *(f"@{k}" for k in KS)], rows))
        out += ["", "### Session level: memrig's figure beside the official turn→session one", "",
                "memrig (labelled `memrig`) ranks the distinct sessions cited by all returned evidence (user and "
                "assistant turns, session ids) and cuts at k sessions. The official figure (`official t2s`, "
                "LongMemEval `evaluate_retrieval_turn2session` on the official turn ids) keeps the user-turn ranking, "
                "renames the user turns of an answer session that lack has_answer (`noans`, a session of their "
                "own, never gold), grows the cut-off until it spans k distinct sessions, and its NDCG counts the "
                "has_answer turns against an ideal of the corpus's has_answer turns.", ""]
        rows = []
        for c in conds:
            o = m[c]["overall"]
            cell = lambda pre, k, o=o: "/".join(C.fmt((o.get(f"{pre}_{n}@{k}") or {}).get("mean"), 2)  # noqa: E731
                                                 for n in ("recall_any", "recall_all", "ndcg_any"))
            rows.append([c, *(x for k in (5, 10) for x in (cell("session", k), cell("t2s", k)))])
        out.append(C.md_table(["backend (any/all/ndcg)", "memrig @5", "official t2s @5", "memrig @10",
                               "official t2s @10"], rows))
        out += ["", "### Recall at memory rank K beside evidence recall (recall_all)", "",
                "Evidence recall@K flattens every returned memory's evidence ids and counts the first K distinct "
                "ones, so a chunk citing 15 turns fills 15 of the K slots. Memory-rank recall@K counts everything "
                "the first K memories cite, whatever their size: it is what a chunk-based backend actually put in "
                "front of the model at K memories.", ""]
        rows = []
        for c in conds:
            o = m[c]["overall"]
            g = lambda key, o=o: C.fmt((o.get(key) or {}).get("mean"), 2)  # noqa: E731
            rows.append([c, *(f"{g(f'{lv}_recall_all@{k}')} / {g(f'{lv}_memory_recall_all@{k}')}"
                              for lv in ("turn", "session") for k in (1, 5, 10))])
        out.append(C.md_table(["backend (evidence / memory rank)",
                               *(f"{lv} @{k}" for lv in ("turn", "session") for k in (1, 5, 10))], rows))
        stat = metrics.get("statistics") or {}
        if stat:
            out += ["", f"Intervals: {stat['method']}."]
        types = sorted({t for c in conds for t in m[c]["by_type"]})
        out += ["", f"### QA accuracy by question type{jud}", ""]
        out.append(C.md_table(["backend", *types], [[c, *(C.fmt_ci(m[c]["by_type"].get(t, {}).get("qa_accuracy"))
                                                          for t in types)] for c in conds]))
        if data:
            sk = data.get("retrieval_skipped", {})
            out += ["", f"Data: {data.get('questions')} questions; retrieval averages skip {sk.get('abstention', 0)} "
                        f"abstention and {sk.get('no_user_gold', 0)} no-user-gold questions."]
        if metrics.get("comparisons"):
            out += C.baseline_note(metrics)
            out.append(C.render_comparisons(metrics["comparisons"]))
        return "\n".join(out)
