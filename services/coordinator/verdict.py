"""The verdict: the answer a run was made for, on its first screen (bench-all's and bench-local's report, and each
suite's own report.md under "## Verdict").

Per backend and per suite, the suite's headline metric set against OpenClaw native (the suite's own baseline: the
strongest native profile that ran, named in the column) and against BM25, each as the difference (backend minus
the other) with its 95% interval and the paired permutation p-value, and a word:

- **better** / **worse**: p < 0.05 *and* the interval of the difference excludes 0 *and* the difference is past the
  seed's tie threshold (0.005 for rates and scores), in the metric's own direction;
- **no detectable difference** otherwise (with 4 LoCoMo conversations a permutation test flipping whole
  conversations cannot go below p = 0.125, and the page says so).

Beside them: the context tokens the backend put in front of the model per turn (mean) and its client-observed
retrieve latency p50/p95. Everything comes from the run directory: each suite's run.json, metrics.json and samples
(`Suite.per_probe`); nothing is re-run. The comparison against the baseline is the suite's own scorecard entry when
its metrics.json has one for the headline (so the page and the section it links to print the same numbers), else
it is computed here the same way (stats.compare, clusters as the suite defines them).

Headline metric per suite: the suite's `answer_headline` when a real model answered (and, for a judged metric,
judged), else its `retrieval_headline`: answers from the offline llm-mock measure the mock as much as the memory.
Metrics the mock produced are listed per suite (`mocked_metrics`) and marked on the page.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from services.adapters.registry import role_of
from services.common.errors import InputError
from services.coordinator import baseline as baseline_rule
from services.coordinator import stats
from services.coordinator.credit_record import headline_note
from services.coordinator.metrics.latency import latency_summary
from services.coordinator.results import RunDir
from services.coordinator.suites.base import ProbeValues, Suite
from services.coordinator.suites.common import stable_seed
from services.coordinator.suites.registry import get_suite

ALPHA = 0.05
VERDICT_HEADING = "## Verdict"
VERDICT_END = "<!-- end of verdict -->"  # closes a suite report's verdict section (it has no heading after it)
BETTER, WORSE, SAME = "better", "worse", "no detectable difference"
BM25 = "bm25"
CONTROLS = ("full-context", "compacted", "none")
IR_BASELINES = ("bm25", "dense", "hybrid")
# Short names for the page (verdict.json keeps the metric names).
LABELS = {
    "shown@1000": "shown @1,000 tokens", "budget_recall@1000": "recall @1,000 tokens", "turn_recall@5": "turn R@5", "session_recall_all@5": "session recall_all@5", "recall@5": "R@5",
    "recall_at_5": "R@5", "pass": "pass rate", "hit": "keyword hit rate", "uncontained": "poison uncontained",
    "answer_terms@1000": "answer terms @1,000 tokens", "judge_score": "judge 0-3", "judge_mean": "judge 0-3", "f1_cats_1_4": "F1 (cats 1-4)", "qa_accuracy": "QA accuracy",
}
# Headlines the rig grades from the injected text (metrics/shown.py), whose agreement with blind labels is stated
GRADED_HEADLINES = ("shown@1000", "budget_recall@1000", "answer_terms@1000")
WHY_RETRIEVAL = ("the answers (or their judge) came from the offline llm-mock, whose QA and judge figures measure the "
                 "mock as much as the memory: the verdict uses the suite's retrieval metric")
WHY_ANSWER = "a real model answered (and judged): the verdict uses the suite's answer-quality metric"


class VerdictError(InputError):
    """A run directory the verdict cannot be built from; `field` is the file (or suite) at fault, str(e)
    "field: message"."""


# ------------------------------------------------------------------------------------------------------
# One suite


def load_suite_run(suite_dir: str | Path, need_metrics: bool = True
                   ) -> tuple[dict[str, Any], dict[str, Any], Suite, list[dict[str, Any]]]:
    """(run.json, metrics.json or {}, the suite as run, its ok samples) of one suite's run directory."""
    suite_dir = Path(suite_dir)
    run_json, mpath = suite_dir / "run.json", suite_dir / "metrics.json"
    if not run_json.exists():
        raise VerdictError(str(run_json), "missing (not a suite run directory)")
    if need_metrics and not mpath.exists():
        raise VerdictError(str(mpath), f"missing (the suite did not finish; `memrig report {suite_dir}` re-scores it)")
    for path in (run_json, mpath):
        if path.exists():
            try:
                json.loads(path.read_text())
            except json.JSONDecodeError as e:
                raise VerdictError(str(path), f"not valid JSON ({e})") from None
    run = json.loads(run_json.read_text())
    metrics = json.loads(mpath.read_text()) if mpath.exists() else {}
    if not run.get("suite"):
        raise VerdictError(str(run_json), "suite: missing")
    try:
        suite = get_suite(run["suite"])(run.get("options"), seed=int(run.get("seed") or 0))
    except (KeyError, ValueError) as e:
        raise VerdictError(str(run_json), f"{e.args[0] if e.args else e}") from None
    return run, metrics, suite, [s for s in RunDir(suite_dir).samples() if s.get("status") == "ok"]


def mocked(run: dict[str, Any]) -> tuple[bool, bool]:
    """(answers by llm-mock, judgements by llm-mock) of a suite run."""
    return bool((run.get("llm") or {}).get("offline_mock")), bool((run.get("judge") or {}).get("offline_mock"))


def _mean(values: dict[str, float | None]) -> float | None:
    xs = [float(v) for v in values.values() if v is not None]
    return sum(xs) / len(xs) if xs else None


def native_family(backend: str) -> int | None:
    """0 for OpenClaw itself (any profile), 1 for the port's current release (any variant), None otherwise: the
    backend's registry role (services/adapters/registry.py ROLES)."""
    role = role_of(backend)
    return 0 if role == "native" else 1 if role == "native-port" else None


def is_native(backend: str | None) -> bool:
    """OpenClaw's own memory, or the port of its current release, any profile or variant (by registry role)."""
    return baseline_rule.is_native(backend)


def resolve_baseline(metrics: dict[str, Any], pv: ProbeValues, metric: str, higher_is_better: bool | None = None
                     ) -> tuple[str | None, str]:
    """(baseline condition, the rule that chose it): services/coordinator/baseline.choose on the verdict's headline,
    the same rule every suite's scorecard uses; None when no OpenClaw native backend ran (a suite's control baseline
    is not "OpenClaw native"). When the suite's scorecard chose the same condition its words are kept."""
    cond, rule = baseline_rule.choose(pv.values, pv.backend_of, baseline_rule.means_of(pv.values, metric), metric,
                                      fallback_to_control=False)
    if cond is not None and cond == metrics.get("baseline") and metrics.get("baseline_rule"):
        rule = metrics["baseline_rule"]
    return cond, rule


def word(comp: dict[str, Any], alpha: float = ALPHA) -> str:
    """better / worse / no detectable difference for a comparison of b (the backend) against a."""
    lo, hi = (comp.get("ci_delta") or [None, None])[:2]
    p = comp.get("p")
    if p is None or lo is None or hi is None or comp.get("winner") not in ("a", "b"):
        return SAME
    if p < alpha and (lo > 0 or hi < 0):
        return BETTER if comp["winner"] == "b" else WORSE
    return SAME


def min_p(units: int | None, clustered: bool) -> float | None:
    """The smallest p a sign-flip permutation test over `units` whole clusters can give: the two all-same-sign
    flips of 2^units are always as extreme as the observed one (None when probes are flipped one by one)."""
    if not clustered or not units:
        return None
    return min(1.0, 2.0 / 2 ** units)


def _more_units(suite: Suite, run: dict[str, Any], units: int | None, clustered: bool) -> dict[str, Any] | None:
    """The option that gives the suite every unit its data holds and the p floor with them; option None when the
    run had them all already; None when the suite cannot say (question-level units, or an older run.json)."""
    more = suite.more_units(run.get("data") or {}) if clustered and units else None
    if more is None:
        return None
    return {"option": more[0] if more[1] > units else None, "units": more[1], "min_p": min_p(more[1], True)}


def _comparison(pv: ProbeValues, metric: str, a: str, b: str, seed: int) -> dict[str, Any]:
    hib, unit = pv.spec(metric)
    c = stats.compare(metric, a, b, pv.values[a].get(metric) or {}, pv.values[b].get(metric) or {}, hib, unit,
                      seed=seed, clusters=pv.clusters, cluster_unit=pv.cluster_unit)
    return c.to_json()


def _reported(metrics: dict[str, Any], a: str, b: str, metric: str) -> dict[str, Any] | None:
    """The suite's own scorecard entry for b against a on metric, when its metrics.json has one."""
    entry = (metrics.get("comparisons") or {}).get(b) or {}
    if entry.get("baseline") != a:
        return None
    return next((dict(x) for x in entry.get("comparisons") or [] if x.get("metric") == metric and x.get("a") == a), None)


def _slim(comp: dict[str, Any], source: str) -> dict[str, Any]:
    w = word(comp)
    return {"against": comp["a"], "delta": comp["delta"], "ci": list(comp["ci_delta"]), "p": comp["p"], "word": w,
            "n": comp["n"], "units": comp.get("units"), "method": comp.get("method"), "mean_backend": comp["mean_b"],
            "mean_other": comp["mean_a"], "winner": comp["winner"], "threshold": comp["threshold"], "source": source,
            "mdd": comp.get("mdd"), "mdd_why": ((comp.get("extra") or {}).get("power") or {}).get("why", "")}


Loaded = tuple[dict[str, Any], dict[str, Any], Suite, list[dict[str, Any]]]


def unsettled(run: dict[str, Any], backend: str) -> dict[str, Any] | None:
    """{"namespaces": k, "of": n, "items_pending": p} when `backend`'s Settle ended with items still pending in k of
    the n namespaces run.json records for it (its questions there were asked of memory not yet indexed), else None."""
    recs = [r for r in (((run.get("ingest") or {}).get(backend) or {}).get("namespaces") or {}).values()
            if isinstance(r, dict) and "settled" in r and "error" not in r]
    late = [r for r in recs if r["settled"] is False]
    if not late:
        return None
    return {"namespaces": len(late), "of": len(recs), "items_pending": sum(int(r.get("items_pending") or 0) for r in late)}


def suite_verdict(suite_dir: str | Path, loaded: Loaded | None = None, metric: str | None = None) -> dict[str, Any]:
    """The verdict of one suite run directory (see the module docstring): headline, baseline, and per backend its
    value, its comparisons against the baseline and BM25, context tokens per turn and retrieve p50/p95. `loaded`:
    (run.json, metrics.json, the suite, its ok samples) when the caller has them (the run's finalize: the suite's
    per-probe values are then the ones its scoring computed, not computed again). `metric`: another headline in
    its place (`memrig credit-agreement --before-after`: the same run under the backends' claimed credit)."""
    suite_dir = Path(suite_dir)
    run, metrics, suite, samples = loaded or load_suite_run(suite_dir)
    pv = suite.probe_values(samples)
    answers_mocked, judge_mocked = mocked(run)
    metric = metric or suite.headline(answers_mocked, judge_mocked)
    if metric is None:
        raise VerdictError(f"suite {suite.name}", "no headline metric")
    try:
        baseline_rule.direction(metric)
    except KeyError as e:
        raise VerdictError(f"suite {suite.name}", f"headline {e.args[0]}") from None
    hib, unit = pv.spec(metric)
    mocked_metrics = sorted(suite.mocked_metrics(answers_mocked, judge_mocked))
    kind = "answer" if metric in suite.answer_metrics else "retrieval"
    baseline, rule = resolve_baseline(metrics, pv, metric, hib)
    cond_of: dict[str, str] = {}
    for c, b in sorted(pv.backend_of.items()):
        if c in pv.values:
            cond_of.setdefault(b, c)
    bm25 = cond_of.get(BM25)
    seed = int(run.get("seed") or 0)
    rows: dict[str, Any] = {}
    for backend, cond in cond_of.items():
        vals = pv.values[cond]
        summ = stats.interval(vals.get(metric) or {}, pv.clusters, stable_seed(seed, suite.name, cond, "verdict"),
                              unit, pv.cluster_unit)
        lat = [float(x) for x in (vals.get(pv.latency) or {}).values() if x is not None]
        ls = latency_summary(lat)
        row: dict[str, Any] = {
            "condition": cond, "value": {"mean": summ["mean"], "ci": summ["ci"], "n": summ["n"], "method": summ["method"]},
            "tokens_per_turn": _mean(vals.get(pv.tokens) or {}),
            "retrieve_ms": {"p50": ls["p50_ms"], "p95": ls["p95_ms"], "n": ls["n"]},
            "vs_native": None, "vs_bm25": None, "unsettled": unsettled(run, backend)}
        if baseline and cond != baseline:
            rep = _reported(metrics, baseline, cond, metric)
            comp = rep or _comparison(pv, metric, baseline, cond, stable_seed(seed, suite.name, cond, "vs-native"))
            row["vs_native"] = _slim(comp, "suite scorecard" if rep else "computed by the verdict")
        if bm25 and cond != bm25:
            comp = _comparison(pv, metric, bm25, cond, stable_seed(seed, suite.name, cond, "vs-bm25"))
            row["vs_bm25"] = _slim(comp, "computed by the verdict")
        rows[backend] = row
    units = next((r["vs_native"]["units"] for r in rows.values() if r["vs_native"]), None)
    return {
        "suite": suite.name, "dir": suite_dir.name,
        "headline": {"metric": metric, "label": LABELS.get(metric, metric), "kind": kind, "higher_is_better": hib,
                     "unit": unit, "mocked": metric in mocked_metrics,
                     "why": WHY_ANSWER if kind == "answer" else WHY_RETRIEVAL if suite.answer_metrics else
                     "the suite measures retrieval only (no answering model involved)"},
        "baseline": {"condition": baseline, "backend": pv.backend_of.get(baseline) if baseline else None,
                     "rule": rule},
        "bm25": {"condition": bm25, "backend": BM25 if bm25 else None},
        "answers_by": "llm-mock" if answers_mocked else (run.get("llm") or {}).get("model"),
        "judge_by": "llm-mock" if judge_mocked else (run.get("judge") or {}).get("model"),
        "mocked_metrics": mocked_metrics,
        "statistics": {"unit": pv.cluster_unit if pv.clusters else "question", "units": units,
                       "min_p": min_p(units, pv.clusters is not None),
                       "more": _more_units(suite, run, units, pv.clusters is not None)},
        "backends": rows,
    }


# ------------------------------------------------------------------------------------------------------
# A bench-all run


def backend_order(names: list[str]) -> list[str]:
    """Memory systems first, then the IR baselines, OpenClaw native (itself, then the port), then the controls;
    the run's own order within each group."""
    groups = {"control": 4, "native": 3, "native-port": 3, "native-release": 3, "ir-baseline": 2}

    def group(b: str) -> int:
        return groups.get(role_of(b), 1)

    return sorted(names, key=lambda b: (group(b), names.index(b)))


def build_verdict(out: str | Path, index: dict[str, Any]) -> dict[str, Any]:
    """verdict.json's content for a bench-all (or bench-local) run directory and its index (report.json)."""
    out = Path(out)
    suites: dict[str, Any] = {}
    left_out: dict[str, str] = {}
    for name, s in (index.get("suites") or {}).items():
        if not s.get("dir"):
            left_out[name] = f"{s.get('state', 'not run')}: {s.get('reason', '')}".strip().rstrip(":")
            continue
        try:
            suites[name] = _saved_or_new(out / s["dir"])
        except (VerdictError, NotImplementedError) as e:
            left_out[name] = str(e)
    return assemble(index.get("run_id", out.name), suites, left_out, index.get("skipped_backends") or {},
                    list(index.get("backends") or []))


def _saved_or_new(suite_dir: Path) -> dict[str, Any]:
    """The suite's verdict as its run's finalize saved it (verdict.json, written after metrics.json), unless any file
    it was made from is newer; else computed now."""
    saved = suite_dir / "verdict.json"
    sources = [suite_dir / f for f in ("run.json", "metrics.json", "samples.jsonl")]
    if saved.exists() and all(p.exists() and p.stat().st_mtime_ns <= saved.stat().st_mtime_ns for p in sources):
        with contextlib.suppress(json.JSONDecodeError, AttributeError):
            only = list((json.loads(saved.read_text()).get("suites") or {}).values())
            if len(only) == 1:
                return only[0]
    return suite_verdict(suite_dir)


def assemble(run_id: str, suites: dict[str, Any], left_out: dict[str, str] | None = None,
             skipped_backends: dict[str, str] | None = None, backends: list[str] | None = None) -> dict[str, Any]:
    """The verdict of a set of suite verdicts: backends in page order and per backend the suites it was better,
    worse or no different on, against native and against BM25."""
    seen: list[str] = []
    for b in list(backends or []) + [b for v in suites.values() for b in v["backends"]]:
        if b not in seen and any(b in v["backends"] for v in suites.values()):
            seen.append(b)
    order = backend_order(seen)
    summary = {b: {k: {w: [n for n, v in suites.items() if ((v["backends"].get(b) or {}).get(k) or {}).get("word") == w]
                       for w in (BETTER, WORSE, SAME)} for k in ("vs_native", "vs_bm25")} for b in order}
    mock_answers = any(v["answers_by"] == "llm-mock" for v in suites.values())
    return {"run_id": run_id, "alpha": ALPHA,
            "rule": ("better / worse: p < 0.05 (paired permutation test), the 95% interval of the difference "
                     "excludes 0 and the difference passes the tie threshold, in the metric's direction; else no "
                     "detectable difference"),
            "answers_by_mock": mock_answers, "backends": order, "suites": suites, "left_out": left_out or {},
            "skipped_backends": skipped_backends or {}, "summary": summary}


def one_suite_verdict(suite_dir: str | Path, loaded: Loaded | None = None) -> tuple[dict[str, Any], str]:
    """The verdict of a single suite's run directory (`memrig bench`), and its Markdown under "## Verdict"."""
    suite_dir = Path(suite_dir)
    v = suite_verdict(suite_dir, loaded)
    verdict = assemble(suite_dir.name, {v["suite"]: v})
    return verdict, render_markdown(verdict, title=VERDICT_HEADING)


# ------------------------------------------------------------------------------------------------------
# Markdown


def _num(x: float | None, unit: str, signed: bool = False) -> str:
    if x is None:
        return "—"
    if unit == "rate":
        s = f"{x * 100:+.1f}" if signed else f"{x * 100:.1f}"
    elif unit in ("tokens", "ms"):
        s = f"{x:+.0f}" if signed else f"{x:.0f}"
    else:
        s = f"{x:+.2f}" if signed else f"{x:.2f}"
    return s.replace("-", "−")


def _p(p: float | None) -> str:
    if p is None:
        return "p —"
    return "p<0.001" if p < 0.001 else f"p={p:.3f}" if p < 0.1 else f"p={p:.2f}"


def _diff(c: dict[str, Any], unit: str) -> str:
    return f"{_num(c['delta'], unit, True)} [{_num(c['ci'][0], unit, True)}, {_num(c['ci'][1], unit, True)}] {_p(c['p'])}"


def _mdd(x: float, unit: str) -> str:
    """A minimum detectable difference in the headline's unit, unsigned: '8.5 points', '12 tokens', '0.25'."""
    return {"rate": f"{x * 100:.1f} points", "tokens": f"{x:.0f} tokens", "ms": f"{x:.0f} ms"}.get(unit, f"{x:.2f}")


def word_text(c: dict[str, Any], unit: str) -> str:
    """The word a cell shows: better / worse, or for no detectable difference the power statement: "could not detect
    a difference below 8.5 points" (8.5: the smallest difference this sample detects with 80% power; a smaller one
    may exist: not detected is not shown equal), or why none can be stated."""
    if c["word"] != SAME:
        return c["word"]
    if c.get("mdd") is not None:
        return f"could not detect a difference below {_mdd(c['mdd'], unit)}"
    return SAME


def _power_tail(c: dict[str, Any], unit: str) -> str:
    """After a better/worse cell: the sample's minimum detectable difference."""
    if c["word"] == SAME or c.get("mdd") is None:
        return ""
    return f" · MDD {_mdd(c['mdd'], unit)}"


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:.0f}" if x >= 10 else f"{x:.1f}"


def _weak_note(name: str, st: dict[str, Any]) -> str:
    out = f"{name} ({st['units']} {st['unit']}s: p ≥ {st['min_p']:.3f}"
    more = st.get("more")
    if more is None:
        return out + f"; run more {st['unit']}s)"
    if more["option"] is None:
        return out + f"; its data holds no more {st['unit']}s)"
    return out + f"; the suite option `{more['option']}` runs all {more['units']} in its data: p ≥ {more['min_p']:.3f})"


def render_cell(v: dict[str, Any], backend: str) -> str:
    """One backend on one suite: vs native, vs BM25, cost; the first word links to the suite's section."""
    row = v["backends"].get(backend)
    if row is None:
        return "—"
    unit, link = v["headline"]["unit"], f"#{v['suite']}"
    nat, bm = row["vs_native"], row["vs_bm25"]
    if v["baseline"]["condition"] == row["condition"]:
        pct = "%" if unit == "rate" else ""
        first = f"[baseline]({link}) {_num(row['value']['mean'], unit)}{pct}"
    elif nat:
        first = f"[{word_text(nat, unit)}]({link}) {_diff(nat, unit)}{_power_tail(nat, unit)}"
    else:
        first = f"[no native baseline]({link})"
    second = ("BM25 itself" if backend == BM25 else
              f"vs BM25: [{word_text(bm, unit)}]({link}) {_diff(bm, unit)}{_power_tail(bm, unit)}" if bm
              else "no BM25 in run")
    ms = row["retrieve_ms"]
    tok = row["tokens_per_turn"]
    third = f"{'—' if tok is None else f'{tok:.0f}'} tok · {_ms(ms['p50'])}/{_ms(ms['p95'])} ms"
    return "<br>".join((first, second, third))


def _count(suites: list[str], what: str) -> str:
    return f"{len(suites)} {what}" + (f" ({', '.join(suites)})" if suites else "")


def _short(backend: str | None) -> str:
    return "—" if not backend else backend.replace("openclaw-real", "OpenClaw native", 1)


def render_markdown(verdict: dict[str, Any], title: str | None = None) -> str:
    suites = verdict["suites"]
    names = list(suites)
    lines = [title or f"# Verdict ({verdict['run_id']})", "",
             "Does each memory backend beat OpenClaw native and BM25, on which suites, at what cost? Per suite: its "
             "headline metric as the backend minus OpenClaw native (the suite's baseline, named in the column) and "
             "minus BM25, Δ [95% CI] with the paired permutation p (rates in percentage points); **better** / "
             "**worse** = p < 0.05 and the CI excludes 0, else *could not detect a difference below X*, X being the minimum "
             "detectable difference (MDD): the smallest difference the same test on a sample like this one detects "
             "with 80% power (`memrig power` says how many units a smaller one needs); then context tokens per "
             "turn · retrieve p50/p95 ms. Each cell links to its suite's section; every figure is in verdict.json.",
             ""]
    if any((v.get("headline") or {}).get("metric") in GRADED_HEADLINES for v in suites.values()):
        lines += [f"> **What was shown:** {headline_note()} Per-probe values: probes.jsonl in each suite's "
                  "directory.", ""]
    if verdict.get("answers_by_mock"):
        marked = sorted({m for v in suites.values() for m in v["mocked_metrics"]})
        lines += [f"> **Answers and judgements by the offline llm-mock:** {', '.join(marked) or 'QA and judge figures'} "
                  "in the sections below measure the mock, not the memory, and are marked (llm-mock) there; the "
                  "verdict uses each suite's retrieval metric.", ""]
    by_model = {n: (v["answers_by"], v.get("judge_by")) for n, v in suites.items() if v["headline"].get("kind") == "answer"
                and v["answers_by"] not in (None, "llm-mock")}
    for answers, judge in sorted(set(by_model.values()), key=str):
        names_by = ", ".join(n for n, pair in by_model.items() if pair == (answers, judge))
        judged = f"judged by `{judge}`" if judge and judge != "llm-mock" else "judged by the offline llm-mock"
        lines += [f"> **Answers by `{answers}`, {judged}:** the headline of {names_by} is the model's answer quality.",
                  ""]
    header = ["backend", "summary"]
    for n in names:
        v = suites[n]
        h = v["headline"]
        arrow = "" if h["higher_is_better"] else " (lower is better)"
        mock = " (llm-mock)" if h["mocked"] else ""
        header.append(f"[{n}](#{n}): {h['label']}{arrow}{mock} vs {_short(v['baseline']['backend'])}")
    rows = []
    for b in verdict["backends"]:
        s = verdict["summary"][b]
        summ = "<br>".join(f"vs {who}: {_count(s[k][BETTER], BETTER)}, {_count(s[k][WORSE], WORSE)}"
                           for k, who in (("vs_native", "native"), ("vs_bm25", "BM25")))
        rows.append([f"**{b}**", summ, *(render_cell(suites[n], b) for n in names)])
    lines += ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    notes = []
    weak = [_weak_note(n, v["statistics"]) for n, v in suites.items() if (v["statistics"].get("min_p") or 0) >= ALPHA]
    if weak:
        notes.append("Too few independent units for p < 0.05, so no better/worse is possible: " + "; ".join(weak) + ".")
    for n, v in suites.items():
        missing = [what for what, there in (("OpenClaw native (`openclaw-real` or the port `openclaw`)",
                                             v["baseline"]["condition"]), ("`bm25`", v["bm25"]["condition"])) if not there]
        if missing:
            notes.append(f"{n}: no {' and no '.join(missing)} in this run: its column has nothing to compare "
                         f"against there (add {'it' if len(missing) == 1 else 'them'} to the run's backends).")
    for n, v in suites.items():
        for b, row in v["backends"].items():
            u = row.get("unsettled")
            if u:
                notes.append(f"{n}: **{b} was searched before it had settled** in {u['namespaces']} of {u['of']} "
                             f"namespaces ({u['items_pending']:,} items still pending when its Settle ended): there "
                             "its figures count memory not yet indexed, not what it recalls (run.json's ingest "
                             "records: `settled`, `items_pending`).")
    for n, reason in (verdict.get("left_out") or {}).items():
        notes.append(f"Not in the verdict: {n}: {reason[:160]}.")
    for b, reason in (verdict.get("skipped_backends") or {}).items():
        notes.append(f"Backend {b} skipped: {reason[:160]}.")
    if notes:
        lines += [""] + [f"- {x}" for x in notes]
    return "\n".join(lines) + "\n"


def write_verdict(out: str | Path, index: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Build the verdict of a bench-all run, write verdict.json beside report.md, return (verdict, Markdown)."""
    v = build_verdict(out, index)
    RunDir(out).write_json("verdict.json", v)
    return v, render_markdown(v)
