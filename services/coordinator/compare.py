"""`memrig compare RUN_A RUN_B`: which metrics of which backends moved between two runs beyond their intervals,
what changed in the configuration, and an exit status a memory team can gate its CI on (`--fail-on`).

Runs are suite run directories (run.json) or bench-all directories (report.json + one directory per suite); every
suite present in both is compared, condition by condition (a condition is a backend, or for Cortex V1 / Arclight
a labelled context such as "compacted + cortex"), metric by metric, from the per-probe values the suite's own
scoring uses (`Suite.per_probe`, recomputed from samples.jsonl):

- **paired** when the two runs asked the same probes (at least 80% of either run's probes in common: same seed
  and data): B minus A on the common probes, the 95% interval of the mean difference by the suite's statistics
  (percentile bootstrap over questions, or cluster-robust t over LoCoMo's conversations) and the two-sided paired
  permutation p (whole clusters flipped together);
- **unpaired** otherwise (another seed or data sample): each run's own 95% interval, the difference's half-width
  taken as the two half-widths in quadrature, no p.

A metric *changed* when that interval of the difference excludes 0, the difference is past the seed's tie
threshold (0.005 for rates and scores, 1 for tokens and ms) and, when paired, the permutation p is below 0.05 (the
verdict's rule: a bootstrap interval over few differing probes can exclude 0 where the exact test cannot; with 4
LoCoMo conversations p cannot go below 0.125, and the report says so); it *regressed* when it changed in the
metric's bad direction. Retrieve latency depends on the machine's load as much as on the backend, so it is reported apart
(timing) and gates only when named in `--fail-on`. Metrics the offline llm-mock produced are marked.

`--fail-on SPEC[,SPEC]`: `headline` (each suite's verdict metric), `any` (every non-timing metric), a metric name
(`turn_recall@5`) or `suite:metric` (`locomo:turn_recall@5`); `--backends` limits the backends considered. A spec
that matches no metric of the compared suites is an error (exit 2), so a typo cannot pass a gate silently.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from services.coordinator import stats
from services.coordinator.suites.base import ProbeValues
from services.coordinator.suites.common import stable_seed
from services.coordinator.verdict import ALPHA, VerdictError, load_suite_run, min_p, mocked

PAIRED_SHARE = 0.8
VOLATILE_KEYS = {"run_id", "started_at", "started_monotonic", "first_started_at", "resumed", "duration_s", "ingest",
                 "failures", "config", "backends_requested", "suite_description", "llm_cache", "namespaces"}
_LOOPBACK = re.compile(r"(https?://(?:127\.0\.0\.1|localhost|\[::1\])):\d+")


class CompareError(ValueError):
    """Bad input to compare; the message names the path, flag or field."""


# ------------------------------------------------------------------------------------------------------
# Finding the suites of a run


def discover(path: str | Path) -> dict[str, Path]:
    """{suite: its run directory} of a suite run or a bench-all run."""
    p = Path(path)
    if not p.is_dir():
        raise CompareError(f"{p}: not a directory")
    if (p / "run.json").exists():
        try:
            suite = json.loads((p / "run.json").read_text()).get("suite")
        except json.JSONDecodeError as e:
            raise CompareError(f"{p / 'run.json'}: not valid JSON ({e})") from None
        if not suite:
            raise CompareError(f"{p / 'run.json'}: suite: missing")
        return {suite: p}
    found: dict[str, Path] = {}
    if (p / "report.json").exists():
        try:
            index = json.loads((p / "report.json").read_text())
        except json.JSONDecodeError as e:
            raise CompareError(f"{p / 'report.json'}: not valid JSON ({e})") from None
        for name, s in (index.get("suites") or {}).items():
            if s.get("dir") and (p / s["dir"] / "run.json").exists():
                found[name] = p / s["dir"]
    else:
        for d in sorted(x for x in p.iterdir() if (x / "run.json").exists()):
            found[d.name] = d
    if not found:
        raise CompareError(f"{p}: neither a suite run (run.json) nor a bench-all run (report.json with finished suites)")
    return found


# ------------------------------------------------------------------------------------------------------
# One metric


def compare_metric(metric: str, va: dict[str, float | None], vb: dict[str, float | None], hib: bool, unit: str,
                   clusters: dict[str, str] | None, cluster_unit: str, seed: int) -> dict[str, Any] | None:
    """B against A on one metric (see the module docstring); None when either run has no value."""
    ia = {k for k, v in va.items() if v is not None}
    ib = {k for k, v in vb.items() if v is not None}
    if not ia or not ib:
        return None
    common = ia & ib
    thr = stats.tie_threshold(unit)
    if len(common) >= 2 and len(common) >= PAIRED_SHARE * max(len(ia), len(ib)):
        c = stats.compare(metric, "A", "B", va, vb, hib, unit, seed=seed, clusters=clusters, cluster_unit=cluster_unit)
        out = {"paired": True, "n": c.n, "units": c.units, "mean_a": c.mean_a, "mean_b": c.mean_b, "delta": c.delta,
               "ci": list(c.ci_delta), "p": c.p, "method": f"paired, {c.method}"}
    else:
        sa = stats.interval(va, clusters, seed, unit, cluster_unit)
        sb = stats.interval(vb, clusters, seed + 1, unit, cluster_unit)
        delta = sb["mean"] - sa["mean"]
        half = math.hypot(*((s["ci"][1] - s["ci"][0]) / 2 if None not in s["ci"] else math.inf for s in (sa, sb)))
        out = {"paired": False, "n": min(sa["n"], sb["n"]), "units": min(sa["units"], sb["units"]),
               "mean_a": sa["mean"], "mean_b": sb["mean"], "delta": delta, "ci": [delta - half, delta + half],
               "p": None, "method": "unpaired: each run's 95% interval, half-widths in quadrature"}
    lo, hi = out["ci"]
    d = out["delta"]
    changed = (d is not None and lo is not None and hi is not None and (lo > 0 or hi < 0) and abs(d) > thr
               and (out["p"] is None or out["p"] < ALPHA))
    out.update(higher_is_better=hib, unit=unit, threshold=thr, changed=changed,
               direction=None if not changed else "better" if (d > 0) == hib else "worse")
    return out


# ------------------------------------------------------------------------------------------------------
# Configuration


def _norm(v: Any) -> Any:
    if isinstance(v, str):
        return _LOOPBACK.sub(r"\1:<port>", v)
    return v


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts as dotted keys; lists and scalars are leaves (loopback ports normalised: they change every run)."""
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(obj, list):
        return {prefix: json.dumps([_norm(x) for x in obj], sort_keys=True, default=str)}
    return {prefix: _norm(obj)}


def config_view(run: dict[str, Any]) -> dict[str, Any]:
    """What produced a suite run's numbers: git commit, packages, machine, seed, options, models, embedder,
    tokenizer, prompts, data, and each backend's status, version, embedder and every Describe config value."""
    view = {k: v for k, v in run.items() if k not in VOLATILE_KEYS and k not in ("backends", "llm", "judge", "suite")}
    for role in ("llm", "judge"):
        if run.get(role):
            view[role] = {k: v for k, v in run[role].items() if k not in ("base_url", "label")}
    for b, info in (run.get("backends") or {}).items():
        d = (info or {}).get("describe") or {}
        view[f"backend {b}"] = {"status": (info or {}).get("status"), "version": d.get("version"),
                                "implementation": d.get("name"), "embedder": d.get("embedder"),
                                "embedding_dim": d.get("embedding_dim"), "config": d.get("config") or {}}
    return flatten(view)


def config_diff(run_a: dict[str, Any], run_b: dict[str, Any]) -> list[dict[str, Any]]:
    a, b = config_view(run_a), config_view(run_b)
    return [{"key": k, "a": a.get(k), "b": b.get(k)} for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


# ------------------------------------------------------------------------------------------------------
# Two runs


def parse_fail_on(specs: list[str] | None) -> list[tuple[str | None, str]]:
    """`headline`, `any`, `metric` or `suite:metric`, comma-separated or repeated -> [(suite or None, metric)]."""
    out = []
    for raw in specs or []:
        for s in (x.strip() for x in raw.split(",")):
            if not s:
                continue
            suite, sep, metric = s.partition(":")
            if sep and (not suite or not metric):
                raise CompareError(f"--fail-on: expected headline, any, METRIC or SUITE:METRIC, got {s!r}")
            out.append((suite, metric) if sep else (None, s))
    return out


def _gates(spec: tuple[str | None, str], suite: str, metric: str, headline: str | None, timing: bool) -> bool:
    want_suite, want = spec
    if want_suite is not None and want_suite != suite:
        return False
    if want == "headline":
        return metric == headline
    if want == "any":
        return not timing
    return metric == want


def compare_runs(a: str | Path, b: str | Path, fail_on: list[str] | None = None,
                 backends: list[str] | None = None) -> dict[str, Any]:
    """Everything `memrig compare` reports, as a dict (see the module docstring); `exit_status` 1 when a gated
    metric regressed."""
    sa, sb = discover(a), discover(b)
    gates = parse_fail_on(fail_on)
    suites: dict[str, Any] = {}
    config: dict[tuple[str, str, str], list[str]] = {}
    all_backends: set[str] = set()
    for name in sorted(set(sa) & set(sb)):
        try:
            run_a, _, suite_a, samples_a = load_suite_run(sa[name], need_metrics=False)
            run_b, _, suite_b, samples_b = load_suite_run(sb[name], need_metrics=False)
        except VerdictError as e:
            raise CompareError(str(e)) from None
        pa, pb = suite_a.per_probe(samples_a), suite_b.per_probe(samples_b)
        ans_a, jud_a = mocked(run_a)
        ans_b, jud_b = mocked(run_b)
        mock = suite_a.mocked_metrics(ans_a, jud_a) | suite_b.mocked_metrics(ans_b, jud_b)
        headline = suite_a.headline(ans_a, jud_a)
        rows, only = [], {"a": sorted(set(pa.values) - set(pb.values)), "b": sorted(set(pb.values) - set(pa.values))}
        for cond in sorted(set(pa.values) & set(pb.values)):
            backend = pa.backend_of.get(cond) or pb.backend_of.get(cond) or cond
            all_backends.add(backend)
            if backends and backend not in backends:
                continue
            rows += _compare_condition(name, cond, backend, pa, pb, mock)
        for x in config_diff(run_a, run_b):
            config.setdefault((x["key"], json.dumps(x["a"], default=str), json.dumps(x["b"], default=str)),
                              []).append(name)
        suites[name] = {"dir_a": str(sa[name]), "dir_b": str(sb[name]), "headline": headline, "rows": rows,
                        "clustered": bool(pa.clusters or pb.clusters),
                        "conditions_only_in": only, "git_a": run_a.get("git_sha"), "git_b": run_b.get("git_sha")}
    for want in backends or []:
        if want not in all_backends:
            raise CompareError(f"--backends: {want!r} is in neither run's compared suites "
                               f"(backends: {', '.join(sorted(all_backends)) or 'none'})")
    regressions = []
    for spec in gates:
        matched = False
        for name, s in suites.items():
            for r in s["rows"]:
                if _gates(spec, name, r["metric"], s["headline"], r["timing"]):
                    matched = True
                    if r["direction"] == "worse":
                        regressions.append({**r, "suite": name, "gate": ":".join(x for x in spec if x)})
        if not matched:
            known = sorted({r["metric"] for s in suites.values() for r in s["rows"]})
            raise CompareError(f"--fail-on: {':'.join(x for x in spec if x)!r} matches no metric of the compared "
                               f"suites ({', '.join(suites) or 'none'}); metrics: {', '.join(known[:40])}")
    uniq = {(r["suite"], r["condition"], r["metric"]): r for r in regressions}
    changed = [dict(r, suite=n) for n, s in suites.items() for r in s["rows"] if r["changed"]]
    return {
        "a": str(a), "b": str(b),
        "suites": suites, "suites_only_in": {"a": sorted(set(sa) - set(sb)), "b": sorted(set(sb) - set(sa))},
        "config_changes": [{"key": k, "a": json.loads(va), "b": json.loads(vb), "suites": ss}
                           for (k, va, vb), ss in sorted(config.items())],
        "changed": [r for r in changed if not r["timing"]], "timing_changed": [r for r in changed if r["timing"]],
        "compared": sum(len(s["rows"]) for s in suites.values()),
        "fail_on": [":".join(x for x in spec if x) for spec in gates], "regressions": list(uniq.values()),
        "exit_status": 1 if uniq else 0,
    }


def _compare_condition(suite: str, cond: str, backend: str, pa: ProbeValues, pb: ProbeValues,
                       mock: set[str]) -> list[dict[str, Any]]:
    rows = []
    clusters = {**(pa.clusters or {}), **(pb.clusters or {})} if (pa.clusters or pb.clusters) else None
    for metric in sorted(set(pa.values[cond]) & set(pb.values[cond])):
        hib, unit = pa.spec(metric)
        res = compare_metric(metric, pa.values[cond][metric], pb.values[cond][metric], hib, unit, clusters,
                             pa.cluster_unit, stable_seed("compare", suite, cond, metric))
        if res is None:
            continue
        rows.append({"condition": cond, "backend": backend, "metric": metric, "timing": metric == pa.latency,
                     "mock": metric in mock, **res})
    return rows


# ------------------------------------------------------------------------------------------------------
# Markdown


def _fmt(x: float | None, unit: str, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    if unit == "rate":
        s = f"{x * 100:+.1f}" if signed else f"{x * 100:.1f}%"
    elif unit in ("tokens", "ms"):
        s = f"{x:+.1f}" if signed else f"{x:.1f}"
    else:
        s = f"{x:+.3f}" if signed else f"{x:.3f}"
    return s.replace("-", "−")


def _row(r: dict[str, Any]) -> list[str]:
    u = r["unit"]
    pts = " pts" if u == "rate" else ""
    name = r["metric"]
    return [r["suite"], r["backend"] if r["backend"] == r["condition"] else f"{r['backend']} ({r['condition']})",
            name + (" (llm-mock)" if r["mock"] else "") + ("" if r["higher_is_better"] else " ↓"),
            _fmt(r["mean_a"], u), _fmt(r["mean_b"], u),
            f"{_fmt(r['delta'], u, True)}{pts} [{_fmt(r['ci'][0], u, True)}, {_fmt(r['ci'][1], u, True)}]",
            "—" if r["p"] is None else f"{r['p']:.4f}", "paired" if r["paired"] else "unpaired",
            f"**{r['direction']}**"]


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|",
            *("| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows)]


def render_markdown(res: dict[str, Any]) -> str:
    head = ["suite", "backend", "metric", "A", "B", "Δ B − A [95% CI]", "p", "pairing", "moved"]
    lines = [f"# memrig compare: {res['a']} → {res['b']}", ""]
    n_changed = len(res["changed"])
    lines.append(f"**{'No change' if not n_changed else f'{n_changed} change(s)'}** beyond their intervals in "
                 f"{res['compared'] - len([r for s in res['suites'].values() for r in s['rows'] if r['timing']])} "
                 f"quality and token comparisons over {len(res['suites'])} suite(s) "
                 f"({', '.join(res['suites']) or 'none'}); timing: {len(res['timing_changed'])} moved.")
    if res["fail_on"]:
        if res["regressions"]:
            lines += ["", f"**Regression** on --fail-on {', '.join(res['fail_on'])}: exit status 1.", ""]
            lines += _table(head, [_row(r) for r in res["regressions"]])
        else:
            lines += ["", f"No regression on --fail-on {', '.join(res['fail_on'])}: exit status 0."]
    lines += ["", "## What changed in the configuration", ""]
    if res["config_changes"]:
        n = len(res["suites"])
        lines += _table(["setting", "A", "B", "suites"], [
            [c["key"], _short(c["a"]), _short(c["b"]), "all" if len(c["suites"]) == n else ", ".join(c["suites"])]
            for c in res["config_changes"]])
    else:
        lines.append("Nothing: same commit, packages, seed, options, models, embedder and backend configurations.")
    lines += ["", "## Metrics that moved beyond their intervals", ""]
    lines += _table(head, [_row(r) for r in res["changed"]]) if res["changed"] else ["None."]
    lines += ["", "## Timing (retrieve latency: the machine's load as much as the backend; gates only when named)", ""]
    lines += _table(head, [_row(r) for r in res["timing_changed"]]) if res["timing_changed"] else ["None moved."]
    notes = []
    for side, names in res["suites_only_in"].items():
        if names:
            notes.append(f"Suites only in run {side.upper()}: {', '.join(names)}.")
    for name, s in res["suites"].items():
        for side, conds in s["conditions_only_in"].items():
            if conds:
                notes.append(f"{name}: conditions only in run {side.upper()}: {', '.join(conds)}.")
        floor = min_p(min((r["units"] for r in s["rows"] if r["paired"]), default=None), s.get("clustered", False))
        if floor is not None and floor >= ALPHA:
            notes.append(f"{name}: with {round(math.log2(2 / floor))} independent units the paired test cannot go "
                         f"below p = {floor:.3f}, so no change can be detected there; run more (e.g. LoCoMo "
                         "`--option conversations=N`, up to the conversations in its file).")
        unpaired = sorted({r["condition"] for r in s["rows"] if not r["paired"]})
        if unpaired:
            notes.append(f"{name}: the runs asked different probes (another seed or data sample) for "
                         f"{', '.join(unpaired)}: compared unpaired.")
    lines += ["", "## How", "",
              "B minus A per suite, condition and metric from the per-probe values each suite scores "
              "(samples.jsonl): paired over the probes both runs asked (95% interval of the mean difference by the "
              "suite's statistics, two-sided paired permutation p), unpaired when the probes differ (each run's "
              "interval, half-widths in quadrature). *Moved* = the interval excludes 0, |Δ| passes the tie "
              "threshold (0.005 for rates and scores, 1 for tokens and ms) and, paired, p < 0.05. With many comparisons a few can move by "
              "chance when the runs differ; identical probes and answers give Δ = 0 exactly. (llm-mock) = a figure "
              "the offline mock produced.", *([""] + [f"- {x}" for x in notes] if notes else [])]
    return "\n".join(lines) + "\n"


def _short(v: Any, n: int = 80) -> str:
    s = "—" if v is None else v if isinstance(v, str) else json.dumps(v, default=str)
    return s if len(s) <= n else s[: n - 1] + "…"
