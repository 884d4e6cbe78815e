"""Process footprint: RSS (psutil) and Python heap (tracemalloc current and peak), sampled every N seconds.

Phases name what the process was doing (idle, active, sustained); the leak check fits a least-squares line to
RSS over time and reports the slope with a confidence interval (t-based, or a seeded bootstrap over residuals):
a leak is suspected only when the whole interval lies above the tolerance, so noise alone never flags one.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import psutil
from prometheus_client import CollectorRegistry, Gauge

from collectors.prom import get_metric
from collectors.samples import SampleSink
from collectors.tasks import start_task, stop_task


@dataclass(frozen=True)
class SlopeEstimate:
    slope: float  # units of y per unit of x (bytes per second for RSS over seconds)
    lo: float
    hi: float
    n: int
    method: str
    confidence: float

    def to_json(self) -> dict:
        return asdict(self)


def _t_quantile(p: float, dof: int) -> float:
    """Student t quantile (scipy is a declared dependency). The first call imports scipy.stats (seconds,
    ~85 MB): warm it before measuring."""
    from scipy import stats

    return float(stats.t.ppf(p, dof))


def ols_slope(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """(slope, intercept) of the least-squares line y = a + b·x."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    xm, ym = xa.mean(), ya.mean()
    sxx = float(((xa - xm) ** 2).sum())
    if sxx == 0:
        return 0.0, float(ym)
    b = float(((xa - xm) * (ya - ym)).sum() / sxx)
    return b, float(ym - b * xm)


def slope_ci(x: Sequence[float], y: Sequence[float], confidence: float = 0.95, method: str = "t",
             n_boot: int = 2000, seed: int = 0) -> SlopeEstimate:
    """Least-squares slope of y over x with a two-sided CI.

    t: b ± t_{(1+c)/2, n-2} · sqrt(SSR / (n-2) / Sxx).  bootstrap: resample residuals (seeded), refit, take the
    percentile interval. Fewer than 3 points: the interval is infinite (nothing can be concluded).
    """
    n = len(x)
    if n != len(y):
        raise ValueError("x and y differ in length")
    if n < 2:
        return SlopeEstimate(0.0, -math.inf, math.inf, n, method, confidence)
    b, a = ols_slope(x, y)
    if n < 3:
        return SlopeEstimate(b, -math.inf, math.inf, n, method, confidence)
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    resid = ya - (a + b * xa)
    if method == "t":
        sxx = float(((xa - xa.mean()) ** 2).sum())
        if sxx == 0:
            return SlopeEstimate(0.0, -math.inf, math.inf, n, method, confidence)
        se = math.sqrt(float((resid ** 2).sum()) / (n - 2) / sxx)
        q = _t_quantile((1 + confidence) / 2, n - 2)
        return SlopeEstimate(b, b - q * se, b + q * se, n, method, confidence)
    if method == "bootstrap":
        rng = np.random.default_rng(seed)
        fitted = a + b * xa
        idx = rng.integers(0, n, size=(n_boot, n))
        yb = fitted[None, :] + resid[idx]
        xm = xa - xa.mean()
        sxx = float((xm ** 2).sum())
        if sxx == 0:
            return SlopeEstimate(0.0, -math.inf, math.inf, n, method, confidence)
        slopes = (yb - yb.mean(axis=1, keepdims=True)) @ xm / sxx
        lo, hi = np.percentile(slopes, [100 * (1 - confidence) / 2, 100 * (1 + confidence) / 2])
        return SlopeEstimate(b, float(lo), float(hi), n, method, confidence)
    raise ValueError(f"method must be 't' or 'bootstrap', got {method!r}")


def leak_verdict(est: SlopeEstimate, tolerance: float = 0.0) -> str:
    """'leak' when the whole CI is above `tolerance`, 'stable' when it reaches down to it, 'unknown' if < 3 points."""
    if est.n < 3 or math.isinf(est.lo):
        return "unknown"
    return "leak" if est.lo > tolerance else "stable"


class ResourceSampler:
    """Samples one process every `interval_s` in a background task (call `sample()` for an extra point).

    Heap numbers come from tracemalloc and exist only for this process (pid=None); for another pid only RSS is
    sampled. tracemalloc is started here if it is not running and stopped again by `stop()`.
    `rss_reader` and `clock` replace psutil and time.monotonic (seconds) for tests and simulations, so the
    leak slope's unit (bytes per second of `clock`) can be checked against a synthetic series.
    """

    def __init__(self, component: str = "turn_sim", interval_s: float = 5.0, sink: SampleSink | None = None,
                 registry: CollectorRegistry | None = None, pid: int | None = None, trace_heap: bool = True,
                 rss_reader: Callable[[], int] | None = None, clock: Callable[[], float] = time.monotonic):
        self.component = component
        self.interval_s = interval_s
        self.sink = sink
        self.pid = pid
        self.proc = psutil.Process(pid or os.getpid())
        self.read_rss = rss_reader or (lambda: self.proc.memory_info().rss)
        self.clock = clock
        self.trace_heap = trace_heap and pid is None
        self.phase = "idle"
        self.samples: list[dict] = []
        self._task: asyncio.Task | None = None
        self._started_tracemalloc = False
        self._t0 = clock()
        self.rss = get_metric(Gauge, "memrig_process_rss_bytes", "Resident set size of a measured process",
                              ("component",), registry)
        self.heap = get_metric(Gauge, "memrig_heap_current_bytes", "Python heap traced by tracemalloc (current)",
                               ("component",), registry)
        self.heap_peak = get_metric(Gauge, "memrig_heap_peak_bytes", "Python heap traced by tracemalloc (peak)",
                                    ("component",), registry)
        self.phase_gauge = get_metric(Gauge, "memrig_resource_phase", "1 for the phase the process is in",
                                      ("component", "phase"), registry)

    def set_phase(self, phase: str) -> None:
        self.phase_gauge.labels(self.component, self.phase).set(0)
        self.phase = phase
        self.phase_gauge.labels(self.component, phase).set(1)

    def sample(self) -> dict:
        rss = int(self.read_rss())
        cur = peak = None
        if self.trace_heap and tracemalloc.is_tracing():
            cur, peak = tracemalloc.get_traced_memory()
        row = {"t_s": self.clock() - self._t0, "phase": self.phase, "rss_bytes": rss,
               "heap_current_bytes": cur, "heap_peak_bytes": peak}
        self.samples.append(row)
        self.rss.labels(self.component).set(rss)
        if cur is not None:
            self.heap.labels(self.component).set(cur)
            self.heap_peak.labels(self.component).set(peak)
        if self.sink is not None:
            self.sink.write("resources", component=self.component, **row)
        return row

    async def _run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(self.interval_s)

    async def start(self) -> None:
        if self.trace_heap and not tracemalloc.is_tracing():
            tracemalloc.start()
            self._started_tracemalloc = True
        self._t0 = self.clock()
        self.set_phase(self.phase)
        self._task = start_task(self._task, self._run, f"resources-{self.component}")

    async def stop(self) -> None:
        await stop_task(self._task)
        self._task = None
        self.sample()
        if self._started_tracemalloc:
            tracemalloc.stop()
            self._started_tracemalloc = False

    def phase_samples(self, phase: str) -> list[dict]:
        return [s for s in self.samples if s["phase"] == phase]

    def leak_check(self, phase: str = "sustained", confidence: float = 0.95, method: str = "t",
                   tolerance_bytes_per_s: float = 0.0, seed: int = 0) -> dict:
        rows = self.phase_samples(phase)
        est = slope_ci([r["t_s"] for r in rows], [r["rss_bytes"] for r in rows], confidence, method, seed=seed)
        return {"phase": phase, **est.to_json(), "verdict": leak_verdict(est, tolerance_bytes_per_s),
                "tolerance_bytes_per_s": tolerance_bytes_per_s}

    def summary(self, phase: str) -> dict:
        rows = self.phase_samples(phase)
        if not rows:
            return {"phase": phase, "n": 0}
        rss = [r["rss_bytes"] for r in rows]
        heaps = [r["heap_current_bytes"] for r in rows if r["heap_current_bytes"] is not None]
        peaks = [r["heap_peak_bytes"] for r in rows if r["heap_peak_bytes"] is not None]
        mb = 1024 * 1024
        return {"phase": phase, "n": len(rows), "rss_mb_mean": float(np.mean(rss)) / mb,
                "rss_mb_max": max(rss) / mb, "rss_mb_first": rss[0] / mb, "rss_mb_last": rss[-1] / mb,
                "heap_mb_mean": (float(np.mean(heaps)) / mb) if heaps else None,
                "heap_peak_mb": (max(peaks) / mb) if peaks else None}
