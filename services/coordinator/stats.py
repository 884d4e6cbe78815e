"""Statistics for comparing systems on the same probes (seed 001 §8, §9.1), numpy-vectorised and seeded.

- `bootstrap_ci`: percentile bootstrap of the mean (1000 resamples) -> 95% CI.
- `paired_permutation_test`: two-sided test on paired per-probe scores; the null is exchangeability within
  each pair, simulated by random sign flips of the differences (10,000 permutations); p = (count(|mean
  flipped diff| >= |observed|) + 1) / (n_perm + 1), so p is never exactly 0.
- `compare` / `scorecard`: per-metric winner with the seed's tie thresholds (0.005 for rates and scores,
  1.0 for tokens and milliseconds) and win/loss/tie counts.
- `per_category`: mean and CI per category.

Every random draw comes from `numpy.random.default_rng(seed)`; the seed is an argument, so a report can be
recomputed exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
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


def paired_permutation_test(a: Sequence[float], b: Sequence[float], n_permutations: int = N_PERMUTATIONS,
                            seed: int = 0) -> float:
    """Two-sided p-value for mean(a - b) == 0 on paired samples by random sign flips (vectorised). Identical
    systems give p = 1."""
    xa, xb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if xa.shape != xb.shape:
        raise ValueError(f"paired samples need equal lengths ({xa.size} vs {xb.size})")
    d = xa - xb
    if d.size == 0 or not np.any(d):
        return 1.0
    observed = abs(d.mean())
    rng = np.random.default_rng(seed)
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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def paired(values_a: Mapping[str, float | None], values_b: Mapping[str, float | None]
           ) -> tuple[list[str], list[float], list[float]]:
    """Probe ids present (non-None) in both, sorted, with their values."""
    ids = sorted(k for k in values_a if k in values_b and values_a[k] is not None and values_b[k] is not None)
    return ids, [float(values_a[k]) for k in ids], [float(values_b[k]) for k in ids]


def winner(mean_a: float | None, mean_b: float | None, higher_is_better: bool, threshold: float) -> str:
    """'a', 'b' or 'tie' (|difference| <= threshold); 'n/a' when either is missing."""
    if mean_a is None or mean_b is None:
        return "n/a"
    diff = mean_b - mean_a
    if abs(diff) <= threshold:
        return "tie"
    better_b = diff > 0 if higher_is_better else diff < 0
    return "b" if better_b else "a"


def compare(metric: str, a: str, b: str, values_a: Mapping[str, float | None],
            values_b: Mapping[str, float | None], higher_is_better: bool = True, unit: str = "rate",
            seed: int = 0, n_bootstrap: int = N_BOOTSTRAP, n_permutations: int = N_PERMUTATIONS) -> Comparison:
    """Compare system b against system a on one metric over the probes both answered (paired)."""
    ids, xa, xb = paired(values_a, values_b)
    ma, la, ha = bootstrap_ci(xa, n_bootstrap, seed=seed)
    mb, lb, hb = bootstrap_ci(xb, n_bootstrap, seed=seed + 1)
    diffs = [y - x for x, y in zip(xa, xb, strict=True)]
    md, ld, hd = bootstrap_ci(diffs, n_bootstrap, seed=seed + 2)
    p = paired_permutation_test(xb, xa, n_permutations, seed=seed + 3) if ids else None
    thr = tie_threshold(unit)
    return Comparison(metric, a, b, len(ids), ma, mb, (la, ha), (lb, hb), md, (ld, hd), p, stars(p),
                      higher_is_better, thr, winner(ma, mb, higher_is_better, thr))


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
    for pid, v in values.items():
        if v is None:
            continue
        groups.setdefault(str(categories.get(pid, "")), []).append(float(v))
    out = {}
    for cat in sorted(groups):
        m, lo, hi = bootstrap_ci(groups[cat], n_bootstrap, seed=seed)
        out[cat] = {"n": len(groups[cat]), "mean": m, "ci": [lo, hi]}
    return out
