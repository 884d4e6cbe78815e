"""Network calls made by the agent host: an aiohttp TraceConfig counting requests by host, method and status.

`trace_config()` plugs into a ClientSession you create; `install()` intercepts every ClientSession created in
this process afterwards (the Python analogue of wrapping `fetch`), so a backend's own sessions are counted
without changing its code. `uninstall()` restores aiohttp.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from types import SimpleNamespace

import aiohttp
from prometheus_client import CollectorRegistry, Counter, Histogram

from collectors.prom import get_metric
from collectors.samples import SampleSink

_ORIGINAL_INIT = aiohttp.ClientSession.__init__


class NetworkCounter:
    def __init__(self, component: str = "turn_sim", sink: SampleSink | None = None,
                 registry: CollectorRegistry | None = None, sample_every_request: bool = False):
        self.component = component
        self.sink = sink
        self.sample_every_request = sample_every_request
        self.counter = get_metric(Counter, "memrig_network_requests_total",
                                  "HTTP requests made by the measured process", ("component", "host", "method",
                                                                                 "status"), registry)
        self.duration = get_metric(Histogram, "memrig_network_request_duration_seconds",
                                   "HTTP request time seen by the measured process", ("component", "host"),
                                   registry)
        self.counts: Tally[tuple[str, str, str]] = Tally()
        self._installed = False

    # -- TraceConfig callbacks ---------------------------------------------------------------------
    async def _on_start(self, session, ctx: SimpleNamespace, params) -> None:
        ctx.memrig_t0 = time.perf_counter()

    def _record(self, ctx: SimpleNamespace, url, method: str, status: str) -> None:
        host = f"{url.host}:{url.port}" if url.port else str(url.host)
        key = (host, method.upper(), status)
        self.counts[key] += 1
        self.counter.labels(self.component, *key).inc()
        dt = time.perf_counter() - getattr(ctx, "memrig_t0", time.perf_counter())
        self.duration.labels(self.component, host).observe(dt)
        if self.sink is not None and self.sample_every_request:
            self.sink.write("network", component=self.component, host=host, method=key[1], status=status,
                            duration_s=dt)

    async def _on_end(self, session, ctx: SimpleNamespace, params) -> None:
        self._record(ctx, params.url, params.method, str(params.response.status))

    async def _on_exception(self, session, ctx: SimpleNamespace, params) -> None:
        self._record(ctx, params.url, params.method, f"error:{type(params.exception).__name__}")

    def trace_config(self) -> aiohttp.TraceConfig:
        tc = aiohttp.TraceConfig()
        tc.on_request_start.append(self._on_start)
        tc.on_request_end.append(self._on_end)
        tc.on_request_exception.append(self._on_exception)
        return tc

    # -- process-wide interception -------------------------------------------------------------------
    def install(self) -> None:
        if self._installed:
            return
        counter = self
        previous = aiohttp.ClientSession.__init__

        def patched(session_self, *args, **kwargs):
            tcs = list(kwargs.pop("trace_configs", None) or [])
            tcs.append(counter.trace_config())
            previous(session_self, *args, trace_configs=tcs, **kwargs)

        patched.__memrig_previous__ = previous  # type: ignore[attr-defined]
        aiohttp.ClientSession.__init__ = patched  # type: ignore[method-assign]
        self._installed = True
        self._patched = patched

    def uninstall(self) -> None:
        if not self._installed:
            return
        if aiohttp.ClientSession.__init__ is self._patched:
            aiohttp.ClientSession.__init__ = self._patched.__memrig_previous__  # type: ignore[method-assign]
        self._installed = False

    # -- reading -----------------------------------------------------------------------------------
    def total(self, host: str | None = None) -> int:
        return sum(n for (h, _, _), n in self.counts.items() if host is None or h == host)

    def snapshot(self) -> dict[str, int]:
        return {f"{h} {m} {s}": n for (h, m, s), n in sorted(self.counts.items())}

    def write_summary(self, **extra) -> None:
        if self.sink is not None:
            self.sink.write("network_summary", component=self.component, total=self.total(),
                            counts=self.snapshot(), **extra)
