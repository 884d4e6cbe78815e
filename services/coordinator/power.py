"""`memrig power RUN_DIR [--delta D]`: how large a difference a run could detect, and how many units (LoCoMo
conversations, questions, dialogues) a suite needs to detect a given one, from that run's spread.

For every suite of the run (a bench-all run directory, or one suite's) and every backend against the verdict's
baseline (OpenClaw native) and against BM25, on the suite's headline metric: the paired per-probe differences the
verdict tests, their minimum detectable difference now (stats.min_detectable_difference: 80% power, alpha 0.05, the
same paired sign-flip test by the same units), and the units a run of the same spread needs to detect `--delta`
(stats.units_needed; rates as fractions, 0.05 = 5 points) and to detect the difference it observed. Nothing is
re-run: everything comes from the run's samples.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from services.common import subcommand
from services.coordinator import stats
from services.coordinator.verdict import BM25, VerdictError, _mdd, load_suite_run, mocked, resolve_baseline


def _paired_diffs(a: dict[str, float | None], b: dict[str, float | None]) -> dict[str, float]:
    ids, xa, xb = stats.paired(a, b)
    return {k: y - x for k, x, y in zip(ids, xa, xb, strict=True)}


def suite_power(suite_dir: str | Path, delta: float | None = None) -> dict[str, Any]:
    """The power table of one suite run directory (module docstring)."""
    run, metrics, suite, samples = load_suite_run(suite_dir)
    pv = suite.probe_values(samples)
    metric = suite.headline(*mocked(run))
    if metric is None:
        raise VerdictError(f"suite {suite.name}", "no headline metric")
    hib, unit = pv.spec(metric)
    baseline, _ = resolve_baseline(metrics, pv, metric, hib)
    cond_of: dict[str, str] = {}
    for c, b in sorted(pv.backend_of.items()):
        if c in pv.values:
            cond_of.setdefault(b, c)
    rows = []
    for against in (baseline, cond_of.get(BM25)):
        if against is None:
            continue
        for backend, cond in cond_of.items():
            if cond == against:
                continue
            diffs = _paired_diffs(pv.values[against].get(metric) or {}, pv.values[cond].get(metric) or {})
            p = stats.min_detectable_difference(diffs, pv.clusters)
            observed = sum(diffs.values()) / len(diffs) if diffs else None
            need = (stats.units_needed(p["se"], p["units"], delta) if delta and p["se"] else None)
            need_obs = (stats.units_needed(p["se"], p["units"], observed) if observed and p["se"] else None)
            rows.append({"backend": backend, "against": against, "n": len(diffs), "units": p["units"],
                         "observed": observed, "mdd": p["mdd"], "why": p["why"], "se": p["se"],
                         "units_for_delta": need, "units_for_observed": need_obs})
    return {"suite": suite.name, "metric": metric, "unit": unit,
            "cluster_unit": pv.cluster_unit if pv.clusters else "question", "delta": delta, "rows": rows}


def run_power(run_dir: str | Path, delta: float | None = None) -> list[dict[str, Any]]:
    """suite_power for a suite directory, or for every suite directory of a bench-all run (report.json)."""
    run_dir = Path(run_dir)
    index = run_dir / "report.json"
    if (run_dir / "run.json").exists():
        return [suite_power(run_dir, delta)]
    if not index.exists():
        raise VerdictError(str(run_dir), "neither a suite run (run.json) nor a bench-all run (report.json)")
    try:
        suites = json.loads(index.read_text()).get("suites") or {}
    except (json.JSONDecodeError, AttributeError) as e:
        raise VerdictError(str(index), f"not a JSON object ({e})") from None
    out = []
    for s in suites.values():
        if isinstance(s, dict) and s.get("dir") and (run_dir / s["dir"] / "metrics.json").exists():
            try:
                out.append(suite_power(run_dir / s["dir"], delta))
            except NotImplementedError:
                continue  # a suite without per-probe values has no paired test to size
    return out


def _num(x: float | None, unit: str) -> str:
    if x is None:
        return "—"
    return f"{x * 100:+.1f} points" if unit == "rate" else f"{x:+.2f}"


def render(tables: list[dict[str, Any]]) -> str:
    out = ["# Power: what each comparison could detect", "",
           "MDD = the smallest difference the verdict's paired test detects with 80% power at alpha 0.05 on a sample "
           "like this one; units needed = how many independent units of the same spread a difference needs.", ""]
    for t in tables:
        unit, cu = t["unit"], t["cluster_unit"]
        out += [f"## {t['suite']}: {t['metric']}", ""]
        head = ["backend", "vs", f"{cu}s", "observed Δ", "MDD now", f"{cu}s for the observed Δ"]
        if t["delta"]:
            head.append(f"{cu}s for {_num(t['delta'], unit).lstrip('+')}")
        out += ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        for r in t["rows"]:
            mdd = _mdd(r["mdd"], unit) if r["mdd"] is not None else f"— ({r['why']})"
            cells = [r["backend"], r["against"], str(r["units"]), _num(r["observed"], unit), mdd,
                     str(r["units_for_observed"] or "—")]
            if t["delta"]:
                cells.append(str(r["units_for_delta"] or "—"))
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """`memrig power`'s flags (services/common/subcommand.py)."""
    ap.description = __doc__.split("\n\n")[0]
    ap.add_argument("run_dir", help="a bench-all run directory or one suite's")
    ap.add_argument("--delta", type=float, default=None,
                    help="the difference to detect, in the headline's unit (rates as fractions: 0.05 = 5 points)")
    ap.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    if args.delta is not None and not args.delta > 0:
        print(f"error: --delta: must be a positive number, got {args.delta}", file=sys.stderr)
        return 2
    try:
        tables = run_power(args.run_dir, args.delta)
    except VerdictError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(tables, indent=2) if args.json else render(tables))
    return 0


def main(argv: list[str] | None = None) -> int:
    return subcommand.main(sys.modules[__name__], argv, "memrig power")


if __name__ == "__main__":
    sys.exit(main())
