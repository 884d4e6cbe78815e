"""Open-loop driver: schedules, the coordinated-omission correction (hand-checked), validity rules, targets."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
from aiohttp import web

from loadtests.open_loop import (
    DriverConfig,
    GrpcRetrieveTarget,
    HttpRetrieveTarget,
    Phase,
    Records,
    Validity,
    build_schedule,
    drive,
    format_markdown,
    run_open_loop,
    spike_phases,
    step_phases,
    summarise,
)

MS = 1_000_000  # ns


# ------------------------------------------------------------------------------------------------ schedules
def test_constant_schedule_is_evenly_spaced():
    offs, idx = build_schedule([Phase(100, 0.05)])
    assert offs.tolist() == pytest.approx([0.0, 0.01, 0.02, 0.03, 0.04])
    assert idx.tolist() == [0, 0, 0, 0, 0]


def test_step_schedule_phases_follow_each_other():
    phases = step_phases(10, 10, 3, 1.0)
    assert [p.rate for p in phases] == [10, 20, 30]
    offs, idx = build_schedule(phases)
    # 10 + 20 + 30 arrivals; the second phase starts at 1.0 s and is spaced 50 ms.
    assert np.bincount(idx).tolist() == [10, 20, 30]
    assert offs[10] == pytest.approx(1.0) and offs[11] == pytest.approx(1.05)
    assert np.all(np.diff(offs) > 0)


def test_spike_schedule_has_base_spike_recovery():
    offs, idx = build_schedule(spike_phases(10, 100, 1.0, 0.5, 1.0))
    assert np.bincount(idx).tolist() == [10, 50, 10]
    assert offs[10] == pytest.approx(1.0) and offs[60] == pytest.approx(1.5)


def test_poisson_schedule_is_seeded_and_bounded():
    ph = [Phase(200, 5.0, "poisson")]
    a, _ = build_schedule(ph, seed=3)
    b, _ = build_schedule(ph, seed=3)
    c, _ = build_schedule(ph, seed=4)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert a.min() >= 0 and a.max() < 5.0 and np.all(np.diff(a) >= 0)
    # 1000 expected arrivals; sd ~32, so 6 sd either side.
    assert 800 < a.size < 1200


def test_phase_validation_names_the_field():
    with pytest.raises(ValueError, match="phase.arrival"):
        Phase(10, 1.0, "burst")
    with pytest.raises(ValueError, match="phase.duration_s"):
        Phase(10, 0)


# ------------------------------------------------------------------------------------------------ the CO case
def _single_connection(intended_ms: list[int], service_ms: list[int]) -> Records:
    """One connection (concurrency 1): a request is sent when both due and the connection is free."""
    n = len(intended_ms)
    rec = Records.empty(n)
    free = 0
    for i, (t, s) in enumerate(zip(intended_ms, service_ms, strict=True)):
        send = max(t, free)
        free = send + s
        rec.intended[i], rec.dispatched[i], rec.sent[i], rec.done[i] = t * MS, t * MS, send * MS, free * MS
        rec.ok[i] = True
    return rec


def test_stall_hand_checked_corrected_vs_service():
    """100/s for 5 s (every 10 ms); each answer takes 1 ms, except the one sent at 2000 ms takes 500 ms.

    By hand: request 200+j (j >= 1) is intended at 2000+10j but sent when the connection frees at 2500+(j-1),
    done at 2500+j, so its corrected latency is 500-9j ms until that falls to 1 ms (j = 56 is on time).
    Corrected, sorted from the top: 500, 491, 482, 473, 464, 455, ... p99 of 500 samples is the 495th
    smallest = the 6th largest = 455 ms. Service times: one 500 ms, every other 1 ms, so p99 = 1 ms.
    """
    intended = [10 * i for i in range(500)]
    service = [500 if i == 200 else 1 for i in range(500)]
    res = summarise(_single_connection(intended, service), validity=Validity(20.0))
    assert res["corrected"]["n"] == 500 and res["service"]["n"] == 500
    assert res["corrected"]["p99_ms"] == pytest.approx(455, rel=2e-3)  # HdrHistogram: 3 significant digits
    assert res["corrected"]["max_ms"] == pytest.approx(500, rel=2e-3)
    assert res["service"]["p99_ms"] == pytest.approx(1, rel=2e-3)
    assert res["service"]["max_ms"] == pytest.approx(500, rel=2e-3)
    assert res["corrected"]["p50_ms"] == pytest.approx(1, rel=2e-3)
    # The scheduler itself was on time, so the run is valid; the queue wait shows the backlog.
    assert res["valid"] and res["schedule_lag"]["p99_ms"] == 0
    # The longest queue wait is j=1's: sent at 2500, intended at 2010.
    assert res["queue_wait"]["max_ms"] == 490


def test_summary_counts_failures_and_drops_and_invalidates():
    rec = Records.empty(4)
    rec.intended[:] = [0, 10 * MS, 20 * MS, 30 * MS]
    rec.dispatched[:] = rec.intended
    rec.sent[:3] = rec.intended[:3]
    rec.done[:3] = rec.intended[:3] + 2 * MS
    rec.ok[:2] = True
    rec.errors[2] = "http_503"
    rec.dropped[3] = True
    res = summarise(rec)
    assert (res["ok"], res["failed"], res["dropped"], res["errors"]) == (2, 1, 1, {"http_503": 1})
    assert not res["valid"] and "1 arrivals dropped" in res["invalid_reasons"][0]
    assert "corrected" in format_markdown(res)


# ------------------------------------------------------------------------------------------------ real runs
class _StallServer:
    """A tiny aiohttp stand-in for /v1/retrieve that stalls `stall_s` once, `stall_after_s` after its first call."""

    def __init__(self, stall_after_s: float = 1.0, stall_s: float = 0.5, status: int = 200):
        self.stall_after_s, self.stall_s, self.status = stall_after_s, stall_s, status
        self.first: float | None = None
        self.stalled = False
        self.calls = 0

    async def handle(self, request: web.Request) -> web.Response:
        await request.json()
        self.calls += 1
        now = time.monotonic()
        self.first = self.first or now
        if not self.stalled and now - self.first >= self.stall_after_s:
            self.stalled = True
            await asyncio.sleep(self.stall_s)
        return web.json_response({"results": []}, status=self.status)

    async def __aenter__(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/retrieve", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        return f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc) -> None:
        await self.runner.cleanup()


async def test_injected_stall_corrected_p99_exceeds_uncorrected():
    """One 500 ms stall 1 s into a 3 s, 100/s schedule on one connection: about 50 arrivals queue behind it.

    Corrected p99 (4th largest of 300) is about 473 ms by the same arithmetic as the hand-checked case; the
    service-time p99 only sees the one slow answer. Margins are wide because the box is shared.
    """
    srv = _StallServer(stall_after_s=1.0, stall_s=0.5)
    async with srv as url:
        cfg = DriverConfig(concurrency=1, max_pending=1000, validity=Validity(lag_p99_threshold_ms=100))
        res = await run_open_loop(HttpRetrieveTarget(url, concurrency=1), [Phase(100, 3.0)], seed=1, config=cfg)
    assert srv.stalled and res["ok"] == 300 and res["dropped"] == 0
    assert res["corrected"]["p99_ms"] > 300
    assert res["corrected"]["p99_ms"] > res["service"]["p99_ms"] + 200
    assert res["service"]["max_ms"] >= 490  # the stalled request itself
    assert res["valid"], res["invalid_reasons"]


async def test_in_flight_bound_drops_and_invalidates():
    class Slow:
        name = "slow"

        async def start(self): ...

        async def close(self): ...

        async def call(self, i):
            await asyncio.sleep(0.3)

    offs, idx = build_schedule([Phase(100, 0.2)])
    rec = await drive(Slow(), offs, idx, DriverConfig(concurrency=2, max_pending=4))
    res = summarise(rec)
    # 20 arrivals 10 ms apart; only 4 fit before the first answer at 300 ms.
    assert res["dropped"] == 16 and res["ok"] == 4 and not res["valid"]


async def test_blocked_generator_lags_and_is_invalid():
    class Blocking:
        name = "blocking"

        async def start(self): ...

        async def close(self): ...

        async def call(self, i):
            time.sleep(0.03)  # blocks the event loop, as a CPU-starved generator would

    offs, idx = build_schedule([Phase(100, 0.3)])
    res = summarise(await drive(Blocking(), offs, idx, DriverConfig()), validity=Validity(lag_p99_threshold_ms=20))
    assert not res["valid"] and any("schedule lag" in r for r in res["invalid_reasons"])


async def test_http_errors_are_counted_by_status():
    async with _StallServer(stall_after_s=1e9, status=503) as url:
        res = await run_open_loop(HttpRetrieveTarget(url, concurrency=4), [Phase(50, 0.2)])
    assert res["ok"] == 0 and res["errors"] == {"http_503": 10}


async def test_grpc_target_against_in_process_backend():
    from services.adapters.base import BackendContext
    from services.adapters.none.backend import NoMemoryBackend
    from services.adapters.server import serve_backend

    ready, stop = asyncio.Event(), asyncio.Event()
    server = asyncio.create_task(serve_backend(NoMemoryBackend({}, BackendContext(embedder_name="hash")),
                                               port=0, metrics_port=None, ready=ready, stop=stop, announce=False))
    await asyncio.wait_for(ready.wait(), 30)
    try:
        res = await run_open_loop(GrpcRetrieveTarget(f"127.0.0.1:{ready.port}"), [Phase(50, 0.4)],
                                  config=DriverConfig(concurrency=8, validity=Validity(100)))
    finally:
        stop.set()
        await server
    assert res["ok"] == 20 and res["failed"] == 0 and res["corrected"]["n"] == 20
