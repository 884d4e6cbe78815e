"""Collectors: golden numbers computed by hand, and crafted loads (a blocking callback, a deliberate leak)."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import math
import socket
import time

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest

from collectors.event_loop import EventLoopMonitor, window_summary
from collectors.latency import TURN_BUCKETS, TurnLatencyCollector, percentile_summary
from collectors.network import NetworkCounter
from collectors.resources import ResourceSampler, leak_verdict, ols_slope, slope_ci
from collectors.samples import SampleSink, read_samples
from collectors.tokens import TokenOverheadCollector, token_summary


def test_percentile_summary_by_hand():
    s = percentile_summary([0.001, 0.002, 0.003, 0.004])
    assert s["n"] == 4
    assert s["p50_ms"] == pytest.approx(2.5)  # midway between 2 and 3
    assert s["p95_ms"] == pytest.approx(3.85)  # rank 0.95*3 = 2.85 -> 3 + 0.85*(4-3)
    assert s["p99_ms"] == pytest.approx(3.97)
    assert s["mean_ms"] == pytest.approx(2.5)
    assert percentile_summary([])["p50_ms"] is None


def test_turn_latency_collector_feeds_prometheus_and_samples(tmp_path):
    reg = CollectorRegistry()
    sink = SampleSink(tmp_path / "samples.jsonl")
    c = TurnLatencyCollector(sink, reg)
    for v in (0.1, 0.2, 0.3):
        c.observe("none", "baseline", v, phases={"llm": v / 2})
    sink.close()
    assert TURN_BUCKETS[-1] == 60.0
    assert c.summary("none", "baseline")["p50_ms"] == pytest.approx(200.0)
    assert c.summary("none", "baseline")["llm_p50_ms"] == pytest.approx(100.0)
    text = generate_latest(reg).decode()
    assert 'memrig_turn_latency_seconds_count{backend="none",state="baseline"} 3.0' in text
    assert 'le="60.0"' in text
    rows = read_samples(tmp_path / "samples.jsonl")
    assert [r["latency_s"] for r in rows] == [0.1, 0.2, 0.3] and rows[0]["kind"] == "turn"


def test_ols_and_t_ci_by_hand():
    assert ols_slope([0, 1, 2, 3], [1, 3, 5, 7]) == pytest.approx((2.0, 1.0))
    # x=0..4, y=[0,2,1,3,4]: Sxy=9, Sxx=10 -> b=0.9, a=0.2; SSR=1.9; se=sqrt(1.9/3/10)=0.251661;
    # t(0.975, 3)=3.182446 -> half-width 0.800890.
    est = slope_ci([0, 1, 2, 3, 4], [0, 2, 1, 3, 4])
    assert est.slope == pytest.approx(0.9)
    assert est.lo == pytest.approx(0.9 - 0.800890, abs=1e-5)
    assert est.hi == pytest.approx(0.9 + 0.800890, abs=1e-5)
    assert leak_verdict(est) == "leak"  # the whole interval is above 0
    assert leak_verdict(est, tolerance=0.5) == "stable"
    assert leak_verdict(slope_ci([0, 1], [0, 1])) == "unknown"


def test_bootstrap_ci_is_seeded_and_brackets_the_slope():
    x = list(range(20))
    y = [3.0 * xi + (1 if xi % 2 else -1) for xi in x]
    a = slope_ci(x, y, method="bootstrap", seed=7)
    b = slope_ci(x, y, method="bootstrap", seed=7)
    assert a == b
    assert a.lo < a.slope < a.hi and a.lo > 2.5 and a.hi < 3.5
    flat = slope_ci(x, [5.0 + (1 if xi % 2 else -1) for xi in x], method="bootstrap", seed=1)
    assert leak_verdict(flat) == "stable"
    with pytest.raises(ValueError):
        slope_ci(x, y, method="nope")


def test_token_summary_by_hand():
    s = token_summary([10, 20, 30], context_window=1000)
    assert s["tokens_injected_p50"] == 20 and s["context_budget_pct"] == pytest.approx(2.0)
    assert token_summary([])["tokens_injected_p50"] is None


def test_token_collector_counts_cl100k():
    reg = CollectorRegistry()
    c = TokenOverheadCollector(context_window=100, registry=reg)
    assert c.observe("cortex", 5, "hello world") == 2  # cl100k: "hello", " world"
    assert c.observe("cortex", 5, "") == 0
    s = c.summary("cortex", 5)
    assert s["tokens_injected_p50"] == 1.0 and s["context_budget_pct"] == pytest.approx(1.0)
    assert 'memrig_turn_injected_tokens_count{backend="cortex",top_k="5"} 2.0' in generate_latest(reg).decode()
    with pytest.raises(ValueError):
        TokenOverheadCollector(context_window=0, registry=reg)


def test_window_summary_by_hand():
    w = window_summary([0.001, 0.003])
    assert w["p50_ms"] == pytest.approx(2.0) and w["max_ms"] == pytest.approx(3.0) and w["n"] == 2


async def test_blocking_callback_shows_in_event_loop_delay():
    reg = CollectorRegistry()
    sink = SampleSink()
    mon = EventLoopMonitor("t", interval_s=0.01, window_s=60, sink=sink, registry=reg)
    await mon.start()
    await asyncio.sleep(0.1)
    mon.set_phase("blocked")
    asyncio.get_running_loop().call_soon(time.sleep, 0.3)  # a callback that holds the loop for 300 ms
    await asyncio.sleep(0.2)
    await mon.stop()
    assert max(mon.delays) >= 0.25
    blocked = mon.summary("blocked")
    assert blocked["max_ms"] >= 250
    assert any(r["kind"] == "event_loop" and r["phase"] == "blocked" for r in sink.rows)
    text = generate_latest(reg).decode()
    assert 'memrig_event_loop_delay_seconds_bucket{component="t",le="0.25"}' in text


async def test_deliberate_leak_shows_in_rss_slope():
    reg = CollectorRegistry()
    clock = [0.0]  # a simulated clock: 2 s between samples, so bytes/s and bytes/sample differ by 2x

    def tick() -> float:
        return clock[0]

    s = ResourceSampler("leaky", interval_s=3600, registry=reg, clock=tick)  # sample by hand
    await s.start()
    leak = []
    # Memory this process freed earlier (other tests in the same worker) stays resident, and glibc hands it out again
    # without a page fault, so the writes below could leave RSS flat. Returning it first makes every 8 MiB new pages.
    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to return
        pass
    s.set_phase("sustained")
    for _ in range(12):
        leak.append(b"x" * (8 * 1024 * 1024))  # 8 MiB written, kept alive
        clock[0] += 2.0
        await asyncio.sleep(0.01)
        s.sample()
    check = s.leak_check("sustained")
    mib = 1024 * 1024
    # 8 MiB every 2 s = 4 MiB/s (allocator slack aside); a per-sample slope would read 8 MiB
    assert check["verdict"] == "leak" and 3 * mib <= check["slope"] <= 5 * mib
    assert s.summary("sustained")["heap_peak_mb"] >= 90
    leak.clear()
    gc.collect()
    s.set_phase("flat")
    for _ in range(12):
        clock[0] += 2.0
        await asyncio.sleep(0.01)
        s.sample()
    # Flat phase: the RSS is whatever it is, but it does not grow by more than 1 MiB per 2 s step.
    flat = s.leak_check("flat", tolerance_bytes_per_s=0.5 * mib)
    assert flat["verdict"] == "stable"
    await s.stop()
    text = generate_latest(reg).decode()
    assert 'memrig_process_rss_bytes{component="leaky"}' in text
    assert 'memrig_heap_peak_bytes{component="leaky"}' in text


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_network_counter_intercepts_every_session():
    app = web.Application()

    async def ok(_):
        return web.json_response({"ok": True})

    async def bad(_):
        return web.Response(status=503)

    app.router.add_get("/ok", ok)
    app.router.add_post("/bad", bad)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    reg = CollectorRegistry()
    net = NetworkCounter("t", registry=reg)
    net.install()
    try:
        async with aiohttp.ClientSession() as session:  # created after install: intercepted
            for _ in range(2):
                async with session.get(f"http://127.0.0.1:{port}/ok") as r:
                    await r.read()
            async with session.post(f"http://127.0.0.1:{port}/bad") as r:
                await r.read()
            with pytest.raises(aiohttp.ClientConnectionError):
                async with session.get(f"http://127.0.0.1:{_free_port()}/x"):
                    pass
    finally:
        net.uninstall()
        await runner.cleanup()
    host = f"127.0.0.1:{port}"
    assert net.counts[(host, "GET", "200")] == 2
    assert net.counts[(host, "POST", "503")] == 1
    assert any(s.startswith("error:") for (_, _, s) in net.counts)
    assert net.total(host) == 3
    text = generate_latest(reg).decode()
    assert f'memrig_network_requests_total{{component="t",host="{host}",method="GET",status="200"}} 2.0' in text
    # Uninstalled: a new session is no longer counted.
    async with aiohttp.ClientSession() as session:
        assert not any(isinstance(tc, aiohttp.TraceConfig) and tc.on_request_end and
                       net._on_end in [getattr(cb, "__func__", cb) for cb in tc.on_request_end]
                       for tc in session.trace_configs)
    assert math.isfinite(net.total())
