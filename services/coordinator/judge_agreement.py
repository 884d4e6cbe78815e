"""How far the judges agree, on the same answers: a model judge, the offline rubric judge and exact/F1 scoring.

For every answered sample of a run the raters are:

- **model judge**: what the run's judge model said (the 0-3 rubric score, or the binary CORRECT/WRONG label), read
  from samples.jsonl;
- **rubric judge**: llm-mock's offline rules (services/llm_mock/judge.py for 0-3, binary_judge.py for the label),
  applied here to the same question, ground truth and answer: not a model;
- **EM**: exact match after LoCoMo's normalisation (metrics/qa.py);
- **F1 ≥ 0.5**: LoCoMo's token F1 (Porter-stemmed; category rules on LoCoMo) at or above one half.

"Correct" for a 0-3 score is 2 or 3 (grounded or generic correct). Agreement is Cohen's kappa, (p_o - p_e) /
(1 - p_e), with the observed agreement p_o and the agreement p_e expected from the raters' own rates; for two 0-3
judges also the quadratically weighted kappa. Intervals: 95% percentile bootstrap over questions (all conditions of
a question resampled together, the same question's answers not being independent), 1,000 seeded resamples;
resamples where kappa is undefined (both raters constant) are left out and counted. A confusion table per pair
with the model judge shows where they part.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from services.common import prompts
from services.coordinator.judges import QA_JUDGE, QA_JUDGE_PROMPT, binary_judge, prompt_id, rubric_judge
from services.coordinator.metrics.qa import exact_match, locomo_f1, token_f1
from services.llm_mock import binary_judge as mock_binary
from services.llm_mock import judge as mock_judge

N_RESAMPLES = 1000
F1_THRESHOLD = 0.5
RATER_NOTES = {
    "model judge": "the run's judge model (named above), read from samples.jsonl",
    "rubric judge": "llm-mock's offline rubric rules on the same answers (not a model)",
    "EM": "exact match after LoCoMo's answer normalisation",
    "F1 ≥ 0.5": "LoCoMo's Porter-stemmed token F1 at or above 0.5",
}


def cohen_kappa(a: Sequence[int], b: Sequence[int], levels: Sequence[int], weighted: bool = False) -> float | None:
    """Cohen's kappa of two raters over the same items (None when both are constant and equal: p_e = 1). With
    `weighted`, disagreement weights (i - j)^2 / (k - 1)^2 (quadratic)."""
    if len(a) != len(b):
        raise ValueError(f"ratings: {len(a)} and {len(b)} items")
    if not a:
        return None
    k = len(levels)
    idx = {v: i for i, v in enumerate(levels)}
    obs = np.zeros((k, k))
    for x, y in zip(a, b, strict=True):
        obs[idx[x], idx[y]] += 1
    obs /= len(a)
    exp = np.outer(obs.sum(axis=1), obs.sum(axis=0))
    if weighted:
        i, j = np.indices((k, k))
        w = (i - j) ** 2 / max(1, (k - 1) ** 2)
    else:
        w = 1.0 - np.eye(k)
    den = float((w * exp).sum())
    if den <= 1e-12:
        return None
    return 1.0 - float((w * obs).sum()) / den


def confusion(a: Sequence[int], b: Sequence[int], levels: Sequence[int]) -> list[list[int]]:
    """counts[i][j]: items rated levels[i] by a and levels[j] by b."""
    idx = {v: i for i, v in enumerate(levels)}
    out = [[0] * len(levels) for _ in levels]
    for x, y in zip(a, b, strict=True):
        out[idx[x]][idx[y]] += 1
    return out


def bootstrap_kappa(a: Sequence[int], b: Sequence[int], clusters: Sequence[str], levels: Sequence[int],
                    weighted: bool = False, seed: int = 0, n_resamples: int = N_RESAMPLES
                    ) -> tuple[list[float] | None, int]:
    """(95% percentile interval or None, resamples where kappa was undefined), resampling whole clusters."""
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(clusters):
        groups.setdefault(c, []).append(i)
    keys = sorted(groups)
    if len(keys) < 2:
        return None, 0
    rng = np.random.default_rng(seed)
    vals, undefined = [], 0
    for _ in range(n_resamples):
        pick = rng.integers(0, len(keys), len(keys))
        rows = [i for p in pick for i in groups[keys[p]]]
        k = cohen_kappa([a[i] for i in rows], [b[i] for i in rows], levels, weighted)
        if k is None:
            undefined += 1
        else:
            vals.append(k)
    if len(vals) < n_resamples / 2:
        return None, undefined
    lo, hi = np.percentile(vals, [2.5, 97.5])
    return [float(lo), float(hi)], undefined


def rate(samples: Iterable[dict[str, Any]], suite: str) -> list[dict[str, Any]]:
    """Every rater's verdict on each answered sample."""
    out = []
    for s in samples:
        if "answer" not in s:
            continue
        q, gold, ans = s.get("question", ""), str(s.get("ground_truth", "")), s["answer"]
        cat = str(s.get("category", ""))
        if suite == "locomo":
            f1 = locomo_f1(ans, gold, int(cat)) if cat.isdigit() else token_f1(ans, gold)
        else:
            f1 = token_f1(ans, gold)
        r: dict[str, Any] = {
            "probe_id": str(s.get("probe_id")), "condition": s.get("condition"),
            "rubric_0_3": mock_judge.grade(q, gold, ans)[0],
            "rubric_binary": mock_binary.label(gold, ans) == "CORRECT",
            "em": bool(exact_match(ans, gold)), "f1": f1,
        }
        if isinstance(s.get("judge"), Mapping) and s["judge"].get("score") is not None:
            r["model_0_3"] = int(s["judge"]["score"])
        if isinstance(s.get("binary_judge"), Mapping):
            r["model_binary"] = bool(s["binary_judge"]["correct"])
        out.append(r)
    return out


def compute(samples: Iterable[dict[str, Any]], suite: str, seed: int = 0) -> dict[str, Any] | None:
    """The agreement tables of one run (None when no sample carries a model judgement)."""
    rows = [r for r in rate(samples, suite) if "model_0_3" in r or "model_binary" in r]
    if not rows:
        return None
    scale = "0-3" if all("model_0_3" in r for r in rows) else "binary"
    # A mixed run (some answers with a 0-3 score only, some with a binary label) is compared on the binary label;
    # an answer without one is missing, not WRONG.
    missing = sum(1 for r in rows if scale == "binary" and "model_binary" not in r)
    if scale == "binary":
        rows = [r for r in rows if "model_binary" in r]
    clusters = [r["probe_id"] for r in rows]
    if scale == "0-3":
        model = [int(r["model_0_3"] >= 2) for r in rows]
        rubric = [int(r["rubric_0_3"] >= 2) for r in rows]
    else:
        model = [int(r["model_binary"]) for r in rows]
        rubric = [int(r["rubric_binary"]) for r in rows]
    binary = {"model judge": model, "rubric judge": rubric, "EM": [int(r["em"]) for r in rows],
              "F1 ≥ 0.5": [int(r["f1"] >= F1_THRESHOLD) for r in rows]}
    names = list(binary)
    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            xa, xb = binary[a], binary[b]
            ci, undefined = bootstrap_kappa(xa, xb, clusters, (0, 1), seed=seed + 31 * len(pairs))
            pairs.append({"a": a, "b": b, "n": len(rows), "agreement": sum(x == y for x, y in zip(xa, xb, strict=True))
                          / len(rows), "kappa": cohen_kappa(xa, xb, (0, 1)), "ci": ci,
                          "undefined_resamples": undefined, "confusion": confusion(xa, xb, (1, 0))})
    by_cond: dict[str, dict[str, Any]] = {}
    for i, r in enumerate(rows):
        c = by_cond.setdefault(str(r["condition"]), {"n": 0, **{k: 0.0 for k in binary}, "model_sum": 0.0,
                                                     "rubric_sum": 0.0})
        c["n"] += 1
        for k, v in binary.items():
            c[k] += v[i]
        if scale == "0-3":
            c["model_sum"] += r["model_0_3"]
            c["rubric_sum"] += r["rubric_0_3"]
    conditions = {}
    for name in sorted(by_cond):
        c = by_cond[name]
        conditions[name] = {"n": c["n"], "correct": {k: c[k] / c["n"] for k in binary}}
        if scale == "0-3":
            conditions[name]["model_mean"] = c["model_sum"] / c["n"]
            conditions[name]["rubric_mean"] = c["rubric_sum"] / c["n"]
    out: dict[str, Any] = {
        "by_condition": conditions,
        "scale": scale, "n": len(rows), "questions": len(set(clusters)), "missing": missing,
        "conditions": len({r["condition"] for r in rows}),
        "positive_rate": {k: sum(v) / len(v) for k, v in binary.items()},
        "pairs": pairs, "resamples": N_RESAMPLES, "f1_threshold": F1_THRESHOLD,
    }
    if scale == "0-3":
        a = [r["model_0_3"] for r in rows]
        b = [r["rubric_0_3"] for r in rows]
        levels = (0, 1, 2, 3)
        ci, und = bootstrap_kappa(a, b, clusters, levels, seed=seed + 7)
        wci, wund = bootstrap_kappa(a, b, clusters, levels, weighted=True, seed=seed + 11)
        out["scores"] = {"kappa": cohen_kappa(a, b, levels), "ci": ci, "undefined_resamples": und,
                         "weighted_kappa": cohen_kappa(a, b, levels, weighted=True), "weighted_ci": wci,
                         "weighted_undefined_resamples": wund,
                         "agreement": sum(x == y for x, y in zip(a, b, strict=True)) / len(rows),
                         "confusion": confusion(a, b, levels), "levels": list(levels),
                         "model_mean": sum(a) / len(a), "rubric_mean": sum(b) / len(b)}
    return out


def _f(v: float | None, d: int = 3) -> str:
    return "—" if v is None else f"{v:.{d}f}"


def _k(v: float | None, ci: list[float] | None) -> str:
    return _f(v) + (f" [{_f(ci[0])}, {_f(ci[1])}]" if ci else "")


def render(ag: Mapping[str, Any], judge_name: str) -> str:
    """The report section: the judges, kappa with intervals per pair, and confusion tables with the model judge."""
    lines = ["## Judge agreement", "",
             f"The same {ag['n']} answers ({ag['questions']} questions × {ag['conditions']} conditions) rated four "
             "ways; Cohen's kappa with a 95% percentile bootstrap interval over questions "
             f"({ag['resamples']:,} resamples). \"Correct\" = "
             + ("a 0-3 score of 2 or 3." if ag["scale"] == "0-3" else "the CORRECT label.")
             + (f" {ag['missing']} answers judged without a binary label are left out (missing, not WRONG)."
                if ag.get("missing") else ""), ""]
    lines += [f"- **model judge**: {judge_name}" + (" (0-3 rubric prompt)" if ag["scale"] == "0-3"
                                                    else " (binary CORRECT/WRONG prompt)")]
    lines += [f"- **{k}**: {v}" for k, v in RATER_NOTES.items() if k != "model judge"]
    raters = list(ag["positive_rate"])
    scores = ag["scale"] == "0-3"
    lines += ["", "Rated correct, by condition and rater" + (" (and the mean 0-3 score of each judge)" if scores else "")
              + ":", "",
              "| condition | n | " + " | ".join(raters) + (" | mean (model) | mean (rubric) |" if scores else " |"),
              "|---|---|" + "---|" * (len(raters) + (2 if scores else 0))]
    for cond, c in (ag.get("by_condition") or {}).items():
        cells = [f"{c['correct'][k] * 100:.1f}%" for k in raters]
        if scores:
            cells += [f"{c['model_mean']:.2f}", f"{c['rubric_mean']:.2f}"]
        lines.append(f"| {cond} | {c['n']} | " + " | ".join(cells) + " |")
    lines.append(f"| **all** | {ag['n']} | " + " | ".join(f"{ag['positive_rate'][k] * 100:.1f}%" for k in raters)
                 + (f" | {ag['scores']['model_mean']:.2f} | {ag['scores']['rubric_mean']:.2f} |" if scores else " |"))
    if ag.get("scores"):
        s = ag["scores"]
        lines += ["", f"0-3 scores, model judge vs rubric judge: exact agreement {s['agreement'] * 100:.1f}%, kappa "
                      f"{_k(s['kappa'], s['ci'])}, quadratic-weighted kappa {_k(s['weighted_kappa'], s['weighted_ci'])}; "
                      f"mean score {s['model_mean']:.2f} (model) vs {s['rubric_mean']:.2f} (rubric).", "",
                  "| model judge ↓ / rubric judge → | " + " | ".join(str(x) for x in s["levels"]) + " |",
                  "|---|" + "---|" * len(s["levels"])]
        for lv, row in zip(s["levels"], s["confusion"], strict=True):
            lines.append(f"| **{lv}** | " + " | ".join(str(c) for c in row) + " |")
    lines += ["", "| pair | n | agreement | Cohen's kappa [95% CI] |", "|---|---|---|---|"]
    for p in ag["pairs"]:
        note = f" ({p['undefined_resamples']} resamples undefined)" if p["undefined_resamples"] else ""
        lines.append(f"| {p['a']} vs {p['b']} | {p['n']} | {p['agreement'] * 100:.1f}% | "
                     f"{_k(p['kappa'], p['ci'])}{note} |")
    lines += ["", "Confusion with the model judge (rows: model judge correct / wrong; columns: the other rater "
                  "correct / wrong):", ""]
    cells = []
    for p in ag["pairs"]:
        if p["a"] == "model judge":
            (tp, fn), (fp, tn) = p["confusion"]
            cells.append(f"| {p['b']} | {tp} | {fn} | {fp} | {tn} |")
    lines += ["| other rater | both correct | model only | other only | both wrong |", "|---|---|---|---|---|", *cells]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------
# Against human labels (`memrig judge-agreement --labels FILE`)
#
# A labels file (services/coordinator/suites/data/judge_labels_locomo.jsonl; rule and provenance beside it) holds
# candidate answers to LoCoMo questions, each with a careful reader's label. Every judge rates the same answers
# and is scored against the reader: Cohen's kappa (binary, "correct" = the CORRECT label, a 0-3 score of 2 or 3,
# EM = 1, F1 >= 0.5) with a 95% percentile bootstrap interval over questions, accuracy, and the false rejections
# (the reader says correct, the judge says wrong) and false acceptances, by item id.

LABEL_JUDGES = ("model 0-3", "model binary", "rubric 0-3 (llm-mock)", "rubric binary (llm-mock)", "EM", "F1 ≥ 0.5")
JUDGE_NOTES = {
    "model 0-3": "the judge model with prompts.JUDGE_SYSTEM (0-3 rubric); correct = score 2 or 3",
    "model binary": "the judge model with prompts.BINARY_JUDGE_SYSTEM (CORRECT/WRONG)",
    "rubric 0-3 (llm-mock)": "llm-mock's offline 0-3 rules (services/llm_mock/judge.py); correct = 2 or 3",
    "rubric binary (llm-mock)": "llm-mock's offline CORRECT/WRONG rules (services/llm_mock/binary_judge.py)",
    "EM": "exact match after LoCoMo's answer normalisation (metrics/qa.py)",
    "F1 ≥ 0.5": "LoCoMo's Porter-stemmed token F1 with its category rules, at or above 0.5",
}
LABEL_FIELDS = ("id", "sample_id", "qa", "candidate", "label")


def labels_digest(path: str | Path) -> str:
    """SHA-256 of the labels file's bytes (what an agreement record is bound to)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def label_records(path: str | Path, fields: Sequence[str]) -> Iterable[tuple[str, dict[str, Any]]]:
    """Each non-blank line of a JSONL labels file as (where, record), where = "path:line". A line that is not JSON,
    not an object or lacks one of `fields` is a ValueError naming the line (and the field)."""
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{where}: not JSON ({e.msg})") from None
        if not isinstance(rec, dict):
            raise ValueError(f"{where}: expected an object")
        for f in fields:
            if f not in rec:
                raise ValueError(f"{where}: field {f!r} is missing")
        yield where, rec


def load_labels(path: str | Path, locomo_file: str | Path) -> list[dict[str, Any]]:
    """The labelled items, each joined with its question, gold answer and category from the LoCoMo file. Every
    line must carry LABEL_FIELDS; `label` is "correct" or "wrong", `rubric` (optional) 0-3 or null, `category`
    (optional) must match the data. Errors name the line and the field."""
    data = json.loads(Path(locomo_file).read_text())
    convs = {c["sample_id"]: c for c in data}
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    for where, rec in label_records(path, LABEL_FIELDS):
        if rec["id"] in seen:
            raise ValueError(f"{where}: field 'id': {rec['id']!r} appears twice")
        seen.add(rec["id"])
        conv = convs.get(rec["sample_id"])
        if conv is None:
            raise ValueError(f"{where}: field 'sample_id': {rec['sample_id']!r} is not in {locomo_file}")
        qa_i = rec["qa"]
        if not isinstance(qa_i, int) or isinstance(qa_i, bool) or not 0 <= qa_i < len(conv["qa"]):
            raise ValueError(f"{where}: field 'qa': {qa_i!r} is not an index into {rec['sample_id']}'s "
                             f"{len(conv['qa'])} questions")
        qa = conv["qa"][qa_i]
        if rec["label"] not in ("correct", "wrong"):
            raise ValueError(f"{where}: field 'label': {rec['label']!r}; expected 'correct' or 'wrong'")
        rubric = rec.get("rubric")
        if rubric is not None and (not isinstance(rubric, int) or isinstance(rubric, bool) or not 0 <= rubric <= 3):
            raise ValueError(f"{where}: field 'rubric': {rubric!r}; expected 0-3 or null")
        if not isinstance(rec["candidate"], str) or not rec["candidate"].strip():
            raise ValueError(f"{where}: field 'candidate': expected a non-empty string")
        if "category" in rec and rec["category"] != qa["category"]:
            raise ValueError(f"{where}: field 'category': {rec['category']!r}, but the data says {qa['category']}")
        if "answer" not in qa:
            raise ValueError(f"{where}: field 'qa': {rec['sample_id']} question {qa_i} has no gold answer "
                             "(category 5); label answerable questions")
        items.append({"id": rec["id"], "question_key": f"{rec['sample_id']}:q{qa_i}", "question": qa["question"],
                      "gold": str(qa["answer"]), "category": int(qa["category"]), "candidate": rec["candidate"],
                      "human": rec["label"] == "correct", "rubric": rubric})
    if not items:
        raise ValueError(f"{path}: no labelled items")
    return items


def offline_verdicts(items: Sequence[Mapping[str, Any]]) -> dict[str, list[int]]:
    """llm-mock's two rule judges, EM and F1 >= 0.5 on every item (1 = correct)."""
    return {
        "rubric 0-3 (llm-mock)": [int(mock_judge.grade(i["question"], i["gold"], i["candidate"])[0] >= 2)
                                  for i in items],
        "rubric binary (llm-mock)": [int(mock_binary.label(i["gold"], i["candidate"]) == "CORRECT") for i in items],
        "EM": [int(bool(exact_match(i["candidate"], i["gold"]))) for i in items],
        "F1 ≥ 0.5": [int(locomo_f1(i["candidate"], i["gold"], i["category"]) >= F1_THRESHOLD) for i in items],
    }


# The 0-3 judge's reply opens with its score ({"score": N, "reason": ...}); at temperature 0 decoding is greedy,
# so the first tokens are the same whatever the cap, and a reply cut after SCORE_TOKENS carries the same score as
# the full one at a fraction of the time (the reason is most of the reply). A cut reply without a score is asked
# again uncapped.
SCORE_TOKENS = 12
MODEL_JUDGES = {"0-3": "model 0-3", "binary": "model binary"}


async def model_verdicts(items: Sequence[Mapping[str, Any]], ctx: Any, judges: Sequence[str] = ("0-3", "binary"),
                         score_tokens: int | None = SCORE_TOKENS
                         ) -> tuple[dict[str, list[int]], dict[str, list[Any]]]:
    """The judge model's verdicts on every item (`judges`: "0-3" and/or "binary"), through ctx.judge_llm (the
    rig's LLM client and its response cache) with the suites' own judge calls (judges.py rubric_judge,
    binary_judge); the 0-3 calls capped at `score_tokens` (None: uncapped). Returns ({judge: verdicts}, {judge:
    raw per item: the 0-3 score, the binary reply})."""
    for j in judges:
        if j not in MODEL_JUDGES:
            raise ValueError(f"judges: {j!r} is not a model judge; expected {', '.join(MODEL_JUDGES)}")
    scores, labels, raw_b = [], [], []
    capped = JudgeSettings(ctx.judge_llm, getattr(ctx, "judge_passes", 1), getattr(ctx, "judge_temperature", 0.0))
    capped.judge_max_tokens = score_tokens
    for it in items:
        if "0-3" in judges:
            try:
                r = await rubric_judge(capped, it["question"], it["gold"], it["candidate"])
            except ValueError:
                r = await rubric_judge(ctx, it["question"], it["gold"], it["candidate"])
            scores.append(int(r["score"]))
        if "binary" in judges:
            b = await binary_judge(ctx, it["question"], it["gold"], it["candidate"])
            labels.append(int(b["correct"]))
            raw_b.append(b["raw"][0] if b["raw"] else "")
    verdicts: dict[str, list[int]] = {}
    raw: dict[str, list[Any]] = {}
    if "0-3" in judges:
        verdicts["model 0-3"], raw["model 0-3"] = [int(s >= 2) for s in scores], scores
    if "binary" in judges:
        verdicts["model binary"], raw["model binary"] = labels, raw_b
    return verdicts, raw


def against_labels(items: Sequence[Mapping[str, Any]], verdicts: Mapping[str, Sequence[int]], seed: int = 0,
                   n_resamples: int = N_RESAMPLES, scores: Sequence[int] | None = None) -> dict[str, Any]:
    """Each judge scored against the human labels (see the section comment). With the model's 0-3 `scores`,
    also its quadratic-weighted kappa against the human 0-3 scores on the items that have one. `best` is the
    judge with the highest kappa (ties: the first in `verdicts`' order)."""
    human = [int(bool(i["human"])) for i in items]
    ids = [str(i["id"]) for i in items]
    clusters = [str(i.get("question_key", i["id"])) for i in items]
    judges: dict[str, dict[str, Any]] = {}
    for k, (name, v) in enumerate(verdicts.items()):
        if len(v) != len(items):
            raise ValueError(f"verdicts[{name!r}]: {len(v)} verdicts for {len(items)} items")
        ci, undefined = bootstrap_kappa(human, list(v), clusters, (0, 1), seed=seed + 31 * k, n_resamples=n_resamples)
        judges[name] = {
            "n": len(items), "kappa": cohen_kappa(human, list(v), (0, 1)), "ci": ci, "undefined_resamples": undefined,
            "accuracy": sum(h == x for h, x in zip(human, v, strict=True)) / len(items),
            "rated_correct": sum(v) / len(items),
            "false_rejections": [i for i, h, x in zip(ids, human, v, strict=True) if h and not x],
            "false_acceptances": [i for i, h, x in zip(ids, human, v, strict=True) if x and not h],
        }
    out: dict[str, Any] = {"n": len(items), "questions": len(set(clusters)), "human_correct": sum(human),
                           "resamples": n_resamples, "judges": judges,
                           "by_category": {str(c): sum(1 for i in items if i["category"] == c)
                                           for c in sorted({i["category"] for i in items})}}
    ranked = [n for n in verdicts if judges[n]["kappa"] is not None]
    out["best"] = max(ranked, key=lambda n: judges[n]["kappa"]) if ranked else None
    if scores is not None:
        both = [(int(i["rubric"]), int(s)) for i, s in zip(items, scores, strict=True) if i.get("rubric") is not None]
        if both:
            a, b = [x for x, _ in both], [y for _, y in both]
            out["rubric_scores"] = {"n": len(both), "agreement": sum(x == y for x, y in both) / len(both),
                                    "kappa": cohen_kappa(a, b, (0, 1, 2, 3)),
                                    "weighted_kappa": cohen_kappa(a, b, (0, 1, 2, 3), weighted=True),
                                    "confusion": confusion(a, b, (0, 1, 2, 3))}
    return out


def render_labels(res: Mapping[str, Any], judge_name: str, labels_path: str, digest: str,
                  items: Sequence[Mapping[str, Any]] | None = None) -> str:
    """The Markdown table of every judge against the human labels, and where each one errs."""
    cats = ", ".join(f"{c}: {n}" for c, n in res["by_category"].items())
    lines = ["## Judges against human labels", "",
             f"{res['n']} answers to {res['questions']} LoCoMo questions (by category {cats}), {res['human_correct']} "
             f"labelled correct; labels `{labels_path}` (sha256 {digest[:12]}). Cohen's kappa with each judge, 95% "
             f"percentile bootstrap interval over questions ({res['resamples']:,} resamples). Judge model: "
             f"{judge_name}.", "",
             "| judge | kappa [95% CI] | accuracy | rated correct | false rejections | false acceptances |",
             "|---|---|---|---|---|---|"]
    for name, j in res["judges"].items():
        best = " **(best)**" if name == res.get("best") else ""
        lines.append(f"| {name}{best} | {_k(j['kappa'], j['ci'])} | {j['accuracy'] * 100:.1f}% | "
                     f"{j['rated_correct'] * 100:.1f}% | {len(j['false_rejections'])} | "
                     f"{len(j['false_acceptances'])} |")
    lines += [""] + [f"- **{k}**: {v}" for k, v in JUDGE_NOTES.items() if k in res["judges"]]
    if res.get("rubric_scores"):
        r = res["rubric_scores"]
        lines += ["", f"Model 0-3 scores vs the human 0-3 scores ({r['n']} items with one): exact agreement "
                      f"{r['agreement'] * 100:.1f}%, kappa {_f(r['kappa'])}, quadratic-weighted kappa "
                      f"{_f(r['weighted_kappa'])}."]
    by_id = {str(i["id"]): i for i in items or []}
    lines += ["", "Disagreements with the human labels (item ids; FR = rejected a correct answer, FA = accepted a "
                  "wrong one):", ""]
    for name, j in res["judges"].items():
        def show(xs: list[str]) -> str:
            return ", ".join(f"{x} ({by_id[x]['candidate'][:40]!r})" if x in by_id else x for x in xs) or "none"
        lines.append(f"- {name}: FR {show(j['false_rejections'])}; FA {show(j['false_acceptances'])}")
    return "\n".join(lines)


class JudgeSettings:
    """What the suites' judge calls read from a probe context: the judge client, one pass at temperature 0 (the
    suites' default, so the figures measure the judge the suites run)."""

    def __init__(self, judge_llm: Any, judge_passes: int = 1, judge_temperature: float = 0.0):
        self.judge_llm = judge_llm
        self.judge_passes = judge_passes
        self.judge_temperature = judge_temperature
        self.judge_max_tokens: int | None = None


async def measure(items: Sequence[Mapping[str, Any]], judge_llm: Any, seed: int = 0,
                  n_resamples: int = N_RESAMPLES, judges: Sequence[str] = ("0-3", "binary"),
                  score_tokens: int | None = SCORE_TOKENS) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """The judges in LABEL_JUDGES on the labelled items: the model's (`judges`) through `judge_llm`, the offline
    four here. Returns (against_labels result, the model's raw verdicts)."""
    model, raw = await model_verdicts(items, JudgeSettings(judge_llm), judges, score_tokens)
    verdicts = {**model, **offline_verdicts(items)}
    res = against_labels(items, {k: verdicts[k] for k in LABEL_JUDGES if k in verdicts}, seed=seed,
                         n_resamples=n_resamples, scores=raw.get("model 0-3"))
    return res, raw


def record_path(labels_path: str | Path) -> Path:
    """Where the agreement record of a labels file lives: beside it, `<stem>.agreement.json`."""
    p = Path(labels_path)
    return p.with_name(p.stem + ".agreement.json")


def make_record(res: Mapping[str, Any], labels_path: str, digest: str, judge_ident: Mapping[str, Any],
                commit: str | None, command: str) -> dict[str, Any]:
    """The small JSON the suite reports read (qa_judge_line): which judge agrees best with the human labels, and
    every judge's kappa, interval and false rejections, bound to the labels digest, the judge model and the
    prompts' ids."""
    return {
        "labels": labels_path, "labels_sha256": digest, "n": res["n"], "questions": res["questions"],
        "judge_model": {k: judge_ident.get(k) for k in ("model", "quantization", "sha256", "offline_mock")
                        if judge_ident.get(k) is not None},
        "prompt_ids": {"model 0-3": prompt_id(prompts.JUDGE_SYSTEM),
                       "model binary": prompt_id(prompts.BINARY_JUDGE_SYSTEM)},
        "best": res.get("best"), "commit": commit, "command": command,
        "judges": {n: {k: j[k] for k in ("kappa", "ci", "accuracy", "false_rejections", "false_acceptances")}
                   for n, j in res["judges"].items()},
    }


DEFAULT_LABELS = Path(__file__).resolve().parent / "suites" / "data" / "judge_labels_locomo.jsonl"


def qa_judge_line(judge: Mapping[str, Any] | None, which: str = QA_JUDGE,
                  labels_path: str | Path = DEFAULT_LABELS) -> str:
    """The line printed beside a model-made QA / judge figure: the judge and how well it agrees with the human
    labels, from the agreement record beside the labels file. The figure is quoted only when the record
    matches the labels (digest), the judge's prompt (id) and the judge model (name and file digest);
    otherwise the line says what does not match, so a figure never borrows another judge's agreement."""
    judge = judge or {}
    prompt = QA_JUDGE_PROMPT.get(which, which)
    name = judge.get("model") or "?"
    head = f"judge: {name} {prompt}"
    if judge.get("offline_mock"):
        return f"{head} (llm-mock's offline rules, not a model): no human-label agreement applies"
    rec_path = record_path(labels_path)
    cmd = f"`memrig judge-agreement --labels {_rel(labels_path)} --judge local --record`"
    if not rec_path.exists():
        return f"{head}: agreement with the human labels not measured ({cmd})"
    rec = json.loads(rec_path.read_text())
    why = []
    if rec.get("labels_sha256") != labels_digest(labels_path):
        why.append("the labels changed since")
    if rec.get("prompt_ids", {}).get(which) != prompt_id(getattr(prompts, prompt)):
        why.append("the prompt changed since")
    m = rec.get("judge_model") or {}
    if m.get("model") != judge.get("model") or (judge.get("sha256") and m.get("sha256") != judge.get("sha256")):
        why.append(f"it was measured for {m.get('model')}")
    j = (rec.get("judges") or {}).get(which)
    if why or not j:
        return f"{head}: agreement with the human labels not measured for this judge ({'; '.join(why) or 'no figure'}; {cmd})"
    return (f"{head}, agrees with the human labels at kappa {_k(j['kappa'], j['ci'])} (n={rec['n']}, labels sha256 "
            f"{rec['labels_sha256'][:12]}; {cmd})")


def _rel(path: str | Path) -> str:
    p = Path(path).resolve()
    root = Path(__file__).resolve().parents[2]
    try:
        return str(p.relative_to(root))
    except ValueError:
        return str(path)
