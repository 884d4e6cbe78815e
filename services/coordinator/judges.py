"""The judges: how a model's reply becomes a verdict, in one place.

- **parsing**: a 0-3 rubric score (`parse_judge_score`), a CORRECT/WRONG label (`parse_binary_label`), a pairwise
  winner (`parse_pairwise`), BEAM nugget scores 0 / 0.5 / 1 (`parse_nugget_scores`, `parse_nugget_score`: a reply
  that cannot be read is unjudged, None, never 0);
- **passes**: how many calls a judge makes and at which temperature and seed (`judge_pass_settings`), and how their
  verdicts are combined (`majority_vote`, ties to the sceptical side);
- **the judges**: the 0-3 rubric judge (`rubric_judge`), the binary judge (`binary_judge`), the blind pairwise
  judge (`pairwise_judge`), BEAM's nugget judge (`nugget_judge`: per nugget the median across passes);
- **the QA judge**: which of them makes model-made QA accuracy (`QA_JUDGE`, chosen by the human labels), calling
  it (`qa_judge`) and reading its verdict back from a sample (`judged_correct`, `qa_judge_used`).

The suites (suites/*.py), the probe context (context.py) and the judge-agreement study (judge_agreement.py) all call
the judges here; this module imports none of them, so the judges no longer sit in an import circle. What a judge
reads of its caller is duck-typed: `judge_llm`, `judge_passes`, `judge_temperature` and, optionally,
`judge_max_tokens`. The figures computed from the verdicts (judge mean, grounded and hallucination rates, QA
accuracy) are metrics, in metrics/judge.py and metrics/qa.py.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from services.common import prompts

_JSON_RE = re.compile(r"\{.*\}", re.S)


def prompt_id(text: str) -> str:
    """The id a judge's verdicts record of its prompt: the first 12 hex digits of its sha256 (the agreement record
    quotes a kappa only for the prompt it was measured with)."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]


# ------------------------------------------------------------------------------------------------------
# Parsing a judge's reply


def parse_judge_score(text: str) -> int | None:
    """The 0-3 score of a rubric judge reply: {"score": N} in its JSON, else the first bare digit 0-3; None if neither."""
    m = _JSON_RE.search(text or "")
    if m:
        try:
            v = json.loads(m.group(0)).get("score")
            if isinstance(v, int | float) and 0 <= int(v) <= 3:
                return int(v)
        except (json.JSONDecodeError, AttributeError):
            pass
    m2 = re.search(r"\b([0-3])\b", text or "")
    return int(m2.group(1)) if m2 else None


def parse_binary_label(text: str) -> bool | None:
    """CORRECT -> True, WRONG -> False, from a JSON {"label": ...} reply or bare text; None if neither."""
    t = (text or "").upper()
    m = re.search(r'"LABEL"\s*:\s*"(CORRECT|WRONG)"', t)
    if m:
        return m.group(1) == "CORRECT"
    has_c, has_w = "CORRECT" in t.replace("INCORRECT", ""), ("WRONG" in t or "INCORRECT" in t)
    if has_c != has_w:
        return has_c
    return None


def parse_pairwise(text: str) -> str | None:
    """'X', 'Y' or 'TIE' from a pairwise judge reply ({"winner": "X"} or bare text)."""
    t = (text or "").upper()
    m = re.search(r'"WINNER"\s*:\s*"(X|Y|TIE)"', t)
    if m:
        return m.group(1)
    m = re.search(r"\b(X|Y|TIE)\b", t)
    return m.group(1) if m else None


NUGGET_LEVELS = (0.0, 0.5, 1.0)


def _nugget_value(v: Any) -> float | None:
    """0, 0.5 or 1 from a JSON number or numeric string; None for anything else (2, 0.7, "yes", true)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, str):
        try:
            v = float(v.strip())
        except ValueError:
            return None
    if isinstance(v, int | float) and float(v) in NUGGET_LEVELS:
        return float(v)
    return None


def parse_nugget_scores(text: str, n: int) -> list[float | None] | None:
    """The per-nugget scores of a question-level nugget judge reply: {"scores": [...]} (or a bare JSON list) with
    exactly `n` entries, each 0, 0.5 or 1; an entry out of that set is None (unjudged). None for the whole reply
    when it has no such list or its length is not `n` (the scores cannot be matched to the nuggets)."""
    t = text or ""
    vals: Any = None
    m = _JSON_RE.search(t)
    if m:
        try:
            obj = json.loads(m.group(0))
            vals = obj.get("scores") if isinstance(obj, dict) else None
        except json.JSONDecodeError:
            vals = None
    if vals is None:
        m2 = re.search(r"\[[^\[\]]*\]", t)
        if m2:
            try:
                vals = json.loads(m2.group(0))
            except json.JSONDecodeError:
                vals = None
    if not isinstance(vals, list) or len(vals) != n:
        return None
    return [_nugget_value(v) for v in vals]


def parse_nugget_score(text: str) -> float | None:
    """The score of a one-nugget judge reply: {"score": x} with x 0, 0.5 or 1, or a reply that is just that number;
    None otherwise (out of range, garbage, several numbers)."""
    t = (text or "").strip()
    m = _JSON_RE.search(t)
    if m:
        try:
            obj = json.loads(m.group(0))
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and "score" in obj:
            return _nugget_value(obj["score"])
    if re.fullmatch(r"[0-9.]+", t):
        return _nugget_value(t)
    return None


# ------------------------------------------------------------------------------------------------------
# Passes and the vote


# Temperature of passes 2..N when a judge runs several passes and none was stated: at temperature 0 every pass would
# be the same call (and a response-cache hit), so the majority vote would decide nothing.
SAMPLED_PASS_TEMPERATURE = 0.7


def judge_pass_settings(ctx: Any) -> list[dict[str, Any]]:
    """The (temperature, seed) of each judge pass: ctx.judge_passes passes (at least one). One pass: at
    ctx.judge_temperature (default 0), no seed, the greedy reply. N > 1 passes: pass i (0-based) samples with
    seed i at ctx.judge_temperature, or at SAMPLED_PASS_TEMPERATURE when that is 0, so the passes are N
    distinct draws and the majority vote is over them (each draw is still reproducible: same seed, same reply,
    which is why seeded calls are cached)."""
    n = max(1, int(getattr(ctx, "judge_passes", 1)))
    t = float(getattr(ctx, "judge_temperature", 0.0))
    if n == 1:
        return [{"temperature": t, "seed": None}]
    return [{"temperature": t if t > 0 else SAMPLED_PASS_TEMPERATURE, "seed": i} for i in range(n)]


async def _judge_call(ctx: Any, system: str, user: str, setting: Mapping[str, Any]) -> Any:
    """One judge call; ctx.judge_max_tokens (when set) caps the reply (judge_agreement's score-only calls)."""
    kw: dict[str, Any] = {"temperature": setting["temperature"]}
    if setting["seed"] is not None:
        kw["seed"] = setting["seed"]
    if getattr(ctx, "judge_max_tokens", None):
        kw["max_tokens"] = ctx.judge_max_tokens
    return await ctx.judge_llm.chat([{"role": "system", "content": system}, {"role": "user", "content": user}],
                                    **kw)


def _pass_record(settings: list[dict[str, Any]]) -> dict[str, Any]:
    rec: dict[str, Any] = {"temperature": settings[0]["temperature"]}
    if settings[0]["seed"] is not None:
        rec["seeds"] = [s["seed"] for s in settings]
    return rec


def majority_vote(scores: Sequence[int]) -> int:
    """The most frequent score across judge passes; ties go to the lower score (the sceptical choice)."""
    if not scores:
        raise ValueError("majority_vote needs at least one score")
    counts: dict[int, int] = {}
    for s in scores:
        counts[s] = counts.get(s, 0) + 1
    best = max(counts.values())
    return min(s for s, c in counts.items() if c == best)


# ------------------------------------------------------------------------------------------------------
# The judges


async def rubric_judge(ctx: Any, question: str, gold: str, answer: str) -> dict[str, Any]:
    """The 0-3 rubric judge (prompts.JUDGE_SYSTEM): one call per pass (judge_pass_settings), the majority
    score (majority_vote). Records every pass and its reply."""
    settings = judge_pass_settings(ctx)
    passes, reasons = [], []
    for st in settings:
        res = await _judge_call(ctx, prompts.JUDGE_SYSTEM, prompts.judge_user(question, gold, answer), st)
        s = parse_judge_score(res.text)
        if s is None:
            raise ValueError(f"judge reply has no 0-3 score: {res.text[:200]!r}")
        passes.append(s)
        reasons.append(res.text.strip()[:300])
    out = {"score": majority_vote(passes), "passes": passes, "reasons": reasons}
    if len(settings) > 1:
        out.update(_pass_record(settings))
    return out


async def binary_judge(ctx: Any, question: str, gold: str, answer: str) -> dict[str, Any]:
    """Binary CORRECT/WRONG judge (prompts.BINARY_JUDGE_SYSTEM), one call per pass (judge_pass_settings),
    majority vote (ties -> WRONG, the sceptical choice). Records the prompt id and every pass."""
    settings = judge_pass_settings(ctx)
    passes: list[int] = []
    raw: list[str] = []
    for st in settings:
        res = await _judge_call(ctx, prompts.BINARY_JUDGE_SYSTEM, prompts.judge_user(question, gold, answer), st)
        label = parse_binary_label(res.text)
        if label is None:
            raise ValueError(f"binary judge reply has no CORRECT/WRONG label: {res.text[:200]!r}")
        passes.append(1 if label else 0)
        raw.append(res.text.strip()[:200])
    out = {"correct": bool(majority_vote(passes)), "passes": passes, "raw": raw,
           "prompt": "BINARY_JUDGE_SYSTEM", "prompt_id": prompt_id(prompts.BINARY_JUDGE_SYSTEM)}
    if len(settings) > 1:
        out.update(_pass_record(settings))
    return out


async def pairwise_judge(ctx: Any, question: str, gold: str, answer_a: str, answer_b: str, seed: int
                         ) -> dict[str, Any]:
    """Blind pairwise comparison with randomised order (seed 001 §10.1): a seeded coin decides whether A is
    shown as "Response X" or "Response Y"; each pass (judge_pass_settings) gives a verdict mapped back to
    a/b/tie and the majority (ties -> tie) is the result. The order shown is recorded."""
    rng = random.Random(seed)
    a_first = rng.random() < 0.5
    x, y = (answer_a, answer_b) if a_first else (answer_b, answer_a)
    order = ["a", "b"] if a_first else ["b", "a"]
    verdicts: list[str] = []
    raw: list[str] = []
    settings = judge_pass_settings(ctx)
    for st in settings:
        res = await _judge_call(ctx, prompts.PAIRWISE_JUDGE_SYSTEM, prompts.pairwise_judge_user(question, gold, x, y),
                                st)
        v = parse_pairwise(res.text)
        if v is None:
            raise ValueError(f"pairwise judge reply has no X/Y/TIE verdict: {res.text[:200]!r}")
        verdicts.append("tie" if v == "TIE" else (order[0] if v == "X" else order[1]))
        raw.append(res.text.strip()[:200])
    counts = {k: verdicts.count(k) for k in ("a", "b", "tie")}
    best = max(counts.values())
    top = [k for k, c in counts.items() if c == best]
    out = {"winner": top[0] if len(top) == 1 else "tie", "verdicts": verdicts, "order_shown": order,
           "raw": raw, "prompt": "PAIRWISE_JUDGE_SYSTEM", "prompt_id": prompt_id(prompts.PAIRWISE_JUDGE_SYSTEM)}
    if len(settings) > 1:
        out.update(_pass_record(settings))
    return out


# BEAM's nugget judging (suites/beam.py, beam_judge). NUGGET_JUDGE_MODE: "question" = one call per question listing
# its nuggets (prompts.NUGGET_JUDGE_SYSTEM), "nugget" = one call per nugget (prompts.NUGGET_JUDGE_ONE_SYSTEM). One per
# nugget, chosen on the reader's labels (suites/data/judge_labels_beam.md, docs/results/beam.md): the local 1.5B
# model, given a list, answered every one-nugget question with two scores (20 of 20 unreadable) and agreed with the
# reader at kappa 0.06 on the rest; one nugget a call, it gave a readable score every time (107 of 107) and agreed at
# kappa 0.31 [0.18, 0.45] over the 43 answers (0.64 on the one-nugget ones).
NUGGET_JUDGE_MODES = ("question", "nugget")
NUGGET_JUDGE_MODE = "nugget"
NUGGET_JUDGE_PROMPT = {"question": "NUGGET_JUDGE_SYSTEM", "nugget": "NUGGET_JUDGE_ONE_SYSTEM"}


def nugget_median(scores: Sequence[float | None]) -> float | None:
    """A nugget's score across judge passes: the median of the passes that gave one (the scale is ordered, so the
    median keeps 0 / 0.5 / 1 apart where a vote would have to break a three-way tie); with an even count the lower
    middle (the sceptical side, as majority_vote's ties). None when no pass gave a score (unjudged, never 0)."""
    got = sorted(s for s in scores if s is not None)
    if not got:
        return None
    return got[(len(got) - 1) // 2]


def nugget_mean(scores: Sequence[float | None]) -> float | None:
    """A question's score: the mean of its nuggets' scores; None when any nugget is unjudged (a mean over the
    nuggets that happened to parse would be another question's score) or there are none."""
    if not scores or any(s is None for s in scores):
        return None
    return sum(s for s in scores if s is not None) / len(scores)


async def nugget_judge(ctx: Any, question: str, nuggets: Sequence[str], answer: str,
                       mode: str | None = None) -> dict[str, Any]:
    """BEAM-style rubric judging: each nugget 0 / 0.5 / 1 from the answer. `mode` (default NUGGET_JUDGE_MODE):
    "question" = one call per pass listing every nugget, "nugget" = one call per nugget per pass. Each pass's reply
    is parsed (parse_nugget_scores / parse_nugget_score); a reply that cannot be read leaves its nuggets unjudged
    for that pass, never 0. A nugget's score is the median across passes (nugget_median), the question's the mean
    (nugget_mean, None if any nugget is unjudged). Records every pass's reply."""
    mode = mode or NUGGET_JUDGE_MODE
    if mode not in NUGGET_JUDGE_MODES:
        raise ValueError(f"mode: {mode!r}; expected one of {', '.join(NUGGET_JUDGE_MODES)}")
    nuggets = list(nuggets)
    settings = judge_pass_settings(ctx)
    per_pass: list[list[float | None]] = []
    raw: list[Any] = []
    for st in settings:
        if mode == "question":
            res = await _judge_call(ctx, prompts.NUGGET_JUDGE_SYSTEM,
                                    prompts.nugget_judge_user(question, answer, nuggets), st)
            got = parse_nugget_scores(res.text, len(nuggets))
            per_pass.append(got if got is not None else [None] * len(nuggets))
            raw.append(res.text.strip()[:300])
        else:
            row: list[float | None] = []
            texts = []
            for n in nuggets:
                res = await _judge_call(ctx, prompts.NUGGET_JUDGE_ONE_SYSTEM,
                                        prompts.nugget_judge_user(question, answer, [n]), st)
                row.append(parse_nugget_score(res.text))
                texts.append(res.text.strip()[:120])
            per_pass.append(row)
            raw.append(texts)
    scores = [nugget_median([p[i] for p in per_pass]) for i in range(len(nuggets))]
    prompt = NUGGET_JUDGE_PROMPT[mode]
    out = {"score": nugget_mean(scores), "nuggets": scores, "passes": per_pass, "raw": raw, "mode": mode,
           "unjudged": sum(1 for s in scores if s is None), "prompt": prompt,
           "prompt_id": prompt_id(getattr(prompts, prompt))}
    if len(settings) > 1:
        out.update(_pass_record(settings))
    return out


# ------------------------------------------------------------------------------------------------------
# The QA judge

# The suites' judge for model-made QA accuracy: the one the human labels chose (README, "Which judge a careful
# reader agrees with"): with the local model the 0-3 rubric judge (score >= 2 = correct) agreed at kappa 0.721
# [0.514, 0.888] on judge_labels_locomo.jsonl (n=57), the binary judge at 0.336 [0.166, 0.523].
QA_JUDGE = "model 0-3"
QA_JUDGE_PROMPT = {"model 0-3": "JUDGE_SYSTEM", "model binary": "BINARY_JUDGE_SYSTEM"}


async def qa_judge(ctx: Any, question: str, gold: str, answer: str) -> dict[str, Any]:
    """The judge behind model-made QA accuracy (LoCoMo's J, LongMemEval's QA accuracy): the one that agrees best
    with the human labels (QA_JUDGE). Returns the sample fields it fills: {"judge": 0-3 result}
    for the rubric judge, {"binary_judge": label result} for the binary one (judged_correct reads either)."""
    if QA_JUDGE == "model 0-3":
        res = await rubric_judge(ctx, question, gold, answer)
        return {"judge": {**res, "prompt": "JUDGE_SYSTEM", "prompt_id": prompt_id(prompts.JUDGE_SYSTEM)}}
    return {"binary_judge": await binary_judge(ctx, question, gold, answer)}


def judged_correct(sample: Mapping[str, Any]) -> bool | None:
    """Whether a QA judge accepted the sample's answer: a 0-3 score of 2 or 3 (`judge`), else the binary label
    (`binary_judge`); None when neither judged it."""
    j = sample.get("judge")
    if isinstance(j, Mapping) and j.get("score") is not None:
        return int(j["score"]) >= 2
    b = sample.get("binary_judge")
    if isinstance(b, Mapping) and b.get("correct") is not None:
        return bool(b["correct"])
    return None


def qa_judge_used(samples: Iterable[Mapping[str, Any]]) -> str | None:
    """Which judge made a run's QA accuracy: "model 0-3" when its samples carry 0-3 scores, "model binary" when
    they carry binary labels, None when nothing was judged."""
    kinds = {"model 0-3" if isinstance(s.get("judge"), Mapping) and s["judge"].get("score") is not None
             else "model binary" for s in samples if judged_correct(s) is not None}
    return "model 0-3" if "model 0-3" in kinds else ("model binary" if kinds else None)
