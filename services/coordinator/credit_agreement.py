"""`memrig credit-agreement`: which rule of "what the agent was shown" agrees with a reader who saw only the text.

The labels (suites/data/credit_labels.jsonl, written before any rule was scored; its .md says by whom and how) are
(question, the first 1,000 tokens a backend injected) items, each 2 / 1 / 0: the gold answer can / partly / cannot
be given from this text alone. The reader saw the question, the gold answer, the question's date and the text,
never the backend's name or any score. The texts are not in the repository (they are LoCoMo's and LongMemEval's
words): an item names its suite, probe and backend, and the SHA-256 of the text it was labelled on; the command
reads the texts from run directories (`--run`, each a suite run of `memrig bench`) and scores only the items whose
text is byte-identical to the labelled one (the others are counted: a changed backend changes its text).

Candidate rules, each put on the labels' 0 / 1 / 2 scale per item (CANDIDATES; fixed before any was scored):
- `message`: the rig's text rule (metrics/shown.py): the share r of gold messages shown, 2 when r = 1, 1 when
  0 < r < 1, 0 when r = 0;
- `answer`: the share s of the gold answer's terms in the text (shown.answer_coverage), 2 when s = 1, 1 when
  s >= 0.5, else 0;
- `message-or-answer`: the higher of the two;
- `claimed`: the backend's own evidence ids and spans (metrics/budget.py, the credit rule before this one), on the
  scale of `message`.

Agreement: Cohen's kappa with quadratic weights (judge_agreement.cohen_kappa) between each rule and the labels, a
95% percentile bootstrap interval resampling whole questions (the items of one question under several backends are
not independent), 1,000 seeded resamples; beside it, per backend, the labels' mean (2 -> 1, 1 -> 0.5, 0 -> 0) and
each rule's mean on the same scale. The rule with the highest kappa heads the verdict (metrics/budget.HEADLINE_RULE;
`--record` writes the measurement beside the labels, and a test holds the constant to it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from services.common.errors import InputError
from services.coordinator.credit_record import RECORD
from services.coordinator.judge_agreement import bootstrap_kappa, cohen_kappa
from services.coordinator.metrics import budget, shown

DATA = Path(__file__).resolve().parent / "suites" / "data"
LABELS = DATA / "credit_labels.jsonl"
CANDIDATES = ("message", "answer", "message-or-answer", "claimed")
LEVELS = (0, 1, 2)
N_RESAMPLES = 1000


class CreditLabelError(InputError):
    """A labels file or run directory the command cannot use; `field` names the line and field, or the path."""


ordinal_recall, ordinal_share = shown.ordinal_recall, shown.ordinal_share


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------------------------------------------
# What a run shows, per (suite, probe, backend)


@dataclass
class Shown:
    """One probe on one backend, as the grader sees it at the headline budget."""

    suite: str
    probe_id: str
    backend: str
    category: str
    question: str
    answer: str
    question_date: str
    text: str
    gold: list[str]
    answerable: bool
    claimed: list[str]
    gold_coverage: dict[str, float] = field(default_factory=dict)
    answer_share: float | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.suite, self.probe_id, self.backend)

    def rule_values(self) -> dict[str, float | None]:
        """Each candidate rule's value in [0, 1] (None where it has none)."""
        g = self.gold
        msg = (sum(1 for e in g if self.gold_coverage.get(e, 0.0) >= shown.MESSAGE_SHOWN and
                   self.gold_coverage.get(e, 0.0) > 0) / len(g)) if g else None
        ans = self.answer_share if self.answerable else None
        claimed = budget.recall_at_budget(self.claimed, g)
        return {"message": msg, "answer": ans, "claimed": claimed}

    def ordinals(self) -> dict[str, int | None]:
        v = self.rule_values()
        return {"message": ordinal_recall(v["message"]), "answer": ordinal_share(v["answer"]),
                "message-or-answer": shown.message_or_answer(v["message"], v["answer"]),
                "claimed": ordinal_recall(v["claimed"])}


def answerable(suite: str, category: str, meta: Mapping[str, Any]) -> bool:
    """Whether a probe's gold answer is a fact the conversation states (LoCoMo's adversarial category 5 and
    LongMemEval's abstention questions are not)."""
    if suite == "locomo":
        return category != "5"
    if suite == "longmemeval":
        return not meta.get("abstention")
    return True


def read_runs(run_dirs: Iterable[str | Path]) -> dict[tuple[str, str, str], Shown]:
    """Every ok sample of every suite run directory, graded from its shown text (`shown_text`, the first 1,000
    tokens injected) against the corpus the suite loads."""
    from services.coordinator.verdict import VerdictError, load_suite_run

    out: dict[tuple[str, str, str], Shown] = {}
    for d in run_dirs:
        try:
            run, _, suite, samples = load_suite_run(d, need_metrics=False)
        except VerdictError as e:
            raise CreditLabelError(str(d), str(e)) from None
        data = suite.load()
        probes = {p.id: p for p in data.probes}
        index: dict[str, shown.CorpusIndex] = {}
        for s in samples:
            recs = s.get("retrievals") or {}
            if len(recs) != 1:
                continue
            backend, rec = next(iter(recs.items()))
            p = probes.get(str(s.get("probe_id")))
            if p is None or "shown_text" not in rec:
                continue
            if p.namespace not in index:
                batch = data.corpora[p.namespace]
                index[p.namespace] = shown.CorpusIndex(
                    [(m.id, m.content) for ss in batch.sessions for m in ss.messages]
                    + [(doc.id, doc.text) for doc in batch.documents])
            acc = rec.get("budget") or {}
            claimed = ((acc.get("claimed") if "grader" in acc else acc.get("shown")) or {}).get(
                str(budget.HEADLINE_BUDGET)) or []
            text = rec["shown_text"]
            ws = shown.words(text)
            keys = shown.text_keys(ws, index[p.namespace].n)
            terms = shown.answer_terms(p.ground_truth) if p.ground_truth else []
            qdate = p.reference_time.strftime("%Y/%m/%d (%a) %H:%M") if (
                suite.name == "longmemeval" and p.reference_time) else ""
            item = Shown(suite.name, p.id, backend, str(p.category), p.question, p.ground_truth, qdate, text,
                         list(p.evidence_ids), answerable(suite.name, str(p.category), p.meta), list(claimed),
                         index[p.namespace].coverage_of(keys, p.evidence_ids),
                         shown.answer_coverage(terms, shown.shown_terms(ws)) if terms else None)
            out[item.key] = item
    return out


# --------------------------------------------------------------------------------------------------------------
# Drawing items for the reader


def draw(graded: Mapping[tuple[str, str, str], Shown], backends: Sequence[str], per_suite: Mapping[str, int],
         seed: int = 0) -> list[Shown]:
    """The items to label: per suite, `per_suite[suite]` questions drawn at random (seeded, spread over the
    categories round-robin) among those with gold evidence and a stated answer that every backend in `backends`
    answered, each under every backend; then shuffled, so a reader never sees one question's texts in a row."""
    rng = random.Random(seed)
    picked: list[Shown] = []
    for suite, n in sorted(per_suite.items()):
        pids = {k[1] for k in graded if k[0] == suite}
        ok = sorted(p for p in pids if all((suite, p, b) in graded for b in backends)
                    and graded[(suite, p, backends[0])].gold and graded[(suite, p, backends[0])].answerable)
        by_cat: dict[str, list[str]] = {}
        for pid in ok:
            by_cat.setdefault(graded[(suite, pid, backends[0])].category, []).append(pid)
        for v in by_cat.values():
            rng.shuffle(v)
        order, cats = [], sorted(by_cat)
        while len(order) < n and any(by_cat[c] for c in cats):
            for c in cats:
                if by_cat[c] and len(order) < n:
                    order.append(by_cat[c].pop())
        picked += [graded[(suite, pid, b)] for pid in sorted(order) for b in backends]
    rng.shuffle(picked)
    return picked


def reader_view(item_id: str, s: Shown) -> dict[str, Any]:
    """What the reader sees of an item: no backend, no score, no evidence ids."""
    return {"id": item_id, "question": s.question, "gold_answer": s.answer, "question_date": s.question_date,
            "context": s.text}


# --------------------------------------------------------------------------------------------------------------
# Labels and agreement


def read_labels(path: str | Path) -> list[dict[str, Any]]:
    """The labels file, every line checked: id, suite, probe_id, backend, sha256 (64 hex), label 0/1/2."""
    path = Path(path)
    if not path.exists():
        raise CreditLabelError(str(path), "no such file")
    out, seen = [], set()
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise CreditLabelError(f"{path.name}:{n}", f"not JSON ({e.msg})") from None
        for f in ("id", "suite", "probe_id", "backend", "sha256", "label"):
            if f not in row:
                raise CreditLabelError(f"{path.name}:{n}.{f}", "missing")
        if row["label"] not in LEVELS:
            raise CreditLabelError(f"{path.name}:{n}.label", f"{row['label']!r} is not 0, 1 or 2")
        if not (isinstance(row["sha256"], str) and len(row["sha256"]) == 64):
            raise CreditLabelError(f"{path.name}:{n}.sha256", "not a SHA-256 hex digest")
        if row["id"] in seen:
            raise CreditLabelError(f"{path.name}:{n}.id", f"{row['id']} appears twice")
        seen.add(row["id"])
        out.append(row)
    return out


def match(labels: Sequence[Mapping[str, Any]], graded: Mapping[tuple[str, str, str], Shown]
          ) -> tuple[list[tuple[Mapping[str, Any], Shown]], dict[str, int]]:
    """(labelled items paired with what the runs show, counts of those left out: not in the runs / text changed)."""
    pairs, missing, changed = [], 0, 0
    for row in labels:
        s = graded.get((row["suite"], row["probe_id"], row["backend"]))
        if s is None:
            missing += 1
        elif sha256(s.text) != row["sha256"]:
            changed += 1
        else:
            pairs.append((row, s))
    return pairs, {"not_in_runs": missing, "text_changed": changed}


def agreement(pairs: Sequence[tuple[Mapping[str, Any], Shown]], seed: int = 0,
              n_resamples: int = N_RESAMPLES) -> dict[str, Any]:
    """Per candidate rule: items it rates, quadratic weighted kappa against the labels with its bootstrap interval
    (questions resampled whole), unweighted kappa, exact agreement, the confusion table (rows: label 0/1/2,
    columns: rule 0/1/2), and per backend the labels' and the rule's means on [0, 1]; `best`: the rule with the
    highest weighted kappa."""
    rules: dict[str, Any] = {}
    for rule in CANDIDATES:
        rows = [(int(r["label"]), s.ordinals()[rule], f"{s.suite}:{s.probe_id}", s.backend) for r, s in pairs]
        rows = [x for x in rows if x[1] is not None]
        if not rows:
            rules[rule] = {"n": 0}
            continue
        lab, val, clu, bk = zip(*rows, strict=True)
        kw = cohen_kappa(lab, val, LEVELS, weighted=True)
        ci, undefined = bootstrap_kappa(lab, val, clu, LEVELS, weighted=True, seed=seed, n_resamples=n_resamples)
        per_backend: dict[str, Any] = {}
        for b in sorted(set(bk)):
            ix = [i for i, x in enumerate(bk) if x == b]
            per_backend[b] = {"n": len(ix), "labels": float(np.mean([lab[i] / 2 for i in ix])),
                              "rule": float(np.mean([val[i] / 2 for i in ix]))}
        conf = [[0] * 3 for _ in LEVELS]
        for a, v in zip(lab, val, strict=True):
            conf[a][v] += 1
        rules[rule] = {"n": len(rows), "kappa_weighted": kw, "ci": ci, "undefined_resamples": undefined,
                       "kappa": cohen_kappa(lab, val, LEVELS), "exact": float(np.mean([a == v for a, v in
                                                                                        zip(lab, val, strict=True)])),
                       "confusion": conf, "per_backend": per_backend}
    scored = [r for r in CANDIDATES if rules[r].get("kappa_weighted") is not None]
    best = max(scored, key=lambda r: rules[r]["kappa_weighted"]) if scored else None
    return {"items": len(pairs), "rules": rules, "best": best,
            "questions": len({f"{s.suite}:{s.probe_id}" for _, s in pairs}),
            "backends": sorted({s.backend for _, s in pairs})}


def parse_label(text: str) -> int | None:
    """A model's 0/1/2 from {"label": n} (or the first lone 0, 1 or 2 in its reply); None when it gives none."""
    import re

    m = re.search(r'"label"\s*:\s*"?([012])\b', text or "")
    if m is None:
        m = re.search(r"\b([012])\b", text or "")
    return int(m.group(1)) if m else None


async def model_ratings(pairs: Sequence[tuple[Mapping[str, Any], Shown]], client: Any, concurrency: int = 2
                        ) -> list[int | None]:
    """The model judge's 0/1/2 per item: the reader's question (prompts.SUFFICIENCY_SYSTEM) on the same text."""
    import asyncio

    from services.common import prompts

    sem = asyncio.Semaphore(concurrency)

    async def one(s: Shown) -> int | None:
        async with sem:
            res = await client.chat([{"role": "system", "content": prompts.SUFFICIENCY_SYSTEM},
                                     {"role": "user", "content": prompts.sufficiency_user(
                                         s.question, s.answer, s.question_date, s.text)}], temperature=0.0)
            return parse_label(res.text)

    return list(await asyncio.gather(*(one(s) for _, s in pairs)))


def model_agreement(pairs: Sequence[tuple[Mapping[str, Any], Shown]], ratings: Sequence[int | None],
                    seed: int = 0, n_resamples: int = N_RESAMPLES) -> dict[str, Any]:
    """The model judge against the labels, as `agreement` rates a rule (items it gave no label are counted)."""
    rows = [(int(r["label"]), v, f"{s.suite}:{s.probe_id}") for (r, s), v in zip(pairs, ratings, strict=True)
            if v is not None]
    if not rows:
        return {"n": 0, "unparsed": len(pairs)}
    lab, val, clu = zip(*rows, strict=True)
    ci, undefined = bootstrap_kappa(lab, val, clu, LEVELS, weighted=True, seed=seed, n_resamples=n_resamples)
    return {"n": len(rows), "unparsed": len(pairs) - len(rows), "kappa_weighted": cohen_kappa(lab, val, LEVELS, True),
            "ci": ci, "kappa": cohen_kappa(lab, val, LEVELS),
            "exact": float(np.mean([a == v for a, v in zip(lab, val, strict=True)]))}


def _f(x: float | None, d: int = 2) -> str:
    return "—" if x is None else f"{x:.{d}f}"


def render(res: Mapping[str, Any], left_out: Mapping[str, int], labels_path: str) -> str:
    lines = [f"# Which credit rule agrees with the blind reader ({labels_path})", "",
             f"{res['items']} labelled items ({res['questions']} questions × {len(res['backends'])} backends) whose "
             f"text is the one labelled; left out: {left_out.get('not_in_runs', 0)} not in the runs given, "
             f"{left_out.get('text_changed', 0)} with another text now.", "",
             "| rule | items | weighted kappa [95% CI] | kappa | exact |", "|---|---|---|---|---|"]
    for rule in CANDIDATES:
        r = res["rules"][rule]
        if not r.get("n"):
            lines.append(f"| {rule} | 0 | — | — | — |")
            continue
        ci = r["ci"]
        cis = f"[{_f(ci[0])}, {_f(ci[1])}]" if ci else "[—]"
        mark = " (heads the verdict)" if rule == budget.HEADLINE_RULE else ""
        lines.append(f"| {rule}{mark} | {r['n']} | {_f(r['kappa_weighted'])} {cis} | {_f(r['kappa'])} | "
                     f"{_f(r['exact'])} |")
    lines += ["", f"Best: **{res['best']}**" + ("" if res["best"] == budget.HEADLINE_RULE else
                                               f" (the verdict uses {budget.HEADLINE_RULE}: update HEADLINE_RULE)"),
              "", "Per backend, the mean on [0, 1] (label 2 -> 1, 1 -> 0.5, 0 -> 0; a rule's 0/1/2 the same way):", ""]
    backends = res["backends"]
    lines += ["| backend | items | labels | " + " | ".join(CANDIDATES) + " |",
              "|---|---|---|" + "---|" * len(CANDIDATES)]
    for b in backends:
        first = res["rules"][CANDIDATES[0]]["per_backend"].get(b) or {}
        cells = [_f((res["rules"][r].get("per_backend") or {}).get(b, {}).get("rule")) for r in CANDIDATES]
        lines.append(f"| {b} | {first.get('n', 0)} | {_f(first.get('labels'))} | " + " | ".join(cells) + " |")
    lines += ["", "Confusion of each rule with the labels (rows: label 0, 1, 2; columns: the rule's 0, 1, 2):", ""]
    for rule in CANDIDATES:
        c = res["rules"][rule].get("confusion")
        if c:
            lines.append(f"- {rule}: " + " / ".join(" ".join(str(x) for x in row) for row in c))
    return "\n".join(lines)


def labels_digest(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# --------------------------------------------------------------------------------------------------------------
# The command (services/common/subcommand.py)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = ("Each candidate credit rule against the blind reader's labels: weighted kappa with a bootstrap "
                     "interval, per-backend means; the rule that agrees best heads the verdict.")
    p.add_argument("--run", action="append", default=[], metavar="DIR",
                   help="a suite run directory holding the labelled texts (repeatable; a bench-all directory adds "
                        "its locomo/ and longmemeval/ runs)")
    p.add_argument("--labels", default=str(LABELS), help="the labels file (default: the committed one)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--record", action="store_true",
                   help=f"write the measurement beside the labels ({RECORD.name})")
    p.add_argument("--judge", choices=("local", "env"), default=None,
                   help="also ask a model the reader's question on every item (local: the local model; env: "
                        "MEMRIG_JUDGE_* / MEMRIG_LLM_*) and print its kappa against the same labels")
    p.add_argument("--before-after", metavar="RUN", default=None,
                   help="instead: every verdict cell of RUN (a bench-all directory) under the backends' claimed "
                        "credit and under the headline rule, side by side")
    p.add_argument("--draw", metavar="OUT_DIR", default=None,
                   help="instead: draw items for a reader from --run (needs --backends), into OUT_DIR")
    p.add_argument("--backends", default="", help="with --draw: the backends every item question is shown under")
    p.add_argument("--per-suite", default="locomo=16,longmemeval=16",
                   help="with --draw: questions per suite (suite=N,...)")


def _judge(pairs: Sequence[tuple[Mapping[str, Any], Shown]], choice: str, seed: int) -> dict[str, Any]:
    import asyncio
    import os

    from services.common.llm_client import LLMClient
    from services.launcher import Rig

    async def go() -> tuple[list[int | None], str]:
        rig = Rig(Path(os.environ.get("MEMRIG_STATE_DIR", ".memrig")) / "credit-agreement")
        try:
            roles = await rig.ensure_llm_roles({"judge": choice})
            async with LLMClient(roles["judge"]) as client:
                return await model_ratings(pairs, client), roles["judge"].model
        finally:
            rig.stop_all()

    ratings, model = asyncio.run(go())
    return {**model_agreement(pairs, ratings, seed), "model": model}


def before_after(out: str | Path) -> list[dict[str, Any]]:
    """Every verdict cell of a run (a bench-all directory or one suite's) under the backends' claimed credit (the rule
    before the rig decided what was shown) and under the headline rule, from the same samples: per suite, backend
    and comparison (vs native, vs BM25) the word and the difference under each."""
    from services.coordinator.verdict import GRADED_HEADLINES, suite_verdict

    out = Path(out)
    dirs = [out] if (out / "run.json").exists() else [d for d in sorted(out.iterdir()) if (d / "metrics.json").exists()]
    rows: list[dict[str, Any]] = []
    for d in dirs:
        try:
            after = suite_verdict(d)
        except Exception:  # a suite without a verdict (no per-probe values) has no cells to compare
            continue
        if after["headline"]["metric"] not in GRADED_HEADLINES:
            continue
        before = suite_verdict(d, metric=budget.claimed_metric(budget.HEADLINE_BUDGET))
        for b, row in after["backends"].items():
            old = before["backends"].get(b) or {}
            for k in ("vs_native", "vs_bm25"):
                a, o = row.get(k), old.get(k)
                if not a and not o:
                    continue
                rows.append({"suite": after["suite"], "backend": b, "vs": k,
                             "before": {"word": (o or {}).get("word"), "delta": (o or {}).get("delta"),
                                        "ci": (o or {}).get("ci"), "against": before["baseline"]["backend"]
                                        if k == "vs_native" else "bm25"},
                             "after": {"word": (a or {}).get("word"), "delta": (a or {}).get("delta"),
                                       "ci": (a or {}).get("ci"), "against": after["baseline"]["backend"]
                                       if k == "vs_native" else "bm25"},
                             "value_before": (old.get("value") or {}).get("mean"),
                             "value_after": (row.get("value") or {}).get("mean")})
    return rows


def render_before_after(rows: Sequence[Mapping[str, Any]]) -> str:
    def cell(c: Mapping[str, Any]) -> str:
        if c.get("delta") is None:
            return "—"
        return f"{c['word']} {c['delta'] * 100:+.1f}"

    lines = ["| suite | backend | vs | claimed credit (before) | shown (after) | changed |", "|---|---|---|---|---|---|"]
    for r in rows:
        vs = "native" if r["vs"] == "vs_native" else "BM25"
        if r["vs"] == "vs_native" and r["before"]["against"] != r["after"]["against"]:
            vs += f" ({r['before']['against']} → {r['after']['against']})"
        lines.append(f"| {r['suite']} | {r['backend']} | {vs} | {cell(r['before'])} | {cell(r['after'])} | "
                     f"{'**yes**' if r['before']['word'] != r['after']['word'] else ''} |")
    return "\n".join(lines)


def _run_dirs(paths: Sequence[str]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if (p / "run.json").exists():
            out.append(p)
            continue
        subs = [d for d in sorted(p.iterdir()) if (d / "run.json").exists()] if p.is_dir() else []
        if not subs:
            raise CreditLabelError("--run", f"{p} is neither a suite run directory nor one that holds them")
        out += [d for d in subs if json.loads((d / "run.json").read_text()).get("suite") in ("locomo", "longmemeval")]
    return out


def check(args: argparse.Namespace) -> None:
    if args.before_after:
        return
    if not args.run:
        raise CreditLabelError("--run", "give at least one run directory holding the labelled texts")
    if args.draw and not args.backends:
        raise CreditLabelError("--backends", "--draw needs the backends to show each question under")


def run(args: argparse.Namespace) -> int:
    from services.adapters.registry import split_names
    from services.coordinator.results import git_sha

    if args.before_after:
        rows = before_after(args.before_after)
        print(json.dumps(rows, indent=1) if args.json else render_before_after(rows))
        return 0
    graded = read_runs(_run_dirs(args.run))
    if args.draw:
        per = {k: int(v) for k, v in (x.split("=") for x in args.per_suite.split(",") if x)}
        items = draw(graded, split_names(args.backends), per, args.seed)
        out = Path(args.draw)
        out.mkdir(parents=True, exist_ok=True)
        key, view = [], []
        for i, s in enumerate(items, 1):
            iid = f"K{i:03d}"
            key.append({"id": iid, "suite": s.suite, "probe_id": s.probe_id, "backend": s.backend,
                        "sha256": sha256(s.text)})
            view.append(reader_view(iid, s))
        (out / "key.jsonl").write_text("".join(json.dumps(k) + "\n" for k in key))
        (out / "items.jsonl").write_text("".join(json.dumps(v, ensure_ascii=False) + "\n" for v in view))
        print(f"{len(items)} items: {out / 'items.jsonl'} (for the reader), {out / 'key.jsonl'} (not for the reader)")
        return 0
    labels = read_labels(args.labels)
    pairs, left_out = match(labels, graded)
    res = agreement(pairs, seed=args.seed)
    if args.judge:
        res["model_judge"] = _judge(pairs, args.judge, args.seed)
    rel = str(Path(args.labels).resolve().relative_to(Path.cwd().resolve())) if Path(
        args.labels).resolve().is_relative_to(Path.cwd().resolve()) else args.labels
    if args.json:
        print(json.dumps({"result": res, "left_out": left_out}, indent=1))
    else:
        print(render(res, left_out, rel))
        if mj := res.get("model_judge"):
            ci = mj.get("ci")
            print(f"\nModel judge ({mj.get('model')}): weighted kappa {_f(mj.get('kappa_weighted'))} "
                  f"[{_f(ci[0]) if ci else '—'}, {_f(ci[1]) if ci else '—'}] over {mj['n']} items "
                  f"({mj.get('unparsed', 0)} replies without a label); the offline rule stays the default.")
    if args.record:
        rec = {"labels": rel, "labels_sha256": labels_digest(args.labels), "commit": git_sha(),
               "command": "memrig credit-agreement " + " ".join(f"--run {r}" for r in args.run),
               "left_out": left_out, "result": res}
        RECORD.write_text(json.dumps(rec, indent=1) + "\n")
    return 0
