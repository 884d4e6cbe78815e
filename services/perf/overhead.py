"""The rig's own overhead, measured against the thing it wraps, in the same run:
- the fault proxy's passthrough (no fault set) against a direct HTTP call to the cortex-mock: the same requests
  (`GET /health`, and `POST /v1/retrieve` with the benchmark's queries), alternating direct / proxied;
- the coordinator's cost per probe: the runner's real per-sample path (`runner.run_one` → ProbeContext
  retrieval cache and record → `RunDir.append_sample`) over a retrieval-only condition on a backend that
  returns at once; the per-probe overhead is the whole time minus the backend's own time
  (`server_duration_ns`, measured around `MemoryBackend.retrieve`).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from services.common.errors import DependencyError
from services.perf import synth
from services.perf.passes import consecutive_passes, median_of_passes, paired_difference_ms
from services.perf.stats import difference, ratio


async def proxy_passthrough(direct_url: str, proxy_url: str, queries: list[str], rounds: int = 200) -> dict[str, Any]:
    """Alternate the same request direct and through the proxy (which goes first alternates each round); p50/p99
    of each (median of MIN_PASSES passes) and what the proxy adds as the median of the paired differences."""
    out: dict[str, Any] = {"rounds": rounds, "client": "aiohttp, one keep-alive session, sequential"}
    headers = {"x-api-key": "memrig-dev:perf", "Content-Type": "application/json"}
    async with aiohttp.ClientSession() as s:
        async def one(method: str, base: str, path: str, body: bytes | None) -> int:
            t0 = time.perf_counter_ns()
            async with s.request(method, base + path, data=body, headers=headers) as r:
                await r.read()
                if r.status >= 400:
                    raise DependencyError(f"{method} {base}{path}: HTTP {r.status}", r.status)
            return time.perf_counter_ns() - t0

        cases = [("health", "GET", "/health", [None])]
        if queries:
            bodies = [json.dumps({"query": q, "top_k": 6, "mode": "fast", "user_id": "memrig:perf",
                                  "reference_date": "2026-06-01T00:00:00.000Z"}).encode() for q in queries]
            cases.append(("retrieve_fast", "POST", "/v1/retrieve", bodies))
        for label, method, path, bodies in cases:
            d, p = [], []
            for i in range(rounds + 5):
                body = bodies[i % len(bodies)]
                first, second = (direct_url, proxy_url) if i % 2 == 0 else (proxy_url, direct_url)
                a = await one(method, first, path, body)
                b = await one(method, second, path, body)
                if i < 5:
                    continue
                (d if first == direct_url else p).append(a)
                (p if first == direct_url else d).append(b)
            # the rounds in MIN_PASSES consecutive passes: each figure the median of the passes' figures
            pd, pp = median_of_passes(consecutive_passes(d)), median_of_passes(consecutive_passes(p))
            out[label] = {"direct": pd, "proxied": pp,
                          # what the proxy adds: the median of paired (same request, back to back) differences
                          "added_p50_ms": paired_difference_ms(p, d), "added_p99_ms": paired_difference_ms(p, d, 99),
                          "added_p50_of_p50s_ms": difference(pp.get("p50"), pd.get("p50")),
                          "ratio_p50": ratio(pp.get("p50"), pd.get("p50"))}
    return out


async def coordinator_per_probe(samples: int = 500) -> dict[str, Any]:
    """Time the runner's per-sample path over a backend that does nothing, minus the backend's own time."""
    from services.adapters.client import InProcessBackendClient
    from services.adapters.none.backend import NoMemoryBackend
    from services.coordinator.context import ProbeContext
    from services.coordinator.results import RunDir
    from services.coordinator.runner import run_one
    from services.coordinator.suites.base import Condition, Probe, Suite, SuiteData

    class _PerfSuite(Suite):
        name = "perf-overhead"

        def load(self) -> SuiteData:
            return SuiteData({}, [])

        def conditions(self, backends, capabilities):
            return [Condition("retrieval", ("backend:stub",), answer=False)]

        def score(self, samples):
            return {}

        def render(self, metrics):
            return ""

    suite = _PerfSuite()
    cond = suite.conditions(["stub"], {})[0]
    client = InProcessBackendClient(NoMemoryBackend())
    texts = synth.memories(1000)
    probes = [Probe(id=f"p{i}", question=q, ground_truth="x", expected=["x"], namespace="perf",
                    reference_time=synth.REFERENCE_TIME)
              for i, q in enumerate(synth.queries(texts, 1000, samples + 20))]
    with tempfile.TemporaryDirectory(prefix="memrig-perf-") as tmp:
        run_dir = RunDir(Path(tmp) / "run")
        ctx = ProbeContext({"stub": client}, {}, None, None, run_dir.path, suite.name,
                           retrieve_params={"stub": (6, "fast")})
        total, backend, client_lat = [], [], []
        for i, p in enumerate(probes):
            t0 = time.perf_counter_ns()
            sample = await run_one(suite, ctx, p, cond, {})
            run_dir.append_sample(sample)
            dt = time.perf_counter_ns() - t0
            if sample.get("status") != "ok":
                # RuntimeError, no MemrigError branch: the backend is the in-process `none` control, with no input
                # and no dependency that could fail; a failed probe here is a bug in the rig's own path
                raise RuntimeError(f"coordinator overhead probe failed: {sample.get('error')}")
            r = sample["retrievals"]["stub"]
            if i >= 20:
                total.append(dt)
                backend.append(r["server_ms"] * 1e6)
                client_lat.append(r["latency_ms"] * 1e6)
    await client.close()
    per_probe = [t - b for t, b in zip(total, backend, strict=True)]
    bookkeeping = [t - c for t, c in zip(total, client_lat, strict=True)]

    def passes(xs: list[float]) -> dict[str, Any]:
        return median_of_passes(consecutive_passes(xs))

    return {"samples": len(total), "total": passes(total), "backend_own": passes(backend),
            "host_and_client": passes([c - b for c, b in zip(client_lat, backend, strict=True)]),
            "per_probe_overhead": passes(per_probe), "coordinator_bookkeeping": passes(bookkeeping),
            "what": "runner.run_one + ProbeContext retrieval record + RunDir.append_sample, retrieval-only "
                    "condition, in-process `none` backend; overhead = total - backend's own time"}
