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

Exit status: 0 nothing gated regressed and the runs cover the same ground; 1 a gated metric regressed; 2 bad input
(a flag, a missing directory, a run.json / report.json / samples.jsonl that is missing, unreadable, not a JSON
object or names an unknown suite, or two runs with no suite in common); 3 the comparison is incomplete, with or
without `--fail-on` (a gate cannot pass what it did not see): a suite finished in run A but not in run B (or only
in B while A's failed), a condition (backend) with ok samples in one run and none in the other (missing, or every
sample errored), probes that errored in either run of a condition both ran, or samples.jsonl lines torn by a crash
whose sample no later line rewrote. A backend or suite only run B has (newly added) is listed, not a failure.
`--backends` limits these checks to the backends named.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from services.common.errors import InputError
from services.coordinator import stats
from services.coordinator.results import RunDir
from services.coordinator.suites.base import ProbeValues, condition_backends
from services.coordinator.suites.common import stable_seed
from services.coordinator.verdict import ALPHA, VerdictError, load_suite_run, min_p, mocked

PAIRED_SHARE = 0.8
VOLATILE_KEYS = {"run_id", "started_at", "started_monotonic", "first_started_at", "resumed", "duration_s", "sittings_s",
                 "duration_all_s", "ingest",
                 "failures", "config", "backends_requested", "suite_description", "llm_cache", "namespaces",
                 "reuse"}  # where a result came from (services/coordinator/reuse.py), not what produced it
_LOOPBACK = re.compile(r"(https?://(?:127\.0\.0\.1|localhost|\[::1\])):\d+")


class CompareError(InputError):
    """Bad input to compare; `field` is the path, flag or field at fault, str(e) "field: message"."""


# ------------------------------------------------------------------------------------------------------
# Finding the suites of a run


def read_object(path: Path) -> dict[str, Any]:
    """A run file that must hold a JSON object; CompareError naming the file when it is unreadable, not JSON or
    not an object."""
    try:
        obj = json.loads(path.read_text())
    except OSError as e:
        raise CompareError(str(path), f"cannot be read ({e.strerror or e})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CompareError(str(path), f"not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise CompareError(str(path), f"expected a JSON object, got {type(obj).__name__}")
    return obj


def _suite_of(run_json: Path) -> str:
    """The suite a run.json names, checked against the registry (an unknown one is an error, not a suite that
    matches nothing)."""
    from services.coordinator.suites.registry import all_suites

    suite = read_object(run_json).get("suite")
    if not suite or not isinstance(suite, str):
        raise CompareError(str(run_json), "suite: missing")
    if suite not in all_suites():
        raise CompareError(str(run_json), f"suite: unknown suite {suite!r}; known: {', '.join(sorted(all_suites()))}")
    return suite


def discover(path: str | Path) -> dict[str, Path]:
    """{suite: its run directory} of a suite run or a bench-all run."""
    return _discover(path)[0]


def _discover(path: str | Path) -> tuple[dict[str, Path], dict[str, str]]:
    """({suite: its run directory}, {suite: why it has none}) of a suite run or a bench-all run; the second lists
    the suites a bench-all report.json names that did not finish (failed, skipped, or a directory without
    run.json)."""
    p = Path(path)
    if not p.is_dir():
        raise CompareError(str(p), "not a directory")
    if (p / "run.json").exists():
        return {_suite_of(p / "run.json"): p}, {}
    found: dict[str, Path] = {}
    unfinished: dict[str, str] = {}
    if (p / "report.json").exists():
        suites = read_object(p / "report.json").get("suites") or {}
        if not isinstance(suites, dict):
            raise CompareError(str(p / 'report.json'), f"suites: expected an object, got {type(suites).__name__}")
        for name, s in suites.items():
            s = s if isinstance(s, dict) else {}
            d = p / s["dir"] if isinstance(s.get("dir"), str) and s["dir"] else None
            if d is not None and (d / "run.json").exists():
                _suite_of(d / "run.json")
                found[name] = d
            else:
                why = s.get("reason") or s.get("error") or ""
                unfinished[name] = f"{s.get('state') or 'no run'}" + (f": {str(why)[:200]}" if why else "")
    else:
        for d in sorted(x for x in p.iterdir() if (x / "run.json").exists()):
            _suite_of(d / "run.json")
            found[d.name] = d
    if not found:
        raise CompareError(str(p), "neither a suite run (run.json) nor a bench-all run (report.json with finished suites)")
    return found, unfinished


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
                raise CompareError("--fail-on", f"expected headline, any, METRIC or SUITE:METRIC, got {s!r}")
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


def _load(name: str, d: Path, side: str) -> dict[str, Any]:
    """One side of one suite: run.json, the suite, every sample (ok or not) and the torn lines; CompareError
    naming the file when one is missing, unreadable or malformed (never a traceback)."""
    run = read_object(d / "run.json")
    if not (d / "samples.jsonl").is_file():
        raise CompareError(str(d / 'samples.jsonl'), f"missing (run {side}'s {name} samples; nothing to compare)")
    try:
        log = RunDir(d).read_samples()
        _, _, suite, ok = load_suite_run(d, need_metrics=False)
        pv = suite.per_probe(ok)
    except VerdictError as e:
        raise CompareError(e.field, e.message) from None
    except OSError as e:
        raise CompareError(str(d), f"cannot be read ({e})") from None
    except Exception as e:  # a malformed sample or option: name the run, never a traceback
        raise CompareError(str(d), f"not a readable {name} run ({type(e).__name__}: {e})") from None
    return {"run": run, "suite": suite, "log": log, "pv": pv}


def _status(side: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """condition -> {backend, ok: probes, error: {probe: message}} over every sample of one side."""
    out: dict[str, dict[str, Any]] = {}
    backend_of = condition_backends(side["log"].samples)
    for smp in side["log"].samples:
        c = out.setdefault(smp["condition"], {"backend": backend_of.get(smp["condition"]) or smp["condition"],
                                              "ok": set(), "error": {}})
        if smp.get("status") == "ok":
            c["ok"].add(smp.get("probe_id"))
        else:
            c["error"][smp.get("probe_id")] = str(smp.get("error") or smp.get("status") or "no status")
    return out


def _backend_note(run: dict[str, Any], backend: str) -> str:
    info = (run.get("backends") or {}).get(backend)
    if not isinstance(info, dict):
        return ""
    st, why = info.get("status"), info.get("reason") or (run.get("failures") or {}).get(backend)
    return "" if st == "ok" and not why else f"; run.json: backend {backend} {st or 'no status'}" + (
        f" ({str(why)[:160]})" if why else "")


def coverage(name: str, a: dict[str, Any], b: dict[str, Any], backends: list[str] | None) -> list[str]:
    """What makes one suite's comparison incomplete, one message each (see the module docstring): a condition with
    ok samples in one run and none in the other (missing or every sample errored), a condition present in both
    with probes that errored in either, and torn samples.jsonl lines whose sample no other line carries. A
    condition only one run has at all (a backend added to B) is not a problem: it is listed as new."""
    out = []
    sa, sb = _status(a), _status(b)
    for side, mine, other, run_other in (("A", sa, sb, b["run"]), ("B", sb, sa, a["run"])):
        for cond, c in sorted(mine.items()):
            if backends and c["backend"] not in backends or not c["ok"]:
                continue
            o = other.get(cond)
            label = cond if cond == c["backend"] else f"{c['backend']} ({cond})"
            theirs = "B" if side == "A" else "A"
            if o is None and side == "B":
                continue  # new in B: nothing to compare it with, not a failure
            if o is None:
                out.append(f"{name}: {label}: {len(c['ok'])} ok sample(s) in run A, none in run B"
                           f"{_backend_note(run_other, c['backend'])}")
            elif not o["ok"]:
                err = next(iter(o["error"].values()), "")
                out.append(f"{name}: {label}: {len(c['ok'])} ok sample(s) in run {side}, every one of its "
                           f"{len(o['error'])} sample(s) in run {theirs} errored (e.g. {err[:160]!r})"
                           f"{_backend_note(run_other, c['backend'])}")
    for side, st in (("A", sa), ("B", sb)):
        for cond, c in sorted(st.items()):
            if (backends and c["backend"] not in backends) or not c["ok"] or not c["error"]:
                continue
            other = (sb if side == "A" else sa).get(cond)
            if other is None or not other["ok"]:
                continue  # reported above
            err = next(iter(c["error"].values()))
            label = cond if cond == c["backend"] else f"{c['backend']} ({cond})"
            out.append(f"{name}: {label}: {len(c['error'])} of {len(c['error']) + len(c['ok'])} probe(s) errored "
                       f"in run {side} (e.g. {err[:160]!r}); a gate cannot pass probes it did not see")
    for side, x in (("A", a), ("B", b)):
        lost = x["log"].lost()
        if lost:
            lines = ", ".join(str(n) for n, _ in lost[:10]) + (", …" if len(lost) > 10 else "")
            out.append(f"{name}: {x['dir'] / 'samples.jsonl'}: {len(lost)} torn line(s) whose sample no other line "
                       f"carries (line {lines}) in run {side}: those samples are lost")
    return out


def compare_runs(a: str | Path, b: str | Path, fail_on: list[str] | None = None,
                 backends: list[str] | None = None) -> dict[str, Any]:
    """Everything `memrig compare` reports, as a dict (see the module docstring); `exit_status` 1 when a gated
    metric regressed, else 3 when the comparison is incomplete (`problems`), else 0."""
    (sa, una), (sb, unb) = _discover(a), _discover(b)
    gates = parse_fail_on(fail_on)
    common = sorted(set(sa) & set(sb))
    if not common:
        msg = f"no suite in common: run A ({a}) has {', '.join(sorted(sa))}; run B ({b}) has {', '.join(sorted(sb))}"
        raise CompareError("runs", msg, text=msg)
    problems: list[str] = []
    for name in sorted(set(sa) - set(sb)):
        problems.append(f"{name}: in run A ({sa[name]}), not finished in run B"
                        + (f" ({unb[name]})" if name in unb else " (not in it)"))
    for name in sorted(set(sb) & set(una)):
        problems.append(f"{name}: in run B ({sb[name]}), not finished in run A ({una[name]}): nothing to compare "
                        "it with")
    suites: dict[str, Any] = {}
    config: dict[tuple[str, str, str], list[str]] = {}
    all_backends: set[str] = set()
    torn: dict[str, dict[str, int]] = {}
    for name in common:
        la, lb = _load(name, sa[name], "A"), _load(name, sb[name], "B")
        la["dir"], lb["dir"] = sa[name], sb[name]
        run_a, run_b, suite_a, suite_b, pa, pb = la["run"], lb["run"], la["suite"], lb["suite"], la["pv"], lb["pv"]
        if suite_a.name != suite_b.name:
            raise CompareError(str(name), f"run A's is suite {suite_a.name!r} ({sa[name] / 'run.json'}), run B's is "
                               f"{suite_b.name!r} ({sb[name] / 'run.json'}): different suites")
        ans_a, jud_a = mocked(run_a)
        ans_b, jud_b = mocked(run_b)
        mock = suite_a.mocked_metrics(ans_a, jud_a) | suite_b.mocked_metrics(ans_b, jud_b)
        headline = suite_a.headline(ans_a, jud_a)
        for x in (la, lb):
            all_backends |= {c["backend"] for c in _status(x).values()} | set(x["run"].get("backends") or {})
        problems += coverage(name, la, lb, backends)
        torn[name] = {"a": len(la["log"].torn), "b": len(lb["log"].torn)}
        rows, only = [], {"a": sorted(set(pa.values) - set(pb.values)), "b": sorted(set(pb.values) - set(pa.values))}
        for cond in sorted(set(pa.values) & set(pb.values)):
            backend = pa.backend_of.get(cond) or pb.backend_of.get(cond) or cond
            if backends and backend not in backends:
                continue
            rows += _compare_condition(name, cond, backend, pa, pb, mock)
        for x in config_diff(run_a, run_b):
            config.setdefault((x["key"], json.dumps(x["a"], default=str), json.dumps(x["b"], default=str)),
                              []).append(name)
        suites[name] = {"dir_a": str(sa[name]), "dir_b": str(sb[name]), "headline": headline, "rows": rows,
                        "clustered": bool(pa.clusters or pb.clusters), "torn_lines": torn[name],
                        "lost_lines": len(la["log"].lost()) + len(lb["log"].lost()),
                        "conditions_only_in": only, "git_a": run_a.get("git_sha"), "git_b": run_b.get("git_sha")}
    for want in backends or []:
        if want not in all_backends:
            raise CompareError("--backends", f"{want!r} is in neither run's compared suites "
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
        if not matched and not problems:
            known = sorted({r["metric"] for s in suites.values() for r in s["rows"]})
            raise CompareError("--fail-on", f"{':'.join(x for x in spec if x)!r} matches no metric of the compared "
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
        "problems": problems,
        "exit_status": 1 if uniq else 3 if problems else 0,
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
    if res.get("problems"):
        lines += ["", f"**Incomplete**: {len(res['problems'])} problem(s) make this comparison partial"
                  + ("" if res["regressions"] else ": exit status 3") + ".", ""]
        lines += [f"- {x}" for x in res["problems"]]
    if res["fail_on"]:
        if res["regressions"]:
            lines += ["", f"**Regression** on --fail-on {', '.join(res['fail_on'])}: exit status 1.", ""]
            lines += _table(head, [_row(r) for r in res["regressions"]])
        else:
            lines += ["", f"No regression on --fail-on {', '.join(res['fail_on'])} among what both runs have: exit "
                      f"status {res['exit_status']}."]
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
        n_torn = s.get("torn_lines") or {}
        for side in ("a", "b"):
            if n_torn.get(side):
                notes.append(f"{name}: run {side.upper()}'s samples.jsonl has {n_torn[side]} torn line(s) (cut by a "
                             "crash; superseded ones are harmless, lost ones are listed above).")
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
            why = "samples lost to torn lines" if s.get("lost_lines") else "another seed or data sample"
            notes.append(f"{name}: the runs asked different probes ({why}) for "
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
