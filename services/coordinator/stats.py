"""Statistics for comparing systems on the same probes (seed 001 §8, §9.1), numpy-vectorised and seeded.

- `bootstrap_ci`: percentile bootstrap of the mean (1000 resamples) -> 95% CI.
- `median_ratio_ci`: percentile bootstrap of median(after) / median(before) over two independent samples (2000
  resamples): how sure a growth ratio is (the cost table, services/coordinator/costs.py).
- `interval`: the interval a report prints, by the independent unit. Without clusters (LongMemEval: each
  question is its own haystack) a percentile bootstrap over questions. With clusters (LoCoMo: questions of one
  conversation share it) a cluster-robust t interval for the question-weighted mean with G - 1 degrees of
  freedom (`cluster_t_interval`); `cluster_bootstrap_ci` (whole clusters drawn with replacement) is kept for
  comparison: over 20 seeded 4-conversation samples of LoCoMo dev it contained the all-conversation figure 85%
  of the time, against 97% for the t interval (`python -m services.studies.interval_study`; README, "IR
  baselines and how sure the numbers are"). Clusters and probes are taken
  in sorted id order, so the order of samples.jsonl changes nothing. A rate whose every value is 0 (or every
  value 1) gets the Wilson score interval over the number of independent units instead of a width-0 interval.
- `paired_permutation_test`: two-sided test on paired per-probe scores; the null is exchangeability within
  each pair, simulated by random sign flips of the differences (10,000 permutations); p = (count(|mean
  flipped diff| >= |observed|) + 1) / (n_perm + 1), so p is never exactly 0. With clusters, whole clusters'
  differences flip together (the unit that is exchangeable under the null).
- `compare` / `scorecard`: per-metric winner with the seed's tie thresholds (0.005 for rates and scores,
  1.0 for tokens and milliseconds) and win/loss/tie counts.
- `per_category`: mean and CI per category.
- `min_detectable_difference`: the power statement beside every comparison: the smallest difference the same paired
  test on a sample like this one would detect with 80% probability at alpha 0.05 (two-sided), MDD = (t_{1-alpha/2,
  df} + t_{power, df}) * SE, SE and df those of the difference's interval (cluster-robust with G - 1 df, or the
  probe-level standard error with n - 1 df): the t approximation to the sign-flip test, which matches it once the
  units are more than a handful (tests/test_power.py simulates it). None, with the reason, when the sign-flip test
  cannot reach alpha with so few units (2 / 2^units >= alpha) or the differences have no spread to size it from.
  `units_needed` inverts it: how many units of the same spread a given difference needs.

Every random draw comes from `numpy.random.default_rng(seed)`; the seed is an argument, so a report can be
recomputed exactly.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

N_BOOTSTRAP = 1000
N_PERMUTATIONS = 10_000
RATE_TIE = 0.005
ABSOLUTE_TIE = 1.0  # tokens, ms


def tie_threshold(unit: str) -> float:
    """Seed 001 §8: 1.0 for token and latency metrics, 0.005 for everything else (rates, scores)."""
    return ABSOLUTE_TIE if unit in ("tokens", "ms") else RATE_TIE


def _clean(values: Iterable[float | None]) -> np.ndarray:
    return np.asarray([float(v) for v in values if v is not None], dtype=np.float64)


def bootstrap_ci(values: Sequence[float | None], n_resamples: int = N_BOOTSTRAP, confidence: float = 0.95,
                 seed: int = 0) -> tuple[float | None, float | None, float | None]:
    """(mean, lower, upper): percentile bootstrap of the mean of the non-None values. One value -> a zero-width
    interval; no values -> (None, None, None)."""
    x = _clean(values)
    if x.size == 0:
        return None, None, None
    m = float(x.mean())
    if x.size == 1:
        return m, m, m
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(n_resamples, x.size))
    means = x[idx].mean(axis=1)
    a = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [a, 1.0 - a])
    return m, float(lo), float(hi)


def median_ratio_ci(before: Sequence[float], after: Sequence[float], n_resamples: int = 2 * N_BOOTSTRAP,
                    confidence: float = 0.95, seed: int = 0) -> tuple[float, float] | None:
    """Percentile bootstrap interval of median(after) / median(before), each sample resampled on its own (two
    independent samples: the namespaces of two windows of a run). None when either sample has fewer than 2 values
    (a single value has no spread to resample) or a resampled median of `before` is 0."""
    x, y = _clean(before), _clean(after)
    if x.size < 2 or y.size < 2:
        return None
    rng = np.random.default_rng(seed)
    mx = np.median(x[rng.integers(0, x.size, size=(n_resamples, x.size))], axis=1)
    my = np.median(y[rng.integers(0, y.size, size=(n_resamples, y.size))], axis=1)
    if np.any(mx <= 0):
        return None
    a = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(my / mx, [a, 1.0 - a])
    return float(lo), float(hi)


def wilson_interval(successes: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion successes/n (Wilson 1927): centre (p + z²/2n)/(1 + z²/n),
    half-width z·sqrt(p(1-p)/n + z²/4n²)/(1 + z²/n). At p = 0 it is [0, z²/(n + z²)], never width 0."""
    if n <= 0:
        raise ValueError("wilson_interval: n must be >= 1")
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, float(centre - half)), min(1.0, float(centre + half))


BOOTSTRAP_PROBE = "percentile bootstrap over questions"
BOOTSTRAP_CLUSTER = "cluster bootstrap over {unit}s"
CLUSTER_T = "cluster-robust t interval over {unit}s"
WILSON = "Wilson score interval over {n} {unit}s (every value {v:g})"


def _cluster_arrays(values: Mapping[str, float | None], clusters: Mapping[str, str] | None
                    ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Per cluster (sorted by id): the sum and count of its non-None values, probes taken in sorted id order."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for pid in sorted(values):
        v = values[pid]
        if v is None:
            continue
        c = clusters.get(pid, pid) if clusters is not None else pid
        sums[c] = sums.get(c, 0.0) + float(v)
        counts[c] = counts.get(c, 0) + 1
    names = sorted(sums)
    return (np.asarray([sums[c] for c in names], dtype=np.float64),
            np.asarray([counts[c] for c in names], dtype=np.float64), names)


@functools.lru_cache(maxsize=1024)
def t_quantile(q: float, df: int) -> float:
    """Student t's quantile function at q with df degrees of freedom (scipy's ppf), kept per (q, df): a report asks
    it for the same few df thousands of times."""
    from scipy.stats import t as student_t

    return float(student_t.ppf(q, df))


def cluster_bootstrap_ci(values: Mapping[str, float | None], clusters: Mapping[str, str] | None = None,
                         n_resamples: int = N_BOOTSTRAP, confidence: float = 0.95, seed: int = 0
                         ) -> tuple[float | None, float | None, float | None]:
    """(mean over probes, lower, upper): percentile bootstrap resampling whole clusters (`clusters[probe]`,
    default: every probe its own cluster), each resample's statistic = sum of drawn values / count of drawn
    values. Independent of the mapping's order."""
    return _cluster_bootstrap(*_cluster_arrays(values, clusters), n_resamples, confidence, seed)


def _cluster_bootstrap(sums: np.ndarray, counts: np.ndarray, names: list[str], n_resamples: int, confidence: float,
                       seed: int) -> tuple[float | None, float | None, float | None]:
    """cluster_bootstrap_ci from _cluster_arrays' arrays."""
    if not names:
        return None, None, None
    m = float(sums.sum() / counts.sum())
    if len(names) == 1:
        return m, m, m
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(names), size=(n_resamples, len(names)))
    means = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
    a = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [a, 1.0 - a])
    return m, float(lo), float(hi)


def cluster_t_interval(values: Mapping[str, float | None], clusters: Mapping[str, str],
                       confidence: float = 0.95) -> tuple[float | None, float | None, float | None]:
    """(mean over probes, lower, upper) for a question-weighted mean of G clustered units: the ratio estimator
    r = Σ y / Σ n with the cluster-robust (CR1) variance G/(G-1) · Σ_c (y_c - r n_c)² / (Σ n)² and Student-t
    critical values with G - 1 degrees of freedom, the standard small-G correction (Cameron & Miller, J. Human
    Resources 2015). On LoCoMo dev it holds its 95% nominally where the percentile cluster bootstrap does not
    (see README "What the report's numbers mean"). One cluster: a zero-width interval at the mean."""
    return _cluster_t(*_cluster_arrays(values, clusters), confidence)


def _cluster_t(sums: np.ndarray, counts: np.ndarray, names: list[str], confidence: float
               ) -> tuple[float | None, float | None, float | None]:
    """cluster_t_interval from _cluster_arrays' arrays."""
    if not names:
        return None, None, None
    r = float(sums.sum() / counts.sum())
    g = len(names)
    if g == 1:
        return r, r, r
    resid = sums - r * counts
    se = float(np.sqrt(g / (g - 1) * float((resid ** 2).sum())) / counts.sum())
    half = t_quantile(0.5 + confidence / 2.0, g - 1) * se
    return r, r - half, r + half


def interval(values: Mapping[str, float | None], clusters: Mapping[str, str] | None = None, seed: int = 0,
             unit: str = "rate", cluster_unit: str = "conversation", n_resamples: int = N_BOOTSTRAP,
             confidence: float = 0.95) -> dict[str, Any]:
    """{n, units, mean, ci, method}: the reported interval of one metric (see the module docstring)."""
    vals = [float(v) for v in values.values() if v is not None]
    arrays = _cluster_arrays(values, clusters)  # once: the interval below is drawn from the same arrays
    n_units = len(arrays[2])
    out: dict[str, Any] = {"n": len(vals), "units": n_units}
    if not vals:
        return {**out, "mean": None, "ci": [None, None], "method": ""}
    constant = vals[0] if all(v == vals[0] for v in vals) else None
    if unit == "rate" and constant in (0.0, 1.0):
        lo, hi = wilson_interval(constant * n_units, n_units, confidence)
        what = cluster_unit if clusters is not None else "question"
        return {**out, "mean": constant, "ci": [lo, hi], "method": WILSON.format(n=n_units, unit=what, v=constant)}
    if clusters is not None:
        m, lo, hi = _cluster_t(*arrays, confidence)
        method = CLUSTER_T.format(unit=cluster_unit)
        if unit == "rate" and lo is not None and hi is not None:  # a rate's interval stays inside [0, 1]
            lo, hi = max(0.0, lo), min(1.0, hi)
        elif unit in ("ms", "tokens") and lo is not None:  # counts and durations are never negative
            lo = max(0.0, lo)
    else:
        m, lo, hi = _cluster_bootstrap(*arrays, n_resamples, confidence, seed)
        method = BOOTSTRAP_PROBE
    return {**out, "mean": m, "ci": [lo, hi], "method": method}


def paired_permutation_test(a: Sequence[float], b: Sequence[float], n_permutations: int = N_PERMUTATIONS,
                            seed: int = 0, groups: Sequence[str] | None = None) -> float:
    """Two-sided p-value for mean(a - b) == 0 on paired samples by random sign flips (vectorised). Identical
    systems give p = 1. With `groups` (one label per pair), all pairs of a group flip together."""
    xa, xb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if xa.shape != xb.shape:
        raise ValueError(f"paired samples need equal lengths ({xa.size} vs {xb.size})")
    d = xa - xb
    if d.size == 0 or not np.any(d):
        return 1.0
    observed = abs(d.mean())
    rng = np.random.default_rng(seed)
    if groups is not None:
        names = sorted(set(groups))
        pos = {g: i for i, g in enumerate(names)}
        totals = np.zeros(len(names))
        np.add.at(totals, [pos[g] for g in groups], d)
        signs = rng.integers(0, 2, size=(n_permutations, len(names)), dtype=np.int8) * 2 - 1
        perm = np.abs((signs * totals).sum(axis=1) / d.size)
        count = int(np.sum(perm >= observed - 1e-12))
        return (count + 1) / (n_permutations + 1)
    signs = rng.integers(0, 2, size=(n_permutations, d.size), dtype=np.int8) * 2 - 1
    perm = np.abs((signs * d).mean(axis=1))
    # tolerance: floating-point sums of the same magnitudes in another order must still count as "as extreme"
    count = int(np.sum(perm >= observed - 1e-12))
    return (count + 1) / (n_permutations + 1)


def stars(p: float | None) -> str:
    """'***' p<0.001, '**' p<0.01, '*' p<0.05, '' otherwise."""
    if p is None:
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""


ALPHA = 0.05
POWER = 0.8


def _diff_se(diffs: Mapping[str, float | None], clusters: Mapping[str, str] | None) -> tuple[float | None, int]:
    """(standard error of the mean difference, independent units): cluster-robust (CR1, as cluster_t_interval) with
    clusters, else sd(ddof 1) / sqrt(n)."""
    sums, counts, names = _cluster_arrays(diffs, clusters)
    g = len(names)
    if g < 2:
        return None, g
    if clusters is None:
        x = sums  # one probe per unit
        return float(x.std(ddof=1) / np.sqrt(g)), g
    r = float(sums.sum() / counts.sum())
    resid = sums - r * counts
    return float(np.sqrt(g / (g - 1) * float((resid ** 2).sum())) / counts.sum()), g


def _mdd_factor(units: int, alpha: float = ALPHA, power: float = POWER) -> float:
    df = units - 1
    return t_quantile(1 - alpha / 2, df) + t_quantile(power, df)


def min_detectable_difference(diffs: Mapping[str, float | None], clusters: Mapping[str, str] | None = None,
                              alpha: float = ALPHA, power: float = POWER) -> dict[str, Any]:
    """{"mdd", "se", "units", "why"} for paired differences (b - a by probe): see the module docstring."""
    se, g = _diff_se(diffs, clusters)
    if g < 2:
        return {"mdd": None, "se": None, "units": g, "why": "fewer than 2 independent units"}
    if 2.0 / 2 ** g >= alpha:
        return {"mdd": None, "se": se, "units": g,
                "why": f"{g} units: a sign-flip test cannot reach p < {alpha:g} (its smallest p is {2 / 2 ** g:.3f})"}
    if not se:
        return {"mdd": None, "se": se, "units": g, "why": "every unit's difference is the same: no spread to size it"}
    return {"mdd": _mdd_factor(g, alpha, power) * se, "se": se, "units": g, "why": ""}


def units_needed(se: float, units: int, delta: float, alpha: float = ALPHA, power: float = POWER,
                 limit: int = 1_000_000) -> int | None:
    """The fewest units of the same spread (SE scales as sqrt(units / n)) at which the minimum detectable difference
    is at most |delta|, and at which the sign-flip test can reach alpha at all; None past `limit`."""
    if delta == 0 or se <= 0 or units < 2:
        return None
    floor = 2
    while 2.0 / 2 ** floor >= alpha:
        floor += 1
    sd_unit = se * np.sqrt(units)

    def ok(n: int) -> bool:
        return _mdd_factor(n, alpha, power) * sd_unit / np.sqrt(n) <= abs(delta)

    lo, hi = floor, floor
    while not ok(hi):
        if hi >= limit:
            return None
        lo, hi = hi, min(limit, hi * 2)
    while lo < hi:  # the smallest n in [lo, hi] that is ok (ok is monotone in n)
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


@dataclass
class Comparison:
    metric: str
    a: str
    b: str
    n: int
    mean_a: float | None
    mean_b: float | None
    ci_a: tuple[float | None, float | None]
    ci_b: tuple[float | None, float | None]
    delta: float | None  # mean_b - mean_a
    ci_delta: tuple[float | None, float | None]
    p: float | None
    stars: str
    higher_is_better: bool
    threshold: float
    winner: str  # a | b | tie | n/a
    method: str = BOOTSTRAP_PROBE  # how the CIs were made
    units: int = 0  # independent units behind them (clusters, or probes)
    extra: dict[str, Any] = field(default_factory=dict)
    # the smallest difference this test on this sample detects with 80% power (min_detectable_difference)
    mdd: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def paired(values_a: Mapping[str, float | None], values_b: Mapping[str, float | None]
           ) -> tuple[list[str], list[float], list[float]]:
    """Probe ids present (non-None) in both, sorted, with their values."""
    ids = sorted(k for k in values_a if k in values_b and values_a[k] is not None and values_b[k] is not None)
    return ids, [float(values_a[k]) for k in ids], [float(values_b[k]) for k in ids]


def winner(mean_a: float | None, mean_b: float | None, higher_is_better: bool, threshold: float) -> str:
    """'a', 'b' or 'tie' (|difference| <= threshold); 'n/a' when either is missing. A negative threshold is
    refused: no difference, not even 0, could then be a tie."""
    if threshold < 0:
        raise ValueError(f"winner: threshold must be >= 0, got {threshold}")
    if mean_a is None or mean_b is None:
        return "n/a"
    diff = mean_b - mean_a
    if abs(diff) <= threshold:
        return "tie"
    better_b = diff > 0 if higher_is_better else diff < 0
    return "b" if better_b else "a"


def compare(metric: str, a: str, b: str, values_a: Mapping[str, float | None],
            values_b: Mapping[str, float | None], higher_is_better: bool = True, unit: str = "rate",
            seed: int = 0, n_bootstrap: int = N_BOOTSTRAP, n_permutations: int = N_PERMUTATIONS,
            clusters: Mapping[str, str] | None = None, cluster_unit: str = "conversation") -> Comparison:
    """Compare system b against system a on one metric over the probes both answered (paired). With
    `clusters`, CIs resample whole clusters and the permutation test flips whole clusters."""
    ids, xa, xb = paired(values_a, values_b)
    va, vb = dict(zip(ids, xa, strict=True)), dict(zip(ids, xb, strict=True))
    ia = interval(va, clusters, seed, unit, cluster_unit, n_bootstrap)
    ib = interval(vb, clusters, seed + 1, unit, cluster_unit, n_bootstrap)
    diffs = {k: y - x for k, x, y in zip(ids, xa, xb, strict=True)}
    md, ld, hd = (cluster_t_interval(diffs, clusters) if clusters is not None
                  else cluster_bootstrap_ci(diffs, None, n_bootstrap, seed=seed + 2))
    groups = [clusters.get(k, k) for k in ids] if clusters is not None else None
    p = paired_permutation_test(xb, xa, n_permutations, seed=seed + 3, groups=groups) if ids else None
    thr = tie_threshold(unit)
    ma, mb = ia["mean"], ib["mean"]
    method = CLUSTER_T.format(unit=cluster_unit) if clusters is not None else BOOTSTRAP_PROBE
    power = min_detectable_difference(diffs, clusters)
    return Comparison(metric, a, b, len(ids), ma, mb, tuple(ia["ci"]), tuple(ib["ci"]), md, (ld, hd), p,
                      stars(p), higher_is_better, thr, winner(ma, mb, higher_is_better, thr), method,
                      ia["units"], {"method_a": ia["method"], "method_b": ib["method"], "power": power},
                      power["mdd"])


def scorecard(comparisons: Sequence[Comparison]) -> dict[str, Any]:
    """Win/loss/tie counts of b against a; b 'wins the benchmark' when it wins more metrics than a."""
    wins = sum(1 for c in comparisons if c.winner == "b")
    losses = sum(1 for c in comparisons if c.winner == "a")
    ties = sum(1 for c in comparisons if c.winner == "tie")
    na = sum(1 for c in comparisons if c.winner == "n/a")
    verdict = "b" if wins > losses else "a" if losses > wins else "tie"
    return {"wins": wins, "losses": losses, "ties": ties, "n/a": na, "metrics": len(comparisons),
            "verdict": verdict}


def per_category(values: Mapping[str, float | None], categories: Mapping[str, str], seed: int = 0,
                 n_bootstrap: int = N_BOOTSTRAP) -> dict[str, dict[str, Any]]:
    """{category: {n, mean, ci: [lo, hi]}} for probe-keyed values; None values are skipped."""
    groups: dict[str, list[float]] = {}
    for pid in sorted(values):  # probe-id order: the same samples in any order give the same resamples
        v = values[pid]
        if v is None:
            continue
        groups.setdefault(str(categories.get(pid, "")), []).append(float(v))
    out = {}
    for cat in sorted(groups):
        m, lo, hi = bootstrap_ci(groups[cat], n_bootstrap, seed=seed)
        out[cat] = {"n": len(groups[cat]), "mean": m, "ci": [lo, hi]}
    return out


def held_out_check(per_cond: Mapping[str, Mapping[str, Mapping[str, float | None]]], clusters: Mapping[str, str],
                   metrics: Sequence[str], seed: int = 0, bounds: tuple[float, float] | None = (0.0, 1.0)
                   ) -> dict[str, Any]:
    """Leave one cluster out: for each condition, metric and cluster c, the 95% cluster-robust t CI of the mean
    over the other clusters and whether c's own mean lands inside it. Needs >= 3 clusters (two left to
    resample); {} otherwise. `inside` counts clusters whose mean is within [lo, hi]; `inside_pi` those within
    the others' 95% prediction interval for one new cluster (a CI bounds the mean over clusters like these, not
    one cluster, so it is expected to miss single clusters more often than 5% of the time). Intervals are clipped
    to `bounds` (the metrics checked are rates in [0, 1])."""
    out: dict[str, Any] = {}
    for cond in sorted(per_cond):
        for metric in metrics:
            values = per_cond[cond].get(metric)
            if not values:
                continue
            sums, counts, names = _cluster_arrays(values, clusters)
            if len(names) < 3:
                continue
            rows = []
            cluster_means = sums / counts
            for i, held in enumerate(names):
                rest = {p: v for p, v in values.items() if clusters.get(p, p) != held}
                _, lo, hi = cluster_t_interval(rest, clusters)
                own = float(cluster_means[i])
                plo, phi = prediction_interval(np.delete(cluster_means, i))
                if bounds is not None and lo is not None and hi is not None:  # rates: intervals inside [0, 1]
                    lo, hi = max(bounds[0], lo), min(bounds[1], hi)
                    plo, phi = max(bounds[0], plo), min(bounds[1], phi)
                rows.append({"cluster": held, "mean": own, "ci": [lo, hi],
                             "inside": lo is not None and lo - 1e-12 <= own <= hi + 1e-12,
                             "pi": [plo, phi], "inside_pi": plo - 1e-12 <= own <= phi + 1e-12})
            out.setdefault(cond, {})[metric] = {"inside": sum(r["inside"] for r in rows),
                                                "inside_pi": sum(r["inside_pi"] for r in rows),
                                                "of": len(rows), "rows": rows}
    return out


def prediction_interval(unit_means: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Student-t prediction interval for one more unit's mean, from >= 2 unit means:
    mean ± t_{(1+confidence)/2, k-1} · s · sqrt(1 + 1/k), s the sample standard deviation (ddof 1)."""
    x = np.asarray(unit_means, dtype=np.float64)
    k = x.size
    if k < 2:
        raise ValueError("prediction_interval: needs at least 2 unit means")
    half = t_quantile(0.5 + confidence / 2.0, k - 1) * float(x.std(ddof=1)) * float(np.sqrt(1 + 1 / k))
    return float(x.mean() - half), float(x.mean() + half)
