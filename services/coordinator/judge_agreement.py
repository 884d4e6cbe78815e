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

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

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
    clusters = [r["probe_id"] for r in rows]
    if scale == "0-3":
        model = [int(r["model_0_3"] >= 2) for r in rows]
        rubric = [int(r["rubric_0_3"] >= 2) for r in rows]
    else:
        model = [int(bool(r.get("model_binary"))) for r in rows]
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
        "scale": scale, "n": len(rows), "questions": len(set(clusters)),
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
             + ("a 0-3 score of 2 or 3." if ag["scale"] == "0-3" else "the CORRECT label."), ""]
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
