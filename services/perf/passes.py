"""Verdicts a rerun confirms: the arithmetic that turns repeated, interleaved timing passes into the figures the
targets judge, and the machine-load record that says when a step ran on a busy machine.

- a path's figure (p50, p90, p99) is the MEDIAN over passes of that pass's percentile: one pass spoiled by a
  burst of load from elsewhere cannot move it;
- the numpy floor is the MINIMUM over passes of its per-pass p50: the floor is what the hardware can do, and
  load only ever inflates it, so the least-disturbed pass is the best estimate (a floor timed once ranged
  0.53-7.26 ms at one size in one run);
- a cost that is a difference (the gRPC hop, the fault proxy's passthrough) is the MEDIAN OF PAIRED
  DIFFERENCES: each query (or round) timed on both paths back to back, differenced, then the median taken —
  not a difference of two separately-taken p50s, which adds both p50s' noise;
- every step records the 1-minute load average per core at its start and end and the system CPU use during
  it; a step whose load per core exceeded LOAD_PER_CORE_LIMIT at either end is flagged `under_load`, and a
  verdict drawn from it says so.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import psutil

from services.common.percentiles import percentile
from services.perf.stats import percentiles_ms

MIN_PASSES = 3
LOAD_PER_CORE_LIMIT = 1.0


def median_of_passes(per_pass_ns: Sequence[Sequence[int | float]]) -> dict[str, Any]:
    """{"p50", "p90", "p99", "mean"}: the median over passes of each pass's figure (ms); "n" = all samples,
    "passes" = how many, "p50_passes" = each pass's p50. Empty passes are ignored; no samples gives {}."""
    figs = [percentiles_ms(p) for p in per_pass_ns if len(p)]
    if not figs:
        return {}
    out: dict[str, Any] = {k: float(np.median([f[k] for f in figs])) for k in ("p50", "p90", "p99", "mean")}
    out["n"] = int(sum(f["n"] for f in figs))
    out["passes"] = len(figs)
    out["p50_passes"] = [f["p50"] for f in figs]
    return out


def floor_of_passes(per_pass_ns: Sequence[Sequence[int | float]]) -> float | None:
    """The floor's p50 in ms: the minimum over passes of the per-pass p50 (None without samples)."""
    p50s = [percentiles_ms(p)["p50"] for p in per_pass_ns if len(p)]
    return min(p50s) if p50s else None


def paired_difference_ms(slow_ns: Sequence[int | float], fast_ns: Sequence[int | float],
                         q: float = 50.0) -> float | None:
    """The q-th percentile (default the median) of slow[i] - fast[i] over pairs timed back to back, in ms."""
    a = np.asarray(slow_ns, dtype=np.float64)
    b = np.asarray(fast_ns, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired timings need equal lengths ({a.size} vs {b.size})")
    if a.size == 0:
        return None
    return percentile(a - b, q, scale=1e-6)


def consecutive_passes(samples: Sequence[int | float], passes: int = MIN_PASSES) -> list[list[int | float]]:
    """Samples taken one after another, cut into `passes` consecutive runs of (nearly) equal length."""
    k = max(1, min(passes, len(samples)))
    size = -(-len(samples) // k)
    return [list(samples[j * size:(j + 1) * size]) for j in range(k)]


def flatten(per_pass: Sequence[Sequence[int]]) -> list[int]:
    return [x for p in per_pass for x in p]


class LoadProbe:
    """Machine load over one step: `start()` then `stop()` returns the record (see the module docstring)."""

    def __init__(self, limit_per_core: float = LOAD_PER_CORE_LIMIT):
        self.limit = limit_per_core
        self.cores = os.cpu_count() or 1
        self._start: float | None = None

    def start(self) -> None:
        self._start = os.getloadavg()[0]
        psutil.cpu_percent(interval=None)  # starts the interval the next call measures

    def stop(self) -> dict[str, Any]:
        end = os.getloadavg()[0]
        return load_record(self._start if self._start is not None else end, end, self.cores,
                           psutil.cpu_percent(interval=None), self.limit)


def load_record(load1_start: float, load1_end: float, cores: int, cpu_percent: float | None,
                limit_per_core: float = LOAD_PER_CORE_LIMIT) -> dict[str, Any]:
    """The per-step load record; `under_load` when either end's 1-minute load per core exceeds the limit."""
    per_core = max(load1_start, load1_end) / max(1, cores)
    return {"load1_start": round(load1_start, 2), "load1_end": round(load1_end, 2), "cores": cores,
            "load_per_core": round(per_core, 2), "cpu_percent": cpu_percent, "limit_per_core": limit_per_core,
            "under_load": per_core > limit_per_core}
