"""Event-loop delay: a background task sleeps `interval_s` and records how late it woke up.

The overshoot (actual sleep − requested sleep) is how long some callback held the loop; it goes into a Prometheus
Histogram and into per-window summaries (one JSONL row per `window_s`, a minute by default), the Python analogue
of Node's `perf_hooks.monitorEventLoopDelay()` histogram per minute.
"""

from __future__ import annotations

import asyncio
import time

import numpy as np
from prometheus_client import CollectorRegistry, Histogram

from collectors.buckets import LATENCY_BUCKETS_S
from collectors.prom import get_metric
from collectors.samples import SampleSink
from collectors.tasks import start_task, stop_task
from services.common.percentiles import summary

# Loop delays are mostly sub-millisecond; the shared bounds (collectors/buckets.py) above 1 ms, up to 10 s.
DELAY_BUCKETS = (0.0005, *(b for b in LATENCY_BUCKETS_S if b <= 10.0))


def window_summary(delays_s: list[float]) -> dict:
    """n, p50/p99/max delay in milliseconds of one window (None when the window is empty)."""
    return summary(delays_s, (50, 99), scale=1000.0, stats=("max", "mean"))


class EventLoopMonitor:
    def __init__(self, component: str = "turn_sim", interval_s: float = 0.02, window_s: float = 60.0,
                 sink: SampleSink | None = None, registry: CollectorRegistry | None = None):
        self.component = component
        self.interval_s = interval_s
        self.window_s = window_s
        self.sink = sink
        self.hist = get_metric(Histogram, "memrig_event_loop_delay_seconds",
                               "How late a timer of the measured process's event loop fired",
                               ("component",), registry, buckets=DELAY_BUCKETS)
        self.delays: list[float] = []
        self.windows: list[dict] = []
        self._window: list[float] = []
        self._window_start = 0.0
        self._window_max = 0.0
        self._window_max_at = 0.0  # wall-clock time of the window's largest delay (to line it up with samples)
        self._task: asyncio.Task | None = None
        self.phase = ""

    def set_phase(self, phase: str) -> None:
        self._close_window()
        self.phase = phase

    def _close_window(self) -> None:
        if not self._window:
            self._window_start = time.monotonic()
            return
        row = {"window_start_s": self._window_start, "window_s": time.monotonic() - self._window_start,
               "phase": self.phase, "max_at": self._window_max_at, **window_summary(self._window)}
        self.windows.append(row)
        if self.sink is not None:
            self.sink.write("event_loop", component=self.component, **row)
        self._window = []
        self._window_start = time.monotonic()

    def observe(self, delay_s: float) -> None:
        d = max(0.0, delay_s)
        self.hist.labels(self.component).observe(d)
        self.delays.append(d)
        if not self._window or d > self._window_max:
            self._window_max, self._window_max_at = d, time.time()
        self._window.append(d)
        if time.monotonic() - self._window_start >= self.window_s:
            self._close_window()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            t0 = loop.time()
            await asyncio.sleep(self.interval_s)
            self.observe(loop.time() - t0 - self.interval_s)

    async def start(self) -> None:
        self._window_start = time.monotonic()
        self._task = start_task(self._task, self._run, f"event-loop-{self.component}")

    async def stop(self) -> None:
        await stop_task(self._task)
        self._task = None
        self._close_window()

    def summary(self, phase: str | None = None) -> dict:
        if phase is None:
            return window_summary(self.delays)
        # Whole windows of one phase (windows are closed at every phase change).
        vals = [w for w in self.windows if w["phase"] == phase]
        if not vals:
            return window_summary([])
        return {"n": sum(w["n"] for w in vals), "p50_ms": float(np.median([w["p50_ms"] for w in vals])),
                "p99_ms": max(w["p99_ms"] for w in vals), "max_ms": max(w["max_ms"] for w in vals),
                "windows": len(vals)}
