"""Percentiles of raw samples, one way for the whole rig: numpy's default (linear interpolation between the closest
order statistics, Hyndman & Fan type 7), over every sample, no histogram in between.

`percentile(values, q)` is one figure; `summary(values, qs, scale=, suffix=)` the usual block
{"n", "p50<suffix>", ..., "mean<suffix>", "max<suffix>"} with every value multiplied by `scale` first (1000 turns
seconds into ms, 1e-6 nanoseconds into ms) and None for each figure when there is no sample. Every report's own
key names stay as they were; they are built from this block (collectors/latency.py, collectors/event_loop.py,
services/coordinator/metrics/latency.py, services/perf/stats.py, ...). Two summaries are not samples and keep
their own rule: an HdrHistogram's (loadtests/open_loop.py) and locust's rounded response-time histogram
(loadtests/locust_scaling.py, nearest rank).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np


def pname(q: float) -> str:
    """The key fragment of a percentile: 50 -> "50", 99.9 -> "999"."""
    return f"{q:g}".replace(".", "")


def percentile(values: Sequence[float] | np.ndarray, q: float, scale: float = 1.0) -> float | None:
    """The q-th percentile (0-100) of the values times `scale`; None for no values."""
    a = np.asarray(values, dtype=np.float64)
    if a.size == 0:
        return None
    return float(np.percentile(a, q) * scale)


def summary(values: Sequence[float] | np.ndarray, qs: Iterable[float] = (50, 95, 99), *, scale: float = 1.0,
            suffix: str = "_ms", stats: Iterable[str] = ("mean", "max")) -> dict[str, float | int | None]:
    """{"n": count, "p<q><suffix>" for each q, then "<stat><suffix>" for each of `stats` (mean, max)} of the values
    times `scale`; every figure None (n 0) when there are none."""
    a = np.asarray(values, dtype=np.float64) * scale
    qs, stats = list(qs), list(stats)
    out: dict[str, float | int | None] = {"n": int(a.size)}
    pcts = np.percentile(a, qs) if a.size and qs else [None] * len(qs)
    for q, v in zip(qs, pcts, strict=True):
        out[f"p{pname(q)}{suffix}"] = None if v is None else float(v)
    for s in stats:
        out[f"{s}{suffix}"] = float(getattr(a, s)()) if a.size else None
    return out
