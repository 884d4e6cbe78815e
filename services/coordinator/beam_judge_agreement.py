"""BEAM's nugget judge (judges.nugget_judge) against a reader's labels (`memrig judge-agreement --suite beam`).

A labels file (services/coordinator/suites/data/judge_labels_beam.jsonl; format, rule and provenance in its .md) holds
answers to BEAM dev questions, each with a reader's 0 / 0.5 / 1 for every rubric nugget of its question. The question
and its nuggets are read from the BEAM file by the probe id (`beam-100K-2:knowledge_update:0`), never copied into
the labels. The judge model scores the same answers' nuggets; the offline term rule (suites/beam.py nugget_terms:
carried = 1, not = 0) is a second rater where it applies (content abilities, nuggets with terms).

Agreement, per nugget: exact agreement, Cohen's kappa and its quadratic-weighted form over the three levels
(judge_agreement.cohen_kappa); per question (the judge's mean of its nuggets, BEAM's question score, against the
reader's): mean absolute difference, Pearson correlation and the two means. Intervals: 95% percentile bootstrap over
questions (a question's nuggets resampled together), 1,000 seeded resamples. A nugget the judge left unjudged (a
reply it could not read) is counted and left out of the nugget figures; its question is left out of the question
figures.

`python -m services.coordinator.beam_judge_agreement export RUN_DIR OUT` writes the blind labelling sheet of a run
with answers: one answer per question (a seeded pick among the backends that answered it), backend names dropped,
order shuffled by the seed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from services.coordinator import judges
from services.coordinator.judge_agreement import (
    N_RESAMPLES,
    bootstrap_kappa,
    cohen_kappa,
    confusion,
    label_records,
)
from services.coordinator.metrics import shown as text_rule

LEVELS = (0.0, 0.5, 1.0)
LABEL_FIELDS = ("id", "probe", "candidate", "labels")


def _level(x: float) -> int:
    return LEVELS.index(float(x))


def load_labels(path: str | Path, beam_file: str | Path) -> list[dict[str, Any]]:
    """The labelled answers, each joined with its question, ability and nuggets from the BEAM file. Every line must
    carry LABEL_FIELDS: `id` (unique), `probe` (a question of the file: conversation:ability:index), `candidate`
    (non-empty text), `labels` (one 0, 0.5 or 1 per nugget of the question, in order); `reason` optional. Errors
    name the line and the field."""
    from services.coordinator.suites import beam as B

    raw = B.read_file(Path(beam_file))
    questions: dict[str, tuple[str, list[str]]] = {}
    for conv in raw["conversations"]:
        for ability, qs in (conv.get("probing_questions") or {}).items():
            for i, q in enumerate(qs or []):
                questions[f"{conv['id']}:{ability}:{i}"] = (q.get("question") or "", list(q.get("rubric") or []))
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    for where, rec in label_records(path, LABEL_FIELDS):
        if not isinstance(rec["id"], str) or not rec["id"] or rec["id"] in seen:
            raise ValueError(f"{where}: field 'id': {rec['id']!r} is empty, not text or appears twice")
        seen.add(rec["id"])
        if rec["probe"] not in questions:
            raise ValueError(f"{where}: field 'probe': {rec['probe']!r} is not a question of {beam_file}")
        question, nuggets = questions[rec["probe"]]
        if not isinstance(rec["candidate"], str) or not rec["candidate"].strip():
            raise ValueError(f"{where}: field 'candidate': expected a non-empty string")
        labels = rec["labels"]
        if not isinstance(labels, list) or len(labels) != len(nuggets):
            raise ValueError(f"{where}: field 'labels': expected a list of {len(nuggets)} scores (one per nugget of "
                             f"{rec['probe']}), got {labels!r}")
        for k, x in enumerate(labels):
            if isinstance(x, bool) or not isinstance(x, int | float) or float(x) not in LEVELS:
                raise ValueError(f"{where}: field 'labels[{k}]': {x!r}; expected 0, 0.5 or 1")
        items.append({"id": rec["id"], "probe": rec["probe"], "conversation": rec["probe"].split(":", 1)[0],
                      "ability": rec["probe"].split(":")[1], "question": question, "nuggets": nuggets,
                      "candidate": rec["candidate"], "labels": [float(x) for x in labels]})
    if not items:
        raise ValueError(f"{path}: no labelled items")
    return items


def offline_scores(items: Sequence[Mapping[str, Any]]) -> list[list[float | None]]:
    """The offline term rule on each answer's nuggets (suites/beam.py: carried = 1, not = 0); None where it does not
    apply (abstention, instruction and preference following; forbidding nuggets; nuggets without terms)."""
    from services.coordinator.suites import beam as B

    out = []
    for it in items:
        if it["ability"] in B.BEHAVIOUR_NUGGETS:
            out.append([None] * len(it["nuggets"]))
            continue
        have = text_rule.shown_terms(text_rule.words(it["candidate"]))
        row: list[float | None] = []
        for nug in it["nuggets"]:
            t = B.nugget_terms(nug)
            row.append(None if not t else float((text_rule.answer_coverage(t, have) or 0.0) >= B.NUGGET_CARRIED))
        out.append(row)
    return out


async def model_scores(items: Sequence[Mapping[str, Any]], ctx: Any, mode: str | None = None
                       ) -> tuple[list[list[float | None]], list[Any]]:
    """The judge model's nugget scores on every labelled answer (judges.nugget_judge through ctx.judge_llm), and
    its raw replies."""
    scores, raw = [], []
    for it in items:
        r = await judges.nugget_judge(ctx, it["question"], it["nuggets"], it["candidate"], mode=mode)
        scores.append(r["nuggets"])
        raw.append(r["raw"])
    return scores, raw


def _pearson(x: np.ndarray, y: np.ndarray) -> float | None:
    if len(x) < 2 or float(np.std(x)) == 0.0 or float(np.std(y)) == 0.0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def _boot(values: list[tuple[float, float]], stat, seed: int, n_resamples: int) -> list[float] | None:
    """95% percentile interval of stat(x, y) over questions resampled with replacement (None: under 2 questions or
    the statistic undefined in over half the resamples)."""
    if len(values) < 2:
        return None
    arr = np.array(values, dtype=float)
    rng = np.random.default_rng(seed)
    got = []
    for _ in range(n_resamples):
        pick = arr[rng.integers(0, len(arr), len(arr))]
        v = stat(pick[:, 0], pick[:, 1])
        if v is not None:
            got.append(v)
    if len(got) < n_resamples / 2:
        return None
    lo, hi = np.percentile(got, [2.5, 97.5])
    return [float(lo), float(hi)]


def _mad(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.abs(x - y)))


def agreement(items: Sequence[Mapping[str, Any]], scores: Sequence[Sequence[float | None]], seed: int = 0,
              n_resamples: int = N_RESAMPLES) -> dict[str, Any]:
    """One rater's nugget scores (`scores`, aligned with items' nuggets; None = unjudged or not rated) against the
    reader's labels: per nugget and per question (module docstring)."""
    if len(scores) != len(items):
        raise ValueError(f"scores: {len(scores)} rows for {len(items)} items")
    a, b, clusters = [], [], []
    per_q: list[tuple[float, float]] = []
    by_ability: dict[str, dict[str, Any]] = {}
    unjudged = 0
    for it, row in zip(items, scores, strict=True):
        if len(row) != len(it["labels"]):
            raise ValueError(f"scores for {it['id']}: {len(row)} for {len(it['labels'])} nuggets")
        ab = by_ability.setdefault(it["ability"], {"nuggets": 0, "agree": 0, "label_sum": 0.0, "rater_sum": 0.0})
        for lab, s in zip(it["labels"], row, strict=True):
            if s is None:
                unjudged += 1
                continue
            a.append(_level(lab))
            b.append(_level(s))
            clusters.append(str(it["id"]))
            ab["nuggets"] += 1
            ab["agree"] += int(lab == s)
            ab["label_sum"] += lab
            ab["rater_sum"] += s
        if row and all(s is not None for s in row):
            per_q.append((sum(it["labels"]) / len(row), sum(float(s) for s in row if s is not None) / len(row)))
    out: dict[str, Any] = {"items": len(items), "nuggets": len(a), "unrated_nuggets": unjudged,
                           "resamples": n_resamples}
    if a:
        levels = (0, 1, 2)
        ci, und = bootstrap_kappa(a, b, clusters, levels, seed=seed, n_resamples=n_resamples)
        wci, wund = bootstrap_kappa(a, b, clusters, levels, weighted=True, seed=seed + 1, n_resamples=n_resamples)
        out["nugget"] = {"agreement": sum(x == y for x, y in zip(a, b, strict=True)) / len(a),
                         "kappa": cohen_kappa(a, b, levels), "ci": ci, "undefined_resamples": und,
                         "weighted_kappa": cohen_kappa(a, b, levels, weighted=True), "weighted_ci": wci,
                         "weighted_undefined_resamples": wund, "confusion": confusion(a, b, levels),
                         "levels": list(LEVELS)}
    if per_q:
        x = np.array([p[0] for p in per_q])
        y = np.array([p[1] for p in per_q])
        out["question"] = {"n": len(per_q), "label_mean": float(x.mean()), "rater_mean": float(y.mean()),
                           "mean_abs_diff": _mad(x, y), "mad_ci": _boot(per_q, _mad, seed + 2, n_resamples),
                           "pearson": _pearson(x, y), "pearson_ci": _boot(per_q, _pearson, seed + 3, n_resamples)}
    out["by_ability"] = {k: {"nuggets": v["nuggets"],
                             "agreement": v["agree"] / v["nuggets"] if v["nuggets"] else None,
                             "label_mean": v["label_sum"] / v["nuggets"] if v["nuggets"] else None,
                             "rater_mean": v["rater_sum"] / v["nuggets"] if v["nuggets"] else None}
                         for k, v in sorted(by_ability.items())}
    return out


def _f(v: float | None, d: int = 3) -> str:
    return "—" if v is None else f"{v:.{d}f}"


def _ci(v: float | None, ci: list[float] | None) -> str:
    return _f(v) + (f" [{_f(ci[0])}, {_f(ci[1])}]" if ci else "")


def render(results: Mapping[str, Mapping[str, Any]], judge_name: str, labels_path: str, digest: str,
           mode: str) -> str:
    """The Markdown of each rater (`results`: rater name -> agreement()) against the reader's labels."""
    first = next(iter(results.values()))
    lines = ["## BEAM nugget judge against a reader's labels", "",
             f"{first['items']} answers, labels `{labels_path}` (sha256 {digest[:12]}); judge model {judge_name}, "
             f"nugget judge mode `{mode}` (prompts.{judges.NUGGET_JUDGE_PROMPT[mode]}). Per nugget: exact agreement, "
             "Cohen's kappa and quadratic-weighted kappa over 0 / 0.5 / 1; per question (mean of its nuggets): mean "
             "absolute difference and Pearson r. 95% percentile bootstrap over questions "
             f"({first['resamples']:,} resamples).", "",
             "| rater | nuggets rated (left out) | exact agreement | kappa [95% CI] | weighted kappa [95% CI] | "
             "questions | mean abs diff [95% CI] | Pearson r [95% CI] | mean (rater / labels) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        nu, q = r.get("nugget") or {}, r.get("question") or {}
        lines.append(
            f"| {name} | {r['nuggets']} ({r['unrated_nuggets']}) | "
            f"{_f(nu.get('agreement') * 100 if nu.get('agreement') is not None else None, 1)}% | "
            f"{_ci(nu.get('kappa'), nu.get('ci'))} | {_ci(nu.get('weighted_kappa'), nu.get('weighted_ci'))} | "
            f"{q.get('n', 0)} | {_ci(q.get('mean_abs_diff'), q.get('mad_ci'))} | "
            f"{_ci(q.get('pearson'), q.get('pearson_ci'))} | {_f(q.get('rater_mean'))} / {_f(q.get('label_mean'))} |")
    for name, r in results.items():
        nu = r.get("nugget")
        if not nu:
            continue
        lines += ["", f"{name}, nuggets (rows: labels 0 / 0.5 / 1; columns: {name} 0 / 0.5 / 1):", "",
                  "| labels ↓ | 0 | 0.5 | 1 |", "|---|---|---|---|"]
        for lv, row in zip(LEVELS, nu["confusion"], strict=True):
            lines.append(f"| **{lv:g}** | " + " | ".join(str(c) for c in row) + " |")
        lines += ["", "| ability | nuggets | agreement | mean (rater / labels) |", "|---|---|---|---|"]
        for ab, v in r["by_ability"].items():
            if v["nuggets"]:
                lines.append(f"| {ab} | {v['nuggets']} | {_f(v['agreement'] * 100, 1)}% | "
                             f"{_f(v['rater_mean'])} / {_f(v['label_mean'])} |")
    return "\n".join(lines)


def labels_digest(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ------------------------------------------------------------------------------------------------------
# The blind labelling sheet


def blind_sheet(samples: Sequence[Mapping[str, Any]], seed: int = 0, every: bool = False) -> list[dict[str, Any]]:
    """One answered sample per question (a seeded pick among the conditions that answered it; `every`: all of
    them), without the backend, in a seeded shuffled order, numbered B01, B02, ...: {id, probe, question, nuggets,
    answer}."""
    by_probe: dict[str, list[Mapping[str, Any]]] = {}
    for s in samples:
        if s.get("status", "ok") == "ok" and isinstance(s.get("answer"), str):
            by_probe.setdefault(str(s["probe_id"]), []).append(s)
    rng = random.Random(seed)
    picked = []
    for pid in sorted(by_probe):
        rows = sorted(by_probe[pid], key=lambda r: str(r.get("condition")))
        picked += rows if every else [rows[rng.randrange(len(rows))]]
    rng.shuffle(picked)
    return [{"id": f"B{i:02d}", "probe": str(s["probe_id"]), "question": s.get("question"),
             "nuggets": list((s.get("meta") or {}).get("rubric") or []), "answer": s["answer"]}
            for i, s in enumerate(picked, 1)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m services.coordinator.beam_judge_agreement")
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("export", help="the blind labelling sheet of BEAM runs with answers")
    ex.add_argument("run_dir", nargs="+", help="run directories (their samples.jsonl)")
    ex.add_argument("out")
    ex.add_argument("--seed", type=int, default=0)
    ex.add_argument("--every", action="store_true", help="every answer, not one per question")
    args = ap.parse_args(argv)
    samples = []
    for i, run in enumerate(args.run_dir):  # runs kept apart: a backend of two runs is two answerers
        samples += [{**json.loads(x), "condition": f"{i}:{json.loads(x).get('condition')}"}
                    for x in (Path(run) / "samples.jsonl").read_text().splitlines() if x.strip()]
    sheet = blind_sheet(samples, args.seed, args.every)
    Path(args.out).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in sheet))
    print(f"{len(sheet)} answers -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
